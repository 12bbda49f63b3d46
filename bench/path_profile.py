"""The request path's own CPU per request, in process (not a workload of run.py).

Calls the WSGI application (every middleware, ninja, the store) with hand-built
requests, as gunicorn would, on a throw-away SQLite file with `PRAGMA synchronous=OFF`
so that no fsync is timed: what is left is what the path itself costs. Modes:

- append: a keyed POST …/messages (an `Idempotency-Key` each, as memoryui_client sends);
- unkeyed: the same POST without an `Idempotency-Key` (what the key costs);
- floor: the same POST without a key (401 before any database work);
- get: an authenticated GET of the conversation;
- store: store.append_message alone (no HTTP, no key, no middleware).

    .venv/bin/python bench/path_profile.py                 # CPU ms per request, rounds alternating
    .venv/bin/python bench/path_profile.py --profile append # cProfile of one mode, by own time
"""

import argparse
import cProfile
import io
import json
import os
import pstats
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

import common

MODES = ("append", "unkeyed", "floor", "get", "store")


def _environ(method: str, path: str, body: bytes, headers: dict) -> dict:
    environ = {
        "REQUEST_METHOD": method, "PATH_INFO": path, "QUERY_STRING": "", "SCRIPT_NAME": "",
        "SERVER_NAME": "127.0.0.1", "SERVER_PORT": "8000", "SERVER_PROTOCOL": "HTTP/1.1",
        "REMOTE_ADDR": "127.0.0.1", "wsgi.url_scheme": "http", "wsgi.input": io.BytesIO(body),
        "wsgi.errors": sys.stderr, "wsgi.multithread": True, "wsgi.multiprocess": False,
        "wsgi.run_once": False, "wsgi.version": (1, 0), "CONTENT_LENGTH": str(len(body)),
    }
    if body:
        environ["CONTENT_TYPE"] = "application/json"
    for name, value in headers.items():
        environ["HTTP_" + name.upper().replace("-", "_")] = value
    return environ


# What a cookieless API request passes through if the page-only middleware were left out
# (--api-middleware): what that would save, measured rather than guessed.
API_ONLY_MIDDLEWARE = [
    "memoryui.requestlog.RequestObservationMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "conversations.middleware.SecurityHeadersMiddleware",
    "conversations.middleware.ApiErrorShapeMiddleware",
    # The API admits a logged-in person by their session (apiauth.SessionReadAuth).
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "conversations.idempotency.IdempotencyMiddleware",
]


def setup(workdir: Path, *, api_only_middleware: bool = False, database_url: str = ""):
    if database_url:
        common.migrate_database(database_url, workdir / "data")
        common.close_django()
    else:
        common.setup_django(workdir / "memoryui.sqlite3")
    if api_only_middleware:
        from django.conf import settings

        settings.MIDDLEWARE = API_ONLY_MIDDLEWARE
    from django.db.backends.signals import connection_created

    def no_fsync(sender, connection, **kwargs):
        with connection.cursor() as cursor:
            if connection.vendor == "sqlite":
                cursor.execute("PRAGMA synchronous=OFF")
            else:
                cursor.execute("SET synchronous_commit = off")

    connection_created.connect(no_fsync, weak=False)
    from conversations import api_keys, store
    from memoryui.wsgi import application

    _, secret = api_keys.create_api_key(name="profile", scopes=["read", "write"])
    cid = store.create_conversation(title="profile").pk
    return application, secret, cid


def runner(mode: str, application, secret: str, cid):
    from conversations import store

    bearer = {"Authorization": f"Bearer {secret}"}
    body = json.dumps({"kind": "user", "content": "What is the status of order 7?"}).encode()
    path = f"/api/v1/conversations/{cid}/messages"
    expected = {"append": "201", "unkeyed": "201", "floor": "401", "get": "200"}.get(mode)

    def start_response(status, headers, exc_info=None):
        if not status.startswith(expected):
            raise RuntimeError(f"{mode}: {status}")

    def one():
        if mode == "store":
            store.append_message(conversation_id=cid, message={"kind": "user", "content": "x"})
            return
        if mode == "append":
            environ = _environ("POST", path, body, {**bearer, "Idempotency-Key": uuid.uuid4().hex})
        elif mode == "unkeyed":
            environ = _environ("POST", path, body, bearer)
        elif mode == "floor":
            environ = _environ("POST", path, body, {})
        else:
            environ = _environ("GET", f"/api/v1/conversations/{cid}", b"", bearer)
        response = application(environ, start_response)
        b"".join(response)
        response.close()

    return one


def _backend_cpu() -> float:
    """CPU seconds of this connection's PostgreSQL backend so far (0 on SQLite)."""
    from django.db import connection

    if connection.vendor != "postgresql":
        return 0.0
    connection.ensure_connection()
    pid = connection.connection.info.backend_pid
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu_ms(one, count: int) -> tuple[float, float]:
    """(this process's, the database backend's) CPU ms per call."""
    server = _backend_cpu()
    started = time.process_time()
    for _ in range(count):
        one()
    return ((time.process_time() - started) * 1000 / count,
            (_backend_cpu() - server) * 1000 / count)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", choices=MODES, help="print a cProfile of this mode instead")
    parser.add_argument("--count", type=int, default=800, help="requests per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--top", type=int, default=35)
    parser.add_argument("--database-url", default="",
                        help="a PostgreSQL database to profile on (commits not waited for), "
                             "instead of a throw-away SQLite file; the backend's CPU is read too")
    parser.add_argument("--api-middleware", action="store_true",
                        help="leave out the page-only middleware (static files, CSRF, messages, htmx, error pages)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="memoryui-path-") as work:
        application, secret, cid = setup(Path(work), api_only_middleware=args.api_middleware,
                                         database_url=args.database_url)
        runners = {mode: runner(mode, application, secret, cid) for mode in MODES}
        for one in runners.values():  # warm: imports, caches, the connection
            for _ in range(50):
                one()
        if args.profile:
            profile = cProfile.Profile()
            profile.enable()
            for _ in range(args.count):
                runners[args.profile]()
            profile.disable()
            stats = pstats.Stats(profile).sort_stats("tottime")
            stats.print_stats(args.top)
            stats.sort_stats("cumulative").print_stats(args.top)
            return 0
        figures = {mode: [] for mode in MODES}
        for _ in range(args.rounds):
            for mode, one in runners.items():
                figures[mode].append(cpu_ms(one, args.count))
        for mode in MODES:
            own = [v[0] for v in figures[mode]]
            server = [v[1] for v in figures[mode]]
            line = (f"{mode:7s} CPU ms/request: median {statistics.median(own):.3f} "
                    f"({', '.join(f'{v:.3f}' for v in own)})")
            if args.database_url:
                line += f"; database backend {statistics.median(server):.3f}"
            print(line)
        common.close_django()
    return 0


if __name__ == "__main__":
    sys.exit(main())
