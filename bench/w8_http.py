"""Workload 8: appends over HTTP (gunicorn, the settings of `make run`) against the same appends in-process.

For each database — the workload's own SQLite file, and PostgreSQL when it can be
reached (a throwaway database `memoryui_bench_w8_…`, created and dropped here) — and
for 1, 4 and 16 concurrent clients:

- HTTP single: each client thread has its own conversation and one kept-alive
  HTTP/1.1 connection, and POSTs its messages one at a time to
  /api/v1/conversations/{id}/messages with a Bearer key and an Idempotency-Key
  (as memoryui_client sends every write);
- HTTP batched: the same with 100 messages per POST to …/messages/batch;
- in-process: the same number of threads calling store.append_message /
  store.append_messages(100) in this process, each its own conversation.

- the floor: the same single POSTs without an Authorization header,
  which the server answers 401 before any database work: what the request path
  costs with nothing behind it. The append's rate over it is the row with a target
  (≥ 0.6 on SQLite, ≥ 0.5 on PostgreSQL, 1 and 4 clients);
- a conversation GET (/api/v1/conversations/{id} with the key), which must go at
  least as fast as an append;
- the statements alone: what a keyed append sends to the database (the key's
  look-up, the idempotency look-up, BEGIN, the counter bump, the row, the key's
  row, COMMIT; the statements imported from the code that runs them), with the
  message validated and sealed, on a connection made by the server's own database
  settings (durability included), with no request path at all. With one client a
  request is answered before the next is sent, so no append can take less than
  a 401 plus these statements: floor ÷ (floor + statements) is the highest
  append ÷ floor any request path can reach on this machine (the "bound" row).
  On PostgreSQL the same work as one statement (a data-modifying WITH, the chain
  hash computed by the server) is measured too: the bound if the append were
  rewritten that way (three round trips instead of seven).

HTTP and in-process alternate (common.alternate), medians of the repetitions.
Rows: messages/s, and p50/p99 of one request (one store call) in ms. gunicorn
runs memoryui/gunicorn_conf.py (SQLite: 1 worker × 8 threads; PostgreSQL: a
worker per core × 8 threads). Clients, server and database share the machine's cores.
"""

import hashlib
import http.client
import json
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import common

ROOT = Path(__file__).resolve().parent.parent
# MEMORYUI_BENCH_W8_CLIENTS=4 measures one client count (comparing gunicorn settings).
CLIENTS = tuple(int(n) for n in os.environ.get("MEMORYUI_BENCH_W8_CLIENTS", "1,4,16").split(","))
# A smoke run (--quick) leaves 16 clients out: the same code path as 4, and a third of its time.
QUICK_CLIENTS = tuple(n for n in CLIENTS if n <= 4) or CLIENTS
BATCH = 100
# Every write carries an Idempotency-Key, as memoryui_client sends; MEMORYUI_BENCH_W8_KEYS=0 measures without.
WITH_KEYS = os.environ.get("MEMORYUI_BENCH_W8_KEYS", "1") != "0"
# Its own name per run: another run (a test suite's smoke run) may be measuring at the same time.
PG_NAME = f"memoryui_bench_w8_{os.getpid()}_{uuid.uuid4().hex[:6]}"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_gunicorn(port: int, log: Path) -> subprocess.Popen:
    proc = subprocess.Popen(
        [str(Path(sys.executable).parent / "gunicorn"), "memoryui.wsgi", "-c", "memoryui/gunicorn_conf.py",
         "-b", f"127.0.0.1:{port}", "--log-level", "warning"],
        cwd=ROOT, env=dict(os.environ), stdout=log.open("w"), stderr=subprocess.STDOUT,
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


def in_threads(work, count) -> float:
    """Run work(i) in `count` threads released together; wall time of the whole."""
    errors, start = [], threading.Barrier(count + 1)

    def target(i):
        start.wait()
        try:
            work(i)
        except BaseException as exc:  # reported after join
            errors.append(exc)

    threads = [threading.Thread(target=target, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    start.wait()
    t0 = time.perf_counter()
    for t in threads:
        t.join()
    dt = time.perf_counter() - t0
    if errors:
        raise errors[0]
    return dt


def percentile(values, q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


class Http:
    """One client's kept-alive connection; reconnects when the server closed it."""

    def __init__(self, port, headers):
        self.port, self.headers, self.conn = port, headers, None

    def post(self, path, body, *, expect=201, method="POST"):
        for attempt in (1, 2):
            if self.conn is None:
                self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
            try:
                keyed = {"Idempotency-Key": uuid.uuid4().hex} if WITH_KEYS and method == "POST" else {}
                self.conn.request(method, path, body=body, headers={**self.headers, **keyed})
                response = self.conn.getresponse()
                payload = response.read()
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                self.conn.close()
                self.conn = None
                if attempt == 2:
                    raise
                continue
            if response.status != expect:
                raise RuntimeError(f"HTTP {response.status}: {payload[:300]!r}")
            if response.getheader("Connection", "").lower() == "close":
                self.conn.close()
                self.conn = None
            return

    def close(self):
        if self.conn is not None:
            self.conn.close()


def bound(floor_rate: float, statements_rate: float) -> float:
    """floor ÷ (floor + statements), in time per request: the highest append ÷ 401 floor a
    request path can reach when each append costs a 401's path plus its statements."""
    return (1 / floor_rate) / (1 / floor_rate + 1 / statements_rate)


class RawAppend:
    """A keyed append's statements and Python (validation, seal), without a request path.

    The SQL is the application's own (imported), run on connections made by Django's
    backend from the server's settings: the same driver, pragmas and durability
    (SQLite's WAL with synchronous=FULL, PostgreSQL's synchronous_commit), prepared on
    PostgreSQL as the application prepares them (conversations/rows.py)."""

    # The same work in one round trip on PostgreSQL: bump, row (chain hash by the server)
    # and key row in one data-modifying WITH, committed by autocommit.
    ONE_STATEMENT = (
        "WITH b AS (UPDATE conversations_conversation SET next_position = next_position + 1, "
        "last_activity_at = %(at)s, received_at = %(at)s WHERE id = %(cid)s AND NOT deleting "
        "RETURNING id, project_id, next_position - 1 AS position, memoryui_chain_hash(id, next_position - 2) AS prev), "
        "m AS (INSERT INTO conversations_message (conversation_id, position, kind, content, created_at, salt, "
        "commitment, chain_hash) SELECT b.id, b.position, %(kind)s, %(text)s, %(at)s, %(salt)s, %(commitment)s, "
        "sha256(coalesce(b.prev, %(genesis)s) || %(commitment)s) FROM b RETURNING position) "
        "INSERT INTO conversations_idempotencykey (caller, key, fingerprint, status, content_type, body, "
        "conversation_id, subject_norm, created_at, project_id) SELECT %(caller)s, %(key)s, %(fingerprint)s, 201, "
        "'application/json', '{\"position\": ' || m.position || '}', %(cid)s, '', %(at)s, b.project_id FROM m, b "
        "ON CONFLICT (caller, key) DO NOTHING RETURNING id"
    )

    def __init__(self, secret: str):
        from django.db import connection

        from conversations import api_keys, chain, idempotency, message_schema, rows, store

        self.db, self.chain, self.rows, self.encode = connection, chain, rows, message_schema.encode_message
        self.prefix = secret.split("_", 2)[1]
        self.sqlite = connection.vendor == "sqlite"
        form = (lambda sql: rows.SQLITE_FORM[sql]) if self.sqlite else (lambda sql: sql)
        self.key_sql, self.find_sql = form(api_keys.ACTIVE_KEY), form(idempotency.FIND_KEY)
        self.bump_sql = form(store.BUMP_WITH_PREV if self.sqlite else store.BUMP_WITH_PREV_PG)
        self.insert_sql, self.key_row_sql = form(rows.INSERT_MESSAGE), form(idempotency.INSERT_KEY)
        # Every key row names its project: the bench's conversations are all in the default one.
        from conversations.models import Project

        self.project_id = Project.objects.get(slug="default").pk

    def connect(self):
        raw = self.db.get_new_connection(self.db.get_connection_params())
        if self.sqlite:
            raw.isolation_level = None  # BEGIN IMMEDIATE … COMMIT below, as the application's
        else:
            raw.autocommit = True
        return raw

    def _one(self, raw, sql, params):
        if self.sqlite:
            return raw.execute(sql, params).fetchone()
        cursor = raw.execute(sql, params, prepare=True)
        return cursor.fetchone() if cursor.description else None

    def append(self, raw, cid, message: dict, *, one_statement: bool = False) -> None:
        key, caller, body = uuid.uuid4().hex, "key:bench", json.dumps(message).encode()
        fingerprint = hashlib.sha256(f"POST\n/api/v1/conversations/{cid}/messages\n".encode() + body).hexdigest()
        kind, text = self.encode(message)
        # The store's own clock, ids and seal (conversations/rows.py), as its append uses them.
        at, stamp = self.rows.db_now_stamped(self.db)
        row = [self.rows.db_id(self.db, cid), None, kind, text, at, None, None, None]
        if self._one(raw, self.key_sql, [self.prefix]) is None:
            raise RuntimeError("the bench key is not in the database")
        self._one(raw, self.find_sql, [caller, key])
        if one_statement:
            # The position is the statement's to hand out, so the commitment here is sealed over
            # position 0: the same hashing work, on a throw-away database nobody verifies.
            salt = self.chain.new_salt()
            commitment = self.chain.commitment(salt, self.chain.message_payload(0, kind, text, stamp))
            found = self._one(raw, self.ONE_STATEMENT, {
                "at": at, "cid": row[0], "kind": kind, "text": text, "salt": salt, "commitment": commitment,
                "genesis": self.chain.GENESIS, "caller": caller, "key": key, "fingerprint": fingerprint})
            if found is None:
                raise RuntimeError("the one-statement append wrote nothing")
            return
        raw.execute("BEGIN IMMEDIATE" if self.sqlite else "BEGIN")
        next_position, prev = self._one(raw, self.bump_sql, [1, at, at, row[0], True, None, 1])
        self.rows.seal_rows([row], next_position - 1, bytes(prev) if prev is not None else self.chain.GENESIS,
                            (stamp,))
        self._one(raw, self.insert_sql, row)
        self._one(raw, self.key_row_sql, [caller, key, fingerprint, 201, "application/json",
                                          json.dumps({"position": row[1], "kind": kind}), row[0], "", at,
                                          self.project_id])
        raw.execute("COMMIT")

    def modes(self, clients: int, conversations, messages: list, latencies: dict) -> dict:
        """The statements alone, and on PostgreSQL as one statement: runners for common.alternate.
        Only for one client, whose requests do not overlap (the bound holds only there)."""
        names = [] if clients != 1 else ["statements"] + ([] if self.sqlite else ["one statement"])
        for name in names:
            latencies[name] = []
        return {name: (lambda name=name: self.rate(conversations(name), messages, latencies[name],
                                                   one_statement=name == "one statement")) for name in names}

    @staticmethod
    def print_bounds(database: str, rate: dict) -> None:
        for name in ("statements", "one statement"):
            if name in rate:
                print(f"  {database} 1 client: {name} alone {rate[name]:,.0f}/s, "
                      f"bound {bound(rate['http floor'], rate[name]):.2f}", flush=True)

    def rate(self, cids: list, messages: list, latencies: list, *, one_statement: bool = False) -> float:
        """Appends per second, a thread and a connection per conversation in `cids`."""

        def writer(i):
            raw, mine = self.connect(), []
            try:
                for message in messages:
                    t0 = time.perf_counter()
                    self.append(raw, cids[i], message, one_statement=one_statement)
                    mine.append(time.perf_counter() - t0)
            finally:
                raw.close()
                latencies.extend(mine)

        return len(cids) * len(messages) / in_threads(writer, len(cids))


def measure_clients(database: str, clients: int, *, quick: bool, reps: int, port: int, headers: dict) -> list[dict]:
    """The rows for one number of clients: single and batched appends over HTTP and in process,
    the 401 floor, a conversation GET and (one client only) the statements alone, alternated."""
    from django.db import connection

    from conversations import store

    rows = []
    statements = RawAppend(headers["Authorization"].split(" ", 1)[1])
    singles = max(5, (30 if quick else 600) // clients)
    batches = max(1, (2 if quick else 30) // clients)
    msgs = common.messages(max(singles, BATCH))
    single_bodies = [json.dumps(m) for m in msgs[:singles]]
    batch_body = json.dumps({"messages": msgs[:BATCH]})
    latencies = {"http single": [], "http batched": [], "store single": [], "store batched": [],
                 "http floor": [], "http get": []}

    def conversations(label):
        ids = [store.create_conversation(title=f"bench {label} {i}").pk for i in range(clients)]
        connection.close()
        return ids

    def run_http(batched: bool):
        cids = conversations("http")
        lat = latencies["http batched" if batched else "http single"]
        path = "/api/v1/conversations/{}/messages" + ("/batch" if batched else "")

        def client(i):
            conn, mine = Http(port, headers), []
            try:
                for body in ([batch_body] * batches if batched else single_bodies):
                    t0 = time.perf_counter()
                    conn.post(path.format(cids[i]), body)
                    mine.append(time.perf_counter() - t0)
            finally:
                conn.close()
                lat.extend(mine)

        return clients * (batches * BATCH if batched else singles) / in_threads(client, clients)

    def run_other(mode: str):
        """The 401 floor (no key) or a conversation GET, one request at a time per client."""
        cids = conversations(mode)
        lat = latencies[f"http {mode}"]
        sent = ({k: v for k, v in headers.items() if k != "Authorization"} if mode == "floor"
                else headers)

        def client(i):
            conn, mine = Http(port, sent), []
            try:
                for body in single_bodies:
                    t0 = time.perf_counter()
                    if mode == "floor":
                        conn.post(f"/api/v1/conversations/{cids[i]}/messages", body, expect=401)
                    else:
                        conn.post(f"/api/v1/conversations/{cids[i]}", None, expect=200, method="GET")
                    mine.append(time.perf_counter() - t0)
            finally:
                conn.close()
                lat.extend(mine)

        return clients * singles / in_threads(client, clients)

    def run_store(batched: bool):
        cids = conversations("store")
        lat = latencies["store batched" if batched else "store single"]

        def writer(i):
            mine = []
            try:
                if batched:
                    for _ in range(batches):
                        t0 = time.perf_counter()
                        store.append_messages(conversation_id=cids[i], messages=msgs[:BATCH])
                        mine.append(time.perf_counter() - t0)
                else:
                    for m in msgs[:singles]:
                        t0 = time.perf_counter()
                        store.append_message(conversation_id=cids[i], message=m)
                        mine.append(time.perf_counter() - t0)
            finally:
                lat.extend(mine)
                connection.close()  # this thread's connection

        return clients * (batches * BATCH if batched else singles) / in_threads(writer, clients)

    modes = {
        "http single": lambda: run_http(False), "store single": lambda: run_store(False),
        "http batched": lambda: run_http(True), "store batched": lambda: run_store(True),
        "http floor": lambda: run_other("floor"), "http get": lambda: run_other("get"),
    }
    modes.update(statements.modes(clients, conversations, msgs[:singles], latencies))
    runs = common.alternate(modes, reps)
    rate = {k: statistics.median(v) for k, v in runs.items()}
    p = {k: (percentile(v, 0.5) * 1000, percentile(v, 0.99) * 1000) for k, v in latencies.items()}
    for mode in ("single", "batched"):
        http_rate, store_rate = rate[f"http {mode}"], rate[f"store {mode}"]
        rows.append({
            "database": database, "clients": clients, "mode": mode, "http": http_rate, "store": store_rate,
            "http_p50": p[f"http {mode}"][0], "http_p99": p[f"http {mode}"][1],
            "store_p50": p[f"store {mode}"][0], "store_p99": p[f"store {mode}"][1],
            "batched_over_single": None if mode == "single" else http_rate / rate["http single"],
            "floor": rate["http floor"], "get": rate["http get"],
            "floor_p50": p["http floor"][0], "get_p50": p["http get"][0],
            "statements": rate.get("statements"), "one_statement": rate.get("one statement"),
        })
        print(f"  {database} {clients} clients {mode}: HTTP {http_rate:,.0f} msg/s "
              f"(p50 {p[f'http {mode}'][0]:.1f} ms, p99 {p[f'http {mode}'][1]:.1f} ms), "
              f"store {store_rate:,.0f} msg/s, ratio {http_rate / store_rate:.2f}", flush=True)
    print(f"  {database} {clients} clients: 401 floor {rate['http floor']:,.0f} req/s, "
          f"GET {rate['http get']:,.0f} req/s, append / floor {rate['http single'] / rate['http floor']:.2f}, "
          f"GET / append {rate['http get'] / rate['http single']:.2f}", flush=True)
    RawAppend.print_bounds(database, rate)
    return rows


def measure(database: str, args) -> list[dict]:
    """All rows for one database; Django is set up here for it (one database per process)."""
    quick = args.quick
    if database == "sqlite":
        common.setup_django(args.workdir / "memoryui.sqlite3")
    else:
        subprocess.run(["dropdb", "--if-exists", PG_NAME], check=True, capture_output=True)
        subprocess.run(["createdb", PG_NAME], check=True, capture_output=True)
        common.migrate_database(f"postgres:///{PG_NAME}", args.workdir / "data-pg")
    from django.db import connection

    from conversations import api_keys

    _, secret = api_keys.create_api_key(name="bench", scopes=["read", "write"])
    headers = {"Authorization": f"Bearer {secret}", "Content-Type": "application/json"}
    connection.close()
    port = free_port()
    server = start_gunicorn(port, args.workdir / f"gunicorn-{database}.log")
    reps = args.reps or (1 if quick else 2)
    rows = []
    try:
        for clients in QUICK_CLIENTS if quick else CLIENTS:
            rows += measure_clients(database, clients, quick=quick, reps=reps, port=port, headers=headers)
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
        common.close_django()
        if database != "sqlite":  # the database made above, whatever the caller named PostgreSQL
            subprocess.run(["dropdb", "--if-exists", PG_NAME], capture_output=True)
    return rows


def main(argv=None):
    argv, only = common.database_child(argv)
    args = common.parse_args(__doc__.splitlines()[0], argv)
    if only:
        rows = measure(only, args)
        (args.workdir / f"w8-{only}.json").write_text(json.dumps(rows))
        return 0
    started = time.perf_counter()
    databases = ["sqlite"] + (["postgres"] if common.postgres_reachable() else [])
    reps = ["--reps", str(args.reps)] if args.reps else []
    rows = common.rows_per_database(__file__, "w8", databases, args, reps)

    res = common.Results("8 HTTP append")
    res.sizes = {"clients": list(QUICK_CLIENTS if args.quick else CLIENTS), "batch": BATCH,
                 "databases": databases, "quick": args.quick}
    for r in rows:
        db = "SQLite" if r["database"] == "sqlite" else "PostgreSQL"
        what = "one message per request" if r["mode"] == "single" else f"{BATCH} messages per request"
        target, passed = "HTTP / in-process (no target)", None
        if r["database"] == "sqlite" and r["clients"] == 4 and r["mode"] == "single":
            target, passed = "HTTP / in-process ≥ 0.50", r["http"] / r["store"] >= 0.5
        note = (f"p50 {r['http_p50']:.1f} ms, p99 {r['http_p99']:.1f} ms per request over HTTP; "
                f"in-process p50 {r['store_p50']:.2f} ms, p99 {r['store_p99']:.2f} ms")
        res.add(metric=f"{db}, {r['clients']} client{'s' if r['clients'] > 1 else ''}, {what}: msg/s over HTTP "
                       "(raw column: the in-process store, same threads)",
                memoryui=r["http"], raw=r["store"], unit="msg/s", ratio=r["http"] / r["store"], target=target,
                passed=passed, note=note)
        if r["mode"] == "single":
            floor_target = 0.6 if r["database"] == "sqlite" else 0.5
            clients_label = f"{r['clients']} client{'s' if r['clients'] > 1 else ''}"
            met = r["clients"] in (1, 4)
            res.add(metric=f"{db}, {clients_label}: appends/s over HTTP (raw column: requests/s answered 401 "
                           "without a key, the request path's floor)",
                    memoryui=r["http"], raw=r["floor"], unit="req/s", ratio=r["http"] / r["floor"],
                    target=f"append / 401 floor ≥ {floor_target}" if met else "append / 401 floor (no target)",
                    passed=(r["http"] / r["floor"] >= floor_target) if met else None,
                    note=f"p50 {r['floor_p50']:.1f} ms per 401")
            if r.get("statements"):
                res.add(metric=f"{db}, 1 client: the highest append / 401 floor any request path can reach here "
                               "(memoryui column: a keyed append's statements alone per second; raw column: the "
                               "401 floor)",
                        memoryui=r["statements"], raw=r["floor"], unit="/s",
                        ratio=bound(r["floor"], r["statements"]),
                        target=f"bound: floor ÷ (floor + statements), against the target {floor_target}",
                        passed=None,
                        note="one client: each append costs at least a 401's path plus its statements")
            if r.get("one_statement"):
                res.add(metric=f"{db}, 1 client: the same bound were the append one statement "
                               "(memoryui column: one-statement appends per second; raw column: the 401 floor)",
                        memoryui=r["one_statement"], raw=r["floor"], unit="/s",
                        ratio=bound(r["floor"], r["one_statement"]),
                        target=f"bound: floor ÷ (floor + statement), against the target {floor_target}",
                        passed=None, note="a data-modifying WITH; the chain hash computed by the server")
            res.add(metric=f"{db}, {clients_label}: conversation GETs/s over HTTP (raw column: appends/s)",
                    memoryui=r["get"], raw=r["http"], unit="req/s", ratio=r["get"] / r["http"],
                    target="GET / append ≥ 1", passed=r["get"] / r["http"] >= 1,
                    note=f"p50 {r['get_p50']:.1f} ms per GET")
        if r["mode"] == "batched":
            res.add(metric=f"{db}, {r['clients']} client{'s' if r['clients'] > 1 else ''}: batched / single "
                           "messages/s over HTTP",
                    memoryui=r["batched_over_single"], unit="×", ratio=r["batched_over_single"],
                    target="batched / single ≥ 10", passed=r["batched_over_single"] >= 10)
    res.seconds = time.perf_counter() - started
    res.write(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
