"""One app server against two over one PostgreSQL (docs/SCALING.md; not a workload of run.py).

A throwaway PostgreSQL database; gunicorn with memoryui/gunicorn_conf.py (a worker
per core × 8 threads) started once or twice on different ports over it. N client
threads, each with its own conversation, send single appends (with an
Idempotency-Key, as memoryui_client does) round-robin across the servers. One and
two servers alternate, medians of the repetitions. Besides the rate it reports
where the CPU went during the run: the gunicorn processes, the PostgreSQL backends
serving them, and the client threads (all on one machine here, so they share its
cores: a second server adds processes, not cores).

    .venv/bin/python bench/scaling_two_servers.py [--clients 4,8] [--appends 300] [--reps 2]
"""

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402  (sets up sys.path for memoryui)
import w8_http  # noqa: E402

TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pids) -> float:
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / TICKS


def tree(pid) -> list[int]:
    out = [pid]
    for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split():
        out += tree(int(child))
    return out


def backends(name) -> list[int]:
    done = subprocess.run(["psql", "-d", name, "-Atc",
                           f"SELECT pid FROM pg_stat_activity WHERE datname = '{name}' AND pid <> pg_backend_pid()"],
                          capture_output=True, text=True)
    return [int(p) for p in done.stdout.split()]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", default="4,8")
    parser.add_argument("--appends", type=int, default=300, help="appends per client per run")
    parser.add_argument("--reps", type=int, default=2)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp") / f"memoryui-scaling-{os.getpid()}")
    args = parser.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    name = f"memoryui_bench_scaling_{os.getpid()}_{uuid.uuid4().hex[:6]}"
    subprocess.run(["createdb", name], check=True)
    os.environ.update({"DATABASE_URL": f"postgres:///{name}", "DJANGO_SETTINGS_MODULE": "memoryui.settings",
                       "MEMORYUI_DATA_DIR": str(args.workdir / "data")})
    os.environ.setdefault("SECRET_KEY", "bench-" + uuid.uuid4().hex)
    servers = []
    try:
        import django

        django.setup()
        from django.core.management import call_command
        from django.db import connection

        from conversations import api_keys, store

        call_command("migrate", verbosity=0, interactive=False)
        _, secret = api_keys.create_api_key(name="bench", scopes=["read", "write"])
        headers = {"Authorization": f"Bearer {secret}", "Content-Type": "application/json"}
        for n in range(2):
            port = w8_http.free_port()
            servers.append((port, w8_http.start_gunicorn(port, args.workdir / f"gunicorn-{n}.log")))
        body = [json.dumps(m) for m in common.messages(args.appends)]

        def run(count, clients):
            ports = [port for port, _ in servers[:count]]
            cids = [store.create_conversation(title=f"scaling {i}").pk for i in range(clients)]
            connection.close()
            pids = [pid for _, proc in servers[:count] for pid in tree(proc.pid)]
            before = cpu_seconds(pids), cpu_seconds(backends(name)), time.process_time()

            def client(i):
                conns = [w8_http.Http(port, headers) for port in ports]
                try:
                    for j, text in enumerate(body):
                        conns[(i + j) % count].post(f"/api/v1/conversations/{cids[i]}/messages", text)
                finally:
                    for c in conns:
                        c.close()

            seconds = w8_http.in_threads(client, clients)
            after = cpu_seconds(pids), cpu_seconds(backends(name)), time.process_time()
            spent = [(a - b) / seconds for a, b in zip(after, before, strict=True)]
            return clients * args.appends / seconds, spent

        for clients in [int(c) for c in args.clients.split(",")]:
            results = {1: [], 2: []}
            for rep in range(args.reps):
                for count in ((1, 2) if rep % 2 == 0 else (2, 1)):
                    results[count].append(run(count, clients))
            for count in (1, 2):
                rate = statistics.median(r for r, _ in results[count])
                app, db, client_cpu = (statistics.median(s[k] for _, s in results[count]) for k in range(3))
                print(f"{clients} clients, {count} app server{'s' if count > 1 else ''}: {rate:,.0f} appends/s; "
                      f"cores busy: gunicorn {app:.2f}, PostgreSQL backends {db:.2f}, clients {client_cpu:.2f} "
                      f"(of {os.cpu_count()})", flush=True)
    finally:
        for _, proc in servers:
            proc.send_signal(signal.SIGTERM)
        for _, proc in servers:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
        common.close_django()
        subprocess.run(["dropdb", "--if-exists", name], capture_output=True)


if __name__ == "__main__":
    main()
