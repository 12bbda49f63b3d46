"""Workload 8: appends per second over HTTP with 4 concurrent clients (gunicorn).

gunicorn serves memoryui.wsgi on 127.0.0.1 (4 sync workers) over the workload's
own SQLite file; 4 client threads each POST their messages one at a time to
`/api/v1/conversations/{id}/messages` with a Bearer key (scope write), each
client its own conversation, a new connection per request (sync workers close
it). In the same run, alternating: the same appends by 4 threads through
`conversations.store.append_message` in this process, and by 4 threads of raw
sqlite3 on a raw file. Clients and server share the machine's cores.
"""

import http.client
import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import common

CLIENTS = 4
ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_gunicorn(port: int, log: Path) -> subprocess.Popen:
    env = dict(os.environ)
    proc = subprocess.Popen(
        [str(Path(sys.executable).parent / "gunicorn"), "memoryui.wsgi", "-b", f"127.0.0.1:{port}",
         "-w", str(CLIENTS), "--log-level", "warning"],
        cwd=ROOT, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"gunicorn exited: {log.read_text()[-2000:]}")
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            conn.request("GET", "/login/")
            conn.getresponse().read()
            conn.close()
            return proc
        except OSError:
            time.sleep(0.2)
    proc.terminate()
    raise RuntimeError("gunicorn did not answer within 60 s")


def in_threads(work, count):
    """Run work(i) in `count` threads at once; wall time of the whole."""
    errors = []

    def target(i):
        try:
            work(i)
        except BaseException as exc:  # reported after join
            errors.append(exc)

    threads = [threading.Thread(target=target, args=(i,)) for i in range(count)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    dt = time.perf_counter() - t0
    if errors:
        raise errors[0]
    return dt


def main(argv=None):
    args = common.parse_args(__doc__.splitlines()[0], argv)
    per_client = 10 if args.quick else 250
    reps = args.reps or (1 if args.quick else 3)
    started = time.perf_counter()
    common.setup_django(args.workdir / "memoryui.sqlite3")
    from django.db import connection

    from conversations import store

    _, secret = store.create_api_key(name="bench", scopes=["read", "write"])
    bodies = [json.dumps(m) for m in common.messages(per_client)]
    msgs = common.messages(per_client)
    raw_path = args.workdir / "raw.sqlite3"
    common.raw_connect(raw_path).close()
    connection.close()
    port = free_port()
    server = start_gunicorn(port, args.workdir / "gunicorn.log")
    headers = {"Authorization": f"Bearer {secret}", "Content-Type": "application/json"}

    def run_http():
        cids = [str(store.create_conversation(title=f"bench http {i}").pk) for i in range(CLIENTS)]
        connection.close()

        def client(i):
            for body in bodies:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
                conn.request("POST", f"/api/v1/conversations/{cids[i]}/messages", body=body, headers=headers)
                response = conn.getresponse()
                payload = response.read()
                conn.close()
                if response.status != 201:
                    raise RuntimeError(f"HTTP {response.status}: {payload[:300]!r}")

        return CLIENTS * per_client / in_threads(client, CLIENTS)

    def run_store():
        cids = [store.create_conversation(title=f"bench store {i}").pk for i in range(CLIENTS)]

        def writer(i):
            try:
                for m in msgs:
                    store.append_message(conversation_id=cids[i], message=m)
            finally:
                connection.close()  # this thread's connection

        return CLIENTS * per_client / in_threads(writer, CLIENTS)

    def run_raw():
        conns = [common.raw_connect(raw_path) for _ in range(CLIENTS)]
        cids = [common.raw_create_conversation(c) for c in conns]

        def writer(i):
            for m in msgs:
                common.raw_append(conns[i], cids[i], m)

        rate = CLIENTS * per_client / in_threads(writer, CLIENTS)
        for c in conns:
            c.close()
        return rate

    try:
        runs = common.alternate({"http": run_http, "store": run_store, "raw": run_raw}, reps)
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
    rate = {k: common.median(v) for k, v in runs.items()}
    res = common.Results("8 HTTP append")
    res.sizes = {"clients": CLIENTS, "appends_per_client": per_client, "reps": reps}
    res.add(metric=f"appends/s over HTTP, {CLIENTS} concurrent clients (gunicorn, {CLIENTS} workers)",
            memoryui=rate["http"], raw=rate["raw"], unit="msg/s", ratio=rate["http"] / rate["store"],
            target="HTTP / in-process store (no target)",
            note=f"raw: {CLIENTS} threads of sqlite3; HTTP is {rate['http'] / rate['raw']:.2f}× raw")
    res.add(metric=f"appends/s through the store in-process, {CLIENTS} threads", memoryui=rate["store"],
            raw=rate["raw"], unit="msg/s", ratio=rate["store"] / rate["raw"], target="store/raw (no target)")
    common.close_django()
    res.seconds = time.perf_counter() - started
    res.write(args.out)


if __name__ == "__main__":
    sys.exit(main())
