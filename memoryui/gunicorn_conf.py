"""gunicorn settings for `make run` and benchmark workload 8 (chosen by measurement: docs/BENCHMARKS.md).

SQLite: one worker process with threads. Its writers then queue on the process's
writer lock (memoryui/sqlite/base.py) instead of sleeping in SQLite's busy handler,
which is what several processes would do; the threads overlap request parsing,
JSON and the network with the one writer's fsync. PostgreSQL: a worker per core,
each with threads, since its writers lock rows, not the database.

MEMORYUI_WORKERS and MEMORYUI_THREADS override the choice.
"""

import os

_postgres = os.environ.get("DATABASE_URL", "").strip().startswith(("postgres", "postgresql"))

worker_class = "gthread"
workers = int(os.environ.get("MEMORYUI_WORKERS") or (max(2, os.cpu_count() or 1) if _postgres else 1))
threads = int(os.environ.get("MEMORYUI_THREADS") or 8)
# Agents keep their connection open between steps (httpx does).
keepalive = 30
# Request lines up to gunicorn's ceiling, so that the app itself answers an address
# over 8,000 characters (414, as JSON under /api/) instead of gunicorn's plain page.
limit_request_line = 8190
# The access log holds who asked for which path, when, and the answer: never the query
# string (a subject may be in `?subject=` of the API) nor the Referer (a page's full URL).
access_log_format = '%(h)s %(t)s "%(m)s %(U)s %(H)s" %(s)s %(B)s %(D)sus "%(a)s"'
