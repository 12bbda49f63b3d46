"""Workload 19: a deletion request's cost as the database grows — PostgreSQL at 250,000, 1,000,000
and 4,000,000 messages, and one window for 100 requests.

Each size is its own database, built by bulk SQL through the schema (as workload 15 builds its
own): conversations of PER messages, every second one about a subject, two per subject, so a
subject holds 2 × PER rows (1,000). The message table gets one partition per ~62,500 messages
(`manage.py message_partitions`: partitions keep their size as the table grows, which is what
keeps a request's cost flat). An appender in another process appends through the store the
whole time. At each size:

- phase one: `execute_deletion` of one subject whose two conversations lie in two partitions
  (the same at every size), two phases (the rows go, the receipt says
  `erased`): its time;
- the window for that one request (`run_window`: the partitions it used rewritten online,
  the files searched): its time, the WAL it wrote (pg_current_wal_lsn before and after) and
  the extra disk it needed (the database's largest size while it ran, sampled every 50 ms, less
  its size before);
- a request's whole cost = phase one + its window, each ÷ the same at 250,000 messages.

At the largest size, 100 subjects are then filed one after another (phase one each) and one
window covers them all: that window's time ÷ one request's whole cost.

Targets: time, extra disk and WAL at 1,000,000 and 4,000,000 ÷ at 250,000 ≤ 1.3;
phase one ≤ 2 s at every size; the window of 100 ≤ 2 × one request; longest append ≤ 1 s and
no append fails. A quick run (--quick) measures two tiny sizes.

The cluster runs with `wal_recycle = off` from the first request of a size on (set with ALTER
SYSTEM after the build and reset afterwards; `MEMORYUI_BENCH_W19_WAL_RECYCLE=on` keeps PostgreSQL's default), as
`check --deploy` asks: a checkpoint then removes old WAL segments instead of keeping them with
what they held for the window to switch past.
"""

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import common
from w13_erasure_stall import percentile

HERE = Path(__file__).resolve().parent
SIZES = {"250k": 250_000, "1m": 1_000_000, "4m": 4_000_000}
QUICK_SIZES = {"4k": 4_000, "16k": 16_000}
PER = 500
MESSAGES_PER_PARTITION = 62_500
# Requests in the busy window at the largest size. A measurement run of one size may leave that
# window out (it takes half an hour at 4,000,000 messages): MEMORYUI_BENCH_W19_WINDOW_REQUESTS=0.
WINDOW_REQUESTS = int(os.environ.get("MEMORYUI_BENCH_W19_WINDOW_REQUESTS", "100"))
# The cluster's wal_recycle while a size is measured: off, as `check --deploy` asks
# (memoryui.W003: a checkpoint removes old segments instead of keeping them with what they
# held); "on" measures PostgreSQL's default. The cluster's own setting comes back afterwards.
WAL_RECYCLE = os.environ.get("MEMORYUI_BENCH_W19_WAL_RECYCLE", "off")
QUICK_WINDOW_REQUESTS = 5

APPENDER = r"""
import json, os, sys
os.environ["DATABASE_URL"] = sys.argv[1]
os.environ["DJANGO_SETTINGS_MODULE"] = "memoryui.settings"
sys.path.insert(0, sys.argv[4])
import common  # puts the repository on sys.path
import django
django.setup()
from conversations import store
cid = sys.argv[2]
store.append_message(conversation_id=cid, message={"kind": "note", "text": "warm up"})
print("ready", flush=True)
print(json.dumps(common.append_until(cid, sys.argv[3])))
"""


def main(argv=None):
    argv, only = common.database_child(argv)
    args = common.parse_args(__doc__.splitlines()[0], argv)
    if not common.postgres_reachable():
        print("  PostgreSQL is not reachable: workload 19 not run", flush=True)
        return common.NOT_RUN
    sizes = QUICK_SIZES if args.quick else SIZES
    if only is not None:
        return _measure_size(args, only, sizes[only], last=only == list(sizes)[-1])
    started = time.perf_counter()
    measured = {}
    for name in sizes:
        child = [sys.executable, __file__, "--database", name, "--out", str(args.out),
                 "--workdir", str(args.workdir / name)] + (["--quick"] if args.quick else [])
        subprocess.run(child, check=True)
        measured[name] = json.loads((args.workdir / name / f"w19-{name}.json").read_text())
    _report(args, sizes, measured, started)
    return 0


def _partitions_for(messages: int) -> int:
    return max(1, round(messages / MESSAGES_PER_PARTITION))


def _measure_size(args, name: str, messages: int, *, last: bool) -> int:
    os.environ["MEMORYUI_ERASURE_VERIFY"] = "window"
    os.environ["MEMORYUI_ERASURE_PENDING_DIR"] = str(args.workdir / "pending")
    os.environ["MEMORYUI_PG_MESSAGE_PARTITIONS"] = str(_partitions_for(messages))
    db = f"mu_bench_w19_{name}"
    url = f"postgres:///{db}"
    subprocess.run(["dropdb", "--if-exists", db], check=True, capture_output=True)
    subprocess.run(["createdb", db], check=True, capture_output=True)
    try:
        common.migrate_database(url, args.workdir / "data")
        t0 = time.perf_counter()
        conversations = messages // PER
        _build(conversations)
        build_s = time.perf_counter() - t0
        result = _run(args, url, name, messages, build_s, last=last)
    finally:
        common.close_django()
        subprocess.run(["dropdb", "--if-exists", db], capture_output=True)
        _set_wal_recycle(None)
    (args.workdir / f"w19-{name}.json").write_text(json.dumps(result))
    return 0


def _set_wal_recycle(value: str | None) -> None:
    """The cluster's wal_recycle (None: back to its configuration file's), for every process."""
    sql = "ALTER SYSTEM RESET wal_recycle" if value is None else f"ALTER SYSTEM SET wal_recycle = {value}"
    for statement in (sql, "SELECT pg_reload_conf()"):
        subprocess.run(["psql", "-d", "postgres", "-Atc", statement], check=True, capture_output=True)


def _build(count: int) -> None:
    from django.db import connection

    from conversations import store

    for i in range(count):
        store.create_conversation(title=f"bench erasure {i}", subject=f"cust:{i // 4}" if i % 2 else "")
    store.create_conversation(title="the agent that keeps writing")
    words = ("the agent reads the ticket and checks the order status before it answers customer refund policy "
             "says within thirty days shipping label tracking number warehouse delayed apologise tool call "
             "returned an error retry with the corrected account id summary of the conversation so far user "
             "prefers email over phone invoice attached please confirm the address").split()
    with connection.cursor() as cursor:
        cursor.execute("SET maintenance_work_mem = '512MB'")
        cursor.execute("DROP INDEX search_message_tsv_idx")
        cursor.execute("UPDATE conversations_conversation SET next_position = %s WHERE title LIKE 'bench erasure %%'",
                       [PER])
        cursor.execute(
            """
            INSERT INTO conversations_message (conversation_id, position, kind, content, created_at)
            SELECT c.id, g.n, 'user',
                   json_build_object('kind', 'user', 'content',
                       CASE WHEN c.subject <> '' THEN c.subject || ' told the agent private detail ' || g.n
                            || ' of ' || left(c.id::text, 8) || ': ' ELSE '' END
                       || (SELECT string_agg((%s::text[])[1 + (abs(hashtext(g.n::text || '-' || k || c.id::text))
                                              %% %s)] || ' ' || md5(k::text || g.n::text || c.id::text)::varchar(6),
                                             ' ')
                           FROM generate_series(1, 40) k))::text,
                   now() - interval '1 day'
            FROM conversations_conversation c CROSS JOIN generate_series(0, %s - 1) g(n)
            WHERE c.title LIKE 'bench erasure %%'
            """, [words, len(words), PER])
        cursor.execute("CREATE INDEX search_message_tsv_idx ON conversations_message USING GIN (search_tsv)")
        cursor.execute("VACUUM ANALYZE conversations_message")
        cursor.execute("CHECKPOINT")


class _PeakSize(threading.Thread):
    """The database's largest size on disk while a step runs (a connection of its own)."""

    def __init__(self, url: str):
        super().__init__(daemon=True)
        import psycopg

        self.conn = psycopg.connect(url.replace("postgres:///", "dbname="), autocommit=True)
        self.stop, self.peak = threading.Event(), 0

    def size(self) -> int:
        return self.conn.execute("SELECT pg_database_size(current_database())").fetchone()[0]

    def run(self):
        while not self.stop.is_set():
            self.peak = max(self.peak, self.size())
            time.sleep(0.05)


def _wal_lsn() -> int:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_current_wal_lsn() - '0/0'::pg_lsn")
        return int(cursor.fetchone()[0])


def _wal_recycle() -> str:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SHOW wal_recycle")
        return cursor.fetchone()[0]


def _run(args, url: str, name: str, messages: int, build_s: float, *, last: bool) -> dict:
    from django.db import connection

    from conversations import partitions
    from conversations.models import Conversation
    from conversations.retention import window
    from conversations.retention.erasure import execute_deletion

    busy = Conversation.objects.get(title="the agent that keeps writing").pk
    with connection.cursor() as cursor:
        # A partitioned table holds nothing itself: its partitions do.
        cursor.execute("SELECT coalesce(sum(pg_total_relation_size(inhrelid)), 0) FROM pg_inherits "
                       "WHERE inhparent = 'conversations_message'::regclass")
        table_bytes = int(cursor.fetchone()[0])
    print(f"  {name}: {messages:,} messages in {partitions.count()} partitions, "
          f"{table_bytes / 1e9:.2f} GB with indexes, built in {build_s:.0f} s", flush=True)
    stop = args.workdir / "stop19"
    stop.unlink(missing_ok=True)
    common.close_django()
    appender = subprocess.Popen([sys.executable, "-c", APPENDER, url, str(busy), str(stop), str(HERE)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=str(HERE.parent))
    assert appender.stdout.readline().strip() == "ready", appender.stderr.read()
    everyone = sorted({s for s in Conversation.objects.exclude(subject="").values_list("subject", flat=True)})
    # Like for like at every size: a subject whose two conversations lie in two partitions (the
    # common case, and the dearer one; with 4 partitions a quarter of the subjects have both in
    # one, which halves the rewrite and would flatter the smallest size).
    one_subject = next((s for s in everyone if len(partitions.partitions_holding(
        list(Conversation.objects.filter(subject=s).values_list("pk", flat=True)))) == 2), everyone[0])
    subjects = iter([s for s in everyone if s != one_subject])

    _set_wal_recycle(WAL_RECYCLE)  # for the request, after the build, as an operator would change it
    t0 = time.perf_counter()
    receipt = execute_deletion(subject=one_subject, actor="bench")
    phase_one = time.perf_counter() - t0
    rows = receipt.counts["messages"]
    peak = _PeakSize(url)
    before, wal0 = peak.size(), _wal_lsn()
    peak.start()
    t0 = time.perf_counter()
    one = window.run_window(actor="bench")
    window_s = time.perf_counter() - t0
    peak.stop.set()
    peak.join()
    wal_total, extra = _wal_lsn() - wal0, max(0, peak.peak - before)
    # The rewrite's own WAL: what the scrub writes for the request (the segment switches that then
    # overwrite recycled segments depend on max_wal_size and what was written before, not on it).
    wal_bytes = one.scrub_wal_bytes
    status = one.statuses.get(str(receipt.pk))
    from conversations.retention.models import DeletionReceipt

    checked = DeletionReceipt.everywhere.get(pk=receipt.pk).verification
    # Where the window's time went: the rewrite's steps, then the search (its passes and bytes).
    steps = {**checked.get("rewrite", {}).get("seconds", {}), "search": checked["seconds"].get("verify"),
             "search_passes": checked.get("verify_passes"), "searched_mb": round(checked["bytes_searched"] / 1e6),
             "wal": checked.get("wal", {}).get("status"), "searched": checked.get("searched"),
             "segment_switches": checked.get("wal", {}).get("segment_switches"), "wal_recycle": _wal_recycle()}
    print(f"  {name}: window steps {steps}", flush=True)
    print(f"  {name}: phase one {phase_one:.2f} s ({rows} rows), window {window_s:.1f} s, "
          f"WAL {wal_bytes / 1e6:.1f} MB ({wal_total / 1e6:.1f} MB with segment switches), "
          f"extra disk {extra / 1e6:.1f} MB, {status}, partitions {one.touched}",
          flush=True)
    result = {"messages": messages, "partitions": partitions.count(), "table_bytes": table_bytes,
              "build_seconds": build_s, "rows": rows, "phase_one": phase_one, "window": window_s,
              "wal": wal_bytes, "wal_total": wal_total, "extra_disk": extra, "status": status, "steps": steps}
    n = QUICK_WINDOW_REQUESTS if args.quick else WINDOW_REQUESTS
    if last and n > 0:
        t0 = time.perf_counter()
        for _ in range(n):
            execute_deletion(subject=next(subjects), actor="bench")
        filing = time.perf_counter() - t0
        t0 = time.perf_counter()
        many = window.run_window(actor="bench")
        result.update(window_requests=n, window_many=time.perf_counter() - t0, filing_many=filing,
                      statuses_many=sorted(set(many.statuses.values())), touched_many=len(many.touched))
        print(f"  {name}: {n} requests filed in {filing:.1f} s, one window for them {result['window_many']:.1f} s "
              f"({len(many.touched)} partitions, {result['statuses_many']})", flush=True)
    common.close_django()
    marks = common.stop_appender(appender, stop, timeout=600)
    ok, failed = common.appends_in(marks, (0, time.time() + 1))
    result.update(appends=len(ok), failed=len(failed), longest_append=max(ok, default=0.0),
                  p99_append=percentile(ok, 99))
    return result


def _report(args, sizes: dict, measured: dict, started: float) -> None:
    names = list(sizes)
    base, largest = measured[names[0]], measured[names[-1]]
    res = common.Results("19 erasure cost as the database grows")
    res.sizes = {n: {k: measured[n][k] for k in ("messages", "partitions", "table_bytes", "rows")} for n in names}
    whole = {n: measured[n]["phase_one"] + measured[n]["window"] for n in names}
    for n in names[1:]:
        m = measured[n]
        for label, value, base_value, unit in (
                ("time (phase one + its window)", whole[n], whole[names[0]], "s"),
                ("WAL written by its rewrite", m["wal"] / 1e6, base["wal"] / 1e6, "MB"),
                ("extra disk", m["extra_disk"] / 1e6, base["extra_disk"] / 1e6, "MB")):
            ratio = value / base_value if base_value else None
            res.add(metric=f"PostgreSQL: one request's {label} at {m['messages']:,} messages "
                           f"({m['partitions']} partitions)",
                    memoryui=value, raw=base_value, unit=unit,
                    target=f"÷ the same at {base['messages']:,} messages ≤ 1.3", ratio=ratio,
                    passed=ratio is not None and ratio <= 1.3,
                    note=f"{m['rows']} rows erased, {m['status']}; WAL with the segment switches that overwrite "
                         f"recycled segments: {m['wal_total'] / 1e6:,.0f} MB (at {base['messages']:,}: "
                         f"{base['wal_total'] / 1e6:,.0f} MB)")
    for n in names:
        m = measured[n]
        res.add(metric=f"PostgreSQL: phase one of a request ({m['rows']} rows) at {m['messages']:,} messages",
                memoryui=m["phase_one"], unit="s", target="≤ 2 s", passed=m["phase_one"] <= 2,
                note=f"longest append {common.fmt(m['longest_append'])} ms, {m['failed']} failed of "
                     f"{m['appends'] + m['failed']}")
    ratio = largest["window_many"] / whole[names[-1]] if whole[names[-1]] else None
    res.add(metric=f"PostgreSQL: one window for {largest['window_requests']} requests at "
                   f"{largest['messages']:,} messages",
            memoryui=largest["window_many"], raw=whole[names[-1]], unit="s",
            target="÷ one request (phase one + its window) ≤ 2", ratio=ratio, passed=ratio is not None and ratio <= 2,
            note=f"{largest['touched_many']} partitions rewritten; verdicts {', '.join(largest['statuses_many'])}; "
                 f"filing them took {largest['filing_many']:.1f} s")
    worst = max(measured[n]["longest_append"] for n in names)
    failed = sum(measured[n]["failed"] for n in names)
    res.add(metric="PostgreSQL: longest append during every request and window", memoryui=worst, unit="ms",
            target="≤ 1000 ms, none fails", passed=worst <= 1000 and failed == 0,
            note=f"{failed} failed; p99 {', '.join(common.fmt(measured[n]['p99_append']) for n in names)} ms")
    res.seconds = time.perf_counter() - started
    res.write(args.out)


if __name__ == "__main__":
    sys.exit(main())
