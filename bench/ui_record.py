#!/usr/bin/env python3
"""The full record in a real Chromium: first paint, time to reach #2400 and the end
of the 3,602-message demo session by scrolling, and the DOM size on the way.

    bench/ui_record.py --url http://127.0.0.1:8000 --user ada --password …

Run a server on a database with `manage.py load_demo` first. The script logs in,
opens the longest conversation, and jumps to the bottom of the page (End) every 50 ms,
until the row and then
"End of the record" exist. Prints one JSON line.
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
        paint = page.evaluate("(performance.getEntriesByType('paint').find(e => e.name === 'first-contentful-paint') || {}).startTime || null")
        t0 = time.perf_counter()
        reached = {}
        nodes = {}
        while time.perf_counter() - t0 < 300:
            page.evaluate("window.scrollTo(0, document.scrollingElement.scrollHeight)")
            page.wait_for_timeout(50)
            if "2400" not in reached and page.query_selector("#p2400"):
                reached["2400"] = time.perf_counter() - t0
                nodes["2400"] = page.evaluate("document.getElementsByTagName('*').length")
            if page.query_selector("#record p.end"):
                reached["end"] = time.perf_counter() - t0
                nodes["end"] = page.evaluate("document.getElementsByTagName('*').length")
                break
        rows = page.evaluate("document.querySelectorAll('#record article.msg').length")
        t1 = time.perf_counter()
        page.goto(args.url + path + "?at=2400#p2400")
        page.wait_for_selector("#p2400")
        jump = time.perf_counter() - t1
        print(json.dumps({"first_contentful_paint_ms": paint, "seconds_to": reached, "dom_nodes_at": nodes,
                          "record_rows_loaded": rows, "jump_to_2400_seconds": round(jump, 2)}))
        browser.close()


if __name__ == "__main__":
    main()
