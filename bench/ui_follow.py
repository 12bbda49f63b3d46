#!/usr/bin/env python3
"""Live follow in a real Chromium: how long an appended row takes to appear on an open
conversation page, and what the open page costs the server while nothing happens.

    bench/ui_follow.py --url http://127.0.0.1:8000 --user ada --password … --key mui_… \\
        [--conversation ID] [--appends 30]

Run a server on a database with `manage.py load_demo` first. The script logs in, opens
the conversation at its newest row (?at=last, the reader at the end), then appends
`--appends` rows through the JSON API, one at a time, at random moments (0.4–1.6 s
apart, so appends fall anywhere in the page's polling cycle). The page records, by a
MutationObserver, the moment each row's element enters the document; the script takes
the moment the API answered the append. Delay = shown − answered, both by this machine's
clock (the browser and the script run on the same machine).

Also counted, over a quiet --idle seconds (no appends): the requests the open page
sends per second, and how many were answered 304 / with rows. A page that holds a
connection open (SSE, long poll) would show up as a request that does not finish.
Prints one JSON line: p50/p90/max delay in ms, requests per second while idle.
"""

import argparse
import json
import random
import statistics
import time
import urllib.request

from playwright.sync_api import sync_playwright

OBSERVE = """() => {
  window.__shown = {};
  new MutationObserver(list => {
    const now = Date.now();
    for (const m of list) for (const n of m.addedNodes) {
      if (n.nodeType !== 1) continue;
      const rows = n.matches('article.msg[id^=p]') ? [n] : n.querySelectorAll('article.msg[id^=p]');
      rows.forEach(r => { if (!(r.id in window.__shown)) window.__shown[r.id] = now; });
    }
  }).observe(document.body, {childList: true, subtree: true});
}"""


def append(url, key, cid, text):
    body = json.dumps({"kind": "note", "text": text}).encode()
    request = urllib.request.Request(f"{url}/api/v1/conversations/{cid}/messages", data=body, method="POST",
                                     headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"})
    with urllib.request.urlopen(request) as response:
        answer = json.loads(response.read())
    return answer["position"], time.time() * 1000


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--user", required=True)
    parser.add_argument("--password", required=True)
    parser.add_argument("--key", required=True, help="an API key with the write scope")
    parser.add_argument("--conversation", required=True)
    parser.add_argument("--appends", type=int, default=30)
    parser.add_argument("--idle", type=float, default=10)
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=args.chromium, headless=True, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1440, "height": 900})
        page.set_default_timeout(60_000)
        page.goto(args.url + "/login/")
        page.fill("input[name=username]", args.user)
        page.fill("input[name=password]", args.password)
        page.click("button[type=submit]")
        page.wait_for_url(args.url + "/")
        with urllib.request.urlopen(urllib.request.Request(
                f"{args.url}/api/v1/conversations/{args.conversation}",
                headers={"Authorization": f"Bearer {args.key}"})) as response:
            last = json.loads(response.read())["message_count"] - 1
        page.goto(f"{args.url}/conversations/{args.conversation}/?at={last}#p{last}")
        page.wait_for_selector(f"#p{last}")
        page.evaluate("window.scrollTo(0, document.scrollingElement.scrollHeight)")
        page.evaluate(OBSERVE)

        # Idle: what an open page costs the server while nothing is written.
        sent, statuses = [], []
        page.on("request", lambda r: sent.append(r.url))
        page.on("response", lambda r: statuses.append(r.status))
        page.wait_for_timeout(args.idle * 1000)
        idle = {"requests_per_second": round(len(sent) / args.idle, 2),
                "answered_304": statuses.count(304), "answered_200": statuses.count(200)}

        answered = {}
        for i in range(args.appends):
            time.sleep(rng.uniform(0.4, 1.6))
            position, at = append(args.url, args.key, args.conversation, f"bench follow {i}")
            answered[f"p{position}"] = at
        deadline = time.time() + 30
        while time.time() < deadline:
            shown = page.evaluate("window.__shown")
            if all(k in shown for k in answered):
                break
            page.wait_for_timeout(100)
        shown = page.evaluate("window.__shown")
        delays = sorted(shown[k] - at for k, at in answered.items() if k in shown)
        missing = [k for k in answered if k not in shown]
        newest = max(answered, key=lambda k: int(k[1:]))
        pinned = page.evaluate(f"""() => {{ const r = document.getElementById('{newest}');
            return !!r && r.getBoundingClientRect().bottom <= window.innerHeight + 1; }}""")
        result = {
            "appends": args.appends, "shown": len(delays), "missing": missing,
            "delay_ms": {"p50": round(statistics.median(delays)) if delays else None,
                         "p90": round(delays[int(0.9 * (len(delays) - 1))]) if delays else None,
                         "max": round(delays[-1]) if delays else None},
            "newest_row_on_screen_at_the_end": pinned,
            "idle": idle,
        }
        print(json.dumps(result))
        browser.close()


if __name__ == "__main__":
    main()
