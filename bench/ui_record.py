#!/usr/bin/env python3
"""The full record in a real Chromium: first paint, time to reach #2400 and the end
of the 3,602-message demo session by scrolling (and by the "↓ Latest" control, where
the page has one), and the DOM size on the way.

    bench/ui_record.py --url http://127.0.0.1:8000 --user ada --password …

Run a server on a database with `manage.py load_demo` first. The script logs in,
opens the longest conversation and scrolls the full record the way a reader drags
the scrollbar to its end: every 50 ms the window moves so that the bottom of the full
record is at the bottom of the screen, until #2400 and then "End of the record" are
on the page. (Scrolling to the bottom of the *page* would follow whichever of the two
side-by-side views is longer, often the active view.) Then it scrolls back to the
top two screens every 50 ms, checking that every row of the record is on the page exactly once
in order, or within an unloaded range, and finally jumps to #2400 by permalink.
Prints one JSON line.
"""

import argparse
import json
import time

from playwright.sync_api import sync_playwright


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--user", required=True)
    parser.add_argument("--password", required=True)
    parser.add_argument("--conversation", help="id (default: the longest on the first list page)")
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    parser.add_argument("--width", type=int, default=1440)
    parser.add_argument("--height", type=int, default=900)
    args = parser.parse_args()
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=args.chromium, headless=True, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": args.width, "height": args.height})
        page.set_default_timeout(120_000)
        page.goto(args.url + "/login/")
        page.fill("input[name=username]", args.user)
        page.fill("input[name=password]", args.password)
        page.click("button[type=submit]")
        page.wait_for_url(args.url + "/")
        cid = args.conversation or page.evaluate("""() => {
            let best = null, most = -1;
            document.querySelectorAll('table.conversations tbody tr').forEach(tr => {
                const n = +tr.querySelector('td.num').textContent; const a = tr.querySelector('a');
                if (a && n > most) { most = n; best = a.getAttribute('href'); } });
            return best; }""")
        path = cid if cid.startswith("/") else f"/conversations/{cid}/"
        page.goto(args.url + path)
        page.wait_for_load_state("load")
        # The paint entry may be recorded after "load": wait for it (5 s at most).
        paint = page.evaluate("""() => new Promise(done => {
            new PerformanceObserver(list => {
              const fcp = list.getEntries().find(e => e.name === 'first-contentful-paint');
              if (fcp) done(Math.round(fcp.startTime));
            }).observe({type: 'paint', buffered: true});
            setTimeout(() => done(null), 5000); })""")
        # The "↓ Latest" control, where the page has one: from the click to the
        # last row on screen. Then the page is opened again for the scroll.
        latest = None
        if page.query_selector("a[data-go=latest]"):
            last = page.get_attribute("a[data-go=latest]", "href").rsplit("#p", 1)[1]
            t0 = time.perf_counter()
            page.click("a[data-go=latest]")
            page.wait_for_function(f"""() => {{ const r = document.getElementById('p{last}');
                if (!r) return false; const box = r.getBoundingClientRect();
                return box.top < window.innerHeight && box.bottom > 0; }}""")
            latest = round(time.perf_counter() - t0, 2)
            page.goto(args.url + path)
            page.wait_for_load_state("load")
        t0 = time.perf_counter()
        reached = {}
        nodes = {}
        most_nodes = 0
        to_record_end = """() => { const r = document.getElementById('record').getBoundingClientRect();
            window.scrollBy(0, r.bottom - window.innerHeight); }"""
        count_nodes = "document.getElementsByTagName('*').length"
        while time.perf_counter() - t0 < 300:
            page.evaluate(to_record_end)
            page.wait_for_timeout(50)
            most_nodes = max(most_nodes, page.evaluate(count_nodes))
            if "2400" not in reached and page.query_selector("#p2400"):
                reached["2400"] = round(time.perf_counter() - t0, 2)
                nodes["2400"] = page.evaluate(count_nodes)
            if page.query_selector("#record p.end"):
                reached["end"] = round(time.perf_counter() - t0, 2)
                nodes["end"] = page.evaluate(count_nodes)
                break
        rows = page.evaluate("document.querySelectorAll('#record article.msg').length")
        # Back to the top, a screen at a time, checking the record is exact on the way.
        exact = True
        t2 = time.perf_counter()
        # Rows strictly increasing (none twice); chunks and unloaded gaps cover contiguous ranges.
        check = """() => { let last = null, ok = true, prev = -2;
            document.querySelectorAll('#record article.msg[data-position]').forEach(a => {
              if (+a.dataset.position <= prev) ok = false; prev = +a.dataset.position; });
            for (const el of document.getElementById('record').children) {
              if (el.dataset.after === undefined) continue;
              if (last !== null && +el.dataset.after !== last) ok = false;
              last = +el.dataset.until;
            }
            return ok; }"""
        steps = 0
        while page.evaluate("window.scrollY") > 0 and time.perf_counter() - t2 < 300:
            page.evaluate("window.scrollBy(0, -2 * window.innerHeight)")
            page.wait_for_timeout(50)
            steps += 1
            if steps % 5 == 0:
                most_nodes = max(most_nodes, page.evaluate(count_nodes))
                exact = exact and page.evaluate(check)
        back = round(time.perf_counter() - t2, 2)
        page.wait_for_timeout(1000)
        exact = exact and page.evaluate(check)
        t1 = time.perf_counter()
        page.goto(args.url + path + "?at=2400#p2400")
        page.wait_for_selector("#p2400")
        jump = time.perf_counter() - t1
        print(json.dumps({"first_contentful_paint_ms": paint, "latest_button_seconds": latest,
                          "seconds_to": reached, "dom_nodes_at": nodes,
                          "most_dom_nodes": most_nodes, "record_rows_on_page_at_end": rows,
                          "seconds_back_to_top": back, "record_exact": exact,
                          "jump_to_2400_seconds": round(jump, 2)}))
        browser.close()


if __name__ == "__main__":
    main()
