"""Workload 7: the conversation page at 100, 10,000 and 1,000,000 messages.

Server time of GET /conversations/<id>/ through Django's test client (the whole
stack: middleware, session, the view's reads, template rendering), logged in as
an auditor. First page: no parameters. Deep page: `?after=<n/2>`, the keyset
parameter the page's own "more" link uses, half-way into the record. The
baseline of both targets is the 100-message page (which shows all 100 rows, a
full page, as every other page does). Each sample is the mean of a batch of
requests; the figure is the median of the samples, the sizes alternating.
"""

import sys
import time

import common


def main(argv=None):
    args = common.parse_args(__doc__.splitlines()[0], argv)
    reps = args.reps or (1 if args.quick else 5)
    batch = 1 if args.quick else 5
    started = time.perf_counter()
    db, ids = common.big_database(args.shared, args.quick)
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    from conversations.roles import assign_role

    user, created = get_user_model().objects.get_or_create(username="bench-auditor")
    if created:
        assign_role(user, "auditor")
    client = Client(SERVER_NAME="localhost")
    client.force_login(user)
    sizes = [s for s in (100, 10_000, max(ids)) if s in ids]
    urls = {}
    for n in sizes:
        urls[("first", n)] = f"/conversations/{ids[n]}/"
        if n > 100:
            urls[("deep", n)] = f"/conversations/{ids[n]}/?after={n // 2}"
    queries = {}
    for key, url in urls.items():
        with CaptureQueriesContext(connection) as ctx:
            response = client.get(url)
        assert response.status_code == 200, (url, response.status_code)
        assert response.content.count(b"<article class=\"msg") >= 100, url
        queries[key] = len(ctx.captured_queries)

    def run(url):
        def go():
            t0 = time.perf_counter()
            for _ in range(batch):
                response = client.get(url)
            dt = (time.perf_counter() - t0) / batch
            assert response.status_code == 200
            return dt
        return go

    runs = common.alternate({key: run(url) for key, url in urls.items()}, reps)
    t = {k: common.median(v) * 1000 for k, v in runs.items()}
    base = t[("first", 100)]
    big = max(sizes)
    res = common.Results("7 conversation page")
    res.sizes = {"sizes": sizes, "reps": reps, "batch": batch}
    for (which, n), ms in t.items():
        label = "first page" if which == "first" else f"deep page (?after={n // 2:,})"
        target, ratio, passed = "", None, None
        if n == big:
            target, ratio = f"@{big:,} / first page @100 ≤ 1.5", ms / base
            passed = ratio <= 1.5
        elif n != 100:
            ratio = ms / base
        res.add(metric=f"{label} at {n:,} messages", memoryui=ms, unit="ms", target=target, ratio=ratio,
                passed=passed, note=f"{queries[(which, n)]} SQL queries")
    common.finish(res, args, started)


if __name__ == "__main__":
    sys.exit(main())
