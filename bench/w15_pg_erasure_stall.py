"""Workload 15: workload 13 on PostgreSQL — appends while deletion requests run on a ≥1 GB message table.

The message table is filled by bulk SQL through the schema (INSERT … SELECT over
generate_series; the stored search words are computed by the table's own generated
column, the GIN index built once afterwards): CONVERSATIONS conversations of PER
messages, every second one belonging to a subject, two conversations per subject.
An appender in another process appends to a conversation of its own through the
store, as fast as it can, and records each append's latency:

- idle: before any deletion (the baseline of the same run);
- erasure: while `execute_deletion(subject=…)` runs for 4 subjects in turn (batched
  deletes, tables rewritten online by pg_repack, WAL switched through, verification
  of every relation file and WAL segment in another process);
- VACUUM FULL (the peer): while a plain `VACUUM FULL` of the message table runs —
  what erasure did before (writers waited 374–380 s on 1,000,000 messages).

Rows: longest, p50 and p99 append in each phase, failed appends, the receipts'
statuses, and the erasure's own duration. Target: longest append during erasure
≤ 1 s, no append fails, every receipt verified.

Needs a reachable PostgreSQL (psql -d postgres) and pg_repack; without PostgreSQL
the workload reports nothing. MEMORYUI_BENCH_W15_KEEP=1 keeps the built database
for a re-run.
"""

import os
import subprocess
import sys
import time
from pathlib import Path

import common
from w13_erasure_stall import percentile  # the same percentiles as workload 13

HERE = Path(__file__).resolve().parent
PG_NAME = "mu_h12_bench_w15"
KEEP = os.environ.get("MEMORYUI_BENCH_W15_KEEP") == "1"
SUBJECTS_DELETED = 4

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
    args = common.parse_args(__doc__.splitlines()[0], argv)
    if not common.postgres_reachable():
        print("  PostgreSQL is not reachable: workload 15 not run", flush=True)
        return common.NOT_RUN
    count, per = (16, 40) if args.quick else (1000, 1000)
    subjects_deleted = 1 if args.quick else SUBJECTS_DELETED
    started = time.perf_counter()
    name = PG_NAME + ("_quick" if args.quick else "")
    url = f"postgres:///{name}"
    fresh = not KEEP or subprocess.run(["psql", "-d", name, "-Atc", "SELECT 1"], capture_output=True).returncode
    if fresh:
        subprocess.run(["dropdb", "--if-exists", name], check=True, capture_output=True)
        subprocess.run(["createdb", name], check=True, capture_output=True)
    common.migrate_database(url, args.workdir / "data-pg15")
    t0 = time.perf_counter()
    if fresh:
        _build(count, per)
    build_s = time.perf_counter() - t0

    from conversations.models import Conversation

    busy = Conversation.objects.get(title="the agent that keeps writing").pk
    from conversations.partitions import relation_bytes

    heap = relation_bytes("conversations_message", "pg_table_size")
    total = relation_bytes("conversations_message")
    print(f"  built: message table {heap / 1e9:.2f} GB ({total / 1e9:.2f} GB with indexes), "
          f"{count * per:,} messages, in {build_s:.0f} s", flush=True)
    common.close_django()
    try:
        return _measure(args, url, busy, heap, total, build_s, count, per, subjects_deleted, started)
    finally:
        common.close_django()
        if not KEEP:
            subprocess.run(["dropdb", "--if-exists", name], capture_output=True)


def _build(count, per):
    from django.db import connection

    from conversations import store

    subjects = []
    for i in range(count):
        subject = f"cust:{i // 2}" if i % 2 else ""
        store.create_conversation(title=f"bench erasure {i}", subject=subject)
        subjects.append(subject)
    store.create_conversation(title="the agent that keeps writing")
    words = ("the agent reads the ticket and checks the order status before it answers customer refund policy "
             "says within thirty days shipping label tracking number warehouse delayed apologise tool call "
             "returned an error retry with the corrected account id summary of the conversation so far user "
             "prefers email over phone invoice attached please confirm the address").split()
    with connection.cursor() as cursor:
        cursor.execute("SET maintenance_work_mem = '512MB'")
        # One GIN build at the end instead of a million index inserts; the same index as the migration's.
        cursor.execute("DROP INDEX search_message_tsv_idx")
        # The insert guard accepts positions the store handed out: hand them out first.
        cursor.execute("UPDATE conversations_conversation SET next_position = %s WHERE title LIKE 'bench erasure %%'",
                       [per])
        # ~600 bytes of text a row, words drawn by row so the index has many distinct entries; a
        # subject's rows say things nobody else says (their subject and numbers), so receipts verify.
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
            """, [words, len(words), per])
        cursor.execute("CREATE INDEX search_message_tsv_idx ON conversations_message USING GIN (search_tsv)")
        cursor.execute("VACUUM ANALYZE conversations_message")
        cursor.execute("CHECKPOINT")


def _measure(args, url, busy, heap, total, build_s, count, per, subjects_deleted, started):
    from django.db import connection

    from conversations.models import Conversation
    from conversations.retention.erasure import execute_deletion

    stop = args.workdir / "stop15"
    stop.unlink(missing_ok=True)
    appender = subprocess.Popen([sys.executable, "-c", APPENDER, url, str(busy), str(stop), str(HERE)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=str(HERE.parent))
    assert appender.stdout.readline().strip() == "ready", appender.stderr.read()
    # A smoke run (--quick) only needs some appends in each window, not a baseline worth reading.
    idle_s, settle_s = (1, 0.2) if args.quick else (10, 1)
    time.sleep(idle_s)
    windows = {"idle": (time.time() - idle_s, time.time())}

    subjects = sorted({s for s in Conversation.objects.exclude(subject="").values_list("subject", flat=True)})
    erasure_seconds, statuses, methods = [], [], []
    w0 = time.time()
    for subject in subjects[:subjects_deleted]:
        e0 = time.perf_counter()
        receipt = execute_deletion(subject=subject, actor="bench")
        erasure_seconds.append(time.perf_counter() - e0)
        v = receipt.verification
        statuses.append(v["status"])
        methods.append(v.get("rewrite", {}).get("method", "?"))
        print(f"  deletion {subject}: {erasure_seconds[-1]:.1f} s {v['seconds']} {v['status']} "
              f"wal={v.get('wal', {}).get('status')} switches={v.get('wal', {}).get('segment_switches')} "
              f"rewrite={methods[-1]} notes={v['notes']}", flush=True)
    windows["erasure"] = (w0, time.time())
    time.sleep(settle_s)
    w0 = time.time()
    v0 = time.perf_counter()
    with connection.cursor() as cursor:
        cursor.execute("VACUUM FULL conversations_message")
    vacuum_s = time.perf_counter() - v0
    windows["vacuum"] = (w0, time.time())
    print(f"  VACUUM FULL of the message table: {vacuum_s:.1f} s", flush=True)
    time.sleep(settle_s)
    common.close_django()

    marks = common.stop_appender(appender, stop, timeout=600)

    idle, _ = common.appends_in(marks, windows["idle"])
    erase, erase_fail = common.appends_in(marks, windows["erasure"])
    vac, vac_fail = common.appends_in(marks, windows["vacuum"])
    res = common.Results("15 erasure stall on PostgreSQL")
    res.sizes = {"conversations": count, "messages_per_conversation": per, "message_table_bytes": heap,
                 "with_indexes_bytes": total, "subjects_deleted": subjects_deleted,
                 "messages_per_subject": 2 * per, "build_seconds": round(build_s, 1)}
    gb = heap / 1e9
    for label, p in (("p50", 50), ("p99", 99)):
        res.add(metric=f"PostgreSQL: append latency {label} during deletion requests ({gb:.2f} GB message table)",
                memoryui=percentile(erase, p), raw=percentile(vac, p), unit="ms",
                target="raw = same appends during VACUUM FULL of the table", ratio=None,
                note=f"idle {label} {common.fmt(percentile(idle, p))} ms")
    worst, worst_vac = max(erase, default=0), max(vac, default=None)
    verified = all(s == "verified" for s in statuses)
    res.add(metric=f"PostgreSQL: longest append during deletion requests ({gb:.2f} GB message table)",
            memoryui=worst, raw=worst_vac, unit="ms", target="≤ 1000 ms, no append fails, every receipt verified",
            ratio=worst / worst_vac if worst_vac else None,
            passed=worst <= 1000 and not erase_fail and verified,
            note=(f"{len(erase)} appends during {len(erasure_seconds)} deletion requests, {len(erase_fail)} failed "
                  f"(during VACUUM FULL {len(vac_fail)} failed, {len(vac)} appends); receipts: {', '.join(statuses)}; "
                  f"rewrite: {', '.join(sorted(set(methods)))}; idle max {common.fmt(max(idle, default=0))} ms"))
    res.add(metric=f"PostgreSQL: one deletion request ({2 * per:,} messages, 2 conversations), {gb:.2f} GB table",
            memoryui=common.median(erasure_seconds), raw=vacuum_s, unit="s",
            target="raw = VACUUM FULL of the message table (no target)",
            ratio=common.median(erasure_seconds) / vacuum_s if vacuum_s else None,
            note="erasure includes rewriting every table holding subject data online and searching every "
                 "relation file and WAL segment")
    res.seconds = time.perf_counter() - started
    res.write(args.out)


if __name__ == "__main__":
    sys.exit(main())
