"""Workload 13: how long an agent's append waits while a deletion request runs on a ≥1 GB database.

The database is filled as workload 9 fills it (conversations active in groups of
8, appended turn by turn, so their rows share pages; the full-text index is kept
by its triggers). Every second conversation of a group belongs to a subject, two
conversations per subject. An appender in another process appends to a
conversation of its own, one message at a time, as fast as it can, and records
each append's latency:

- idle: before any deletion (the baseline of the same run);
- erasure: while `execute_deletion(subject=…)` runs for several subjects in turn
  (batched deletes, full-text merge in steps, WAL truncation with a short busy
  timeout, incremental vacuum in steps, verification in another process);
- two phases (the default): as many requests again, each filed when its rows are gone, then
  one maintenance window that cleans and searches the file once for all of them;
- full VACUUM (the peer): while a plain `VACUUM` of the same file runs — what
  erasure did before, holding the write lock for the whole rewrite.

Rows: p50, p99 and max latency of one append in each phase, failed appends, and
the erasure's own duration. Target: max stall during erasure ≤ 1 s, no failed append.
"""

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import common

GROUP = 8
TURN = 4
HERE = Path(__file__).resolve().parent

APPENDER = r"""
import json, sys
sys.path.insert(0, sys.argv[4])
import common
common.setup_django(__import__("pathlib").Path(sys.argv[1]))
print("ready", flush=True)
print(json.dumps(common.append_until(sys.argv[2], sys.argv[3])))
"""


def percentile(values, p):
    values = sorted(values)
    if not values:
        return None
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]


def main(argv=None):
    args = common.parse_args(__doc__.splitlines()[0], argv)
    count, per = (48, 100) if args.quick else (1400, 800)
    subjects_deleted = 1 if args.quick else 4
    started = time.perf_counter()
    db = args.workdir / "memoryui.sqlite3"
    common.setup_django(db)
    # Re-running the measurement on one build (the build takes minutes): a copy of the
    # built file is kept at this path when it is set, and used instead of building.
    built = os.environ.get("MEMORYUI_BENCH_W13_BUILT")
    t0 = time.perf_counter()
    if built and Path(built).exists():
        common.close_django()
        for suffix in ("", "-wal", "-shm"):
            Path(f"{db}{suffix}").unlink(missing_ok=True)
        shutil.copyfile(built, db)
        common.setup_django(db)
    else:
        _build(db, count, per, built)
    from conversations.models import Conversation as _C

    busy = _C.objects.get(title="the agent that keeps writing").pk
    size = common.bytes_on_disk(db)
    build_s = time.perf_counter() - t0
    print(f"  built {size / 1e6:,.0f} MB ({count * per:,} messages) in {build_s:.0f} s", flush=True)
    common.close_django()
    return _measure(args, db, busy, size, build_s, count, per, subjects_deleted, started)


def _build(db, count, per, built):
    from django.db import connection, transaction

    from conversations import store
    from conversations.message_schema import encode_message
    from conversations.models import Conversation

    convs, subjects = [], {}
    for i in range(count):
        subject = f"cust:{i // (2 * GROUP)}-{(i % GROUP) // 2}" if i % 2 else ""
        convs.append(store.create_conversation(title=f"bench erasure {i}", subject=subject).pk)
        subjects[convs[-1]] = subject
    db_id = lambda c: Conversation._meta.pk.get_db_prep_value(c, connection)  # noqa: E731
    ids = [db_id(c) for c in convs]
    about = {db_id(c): s for c, s in subjects.items() if s}
    now = connection.ops.adapt_datetimefield_value(common.days_ago(0))

    def rows_of(cid, start, stop):
        # A subject's conversations say things nobody else says (their own words, so a
        # deletion can be verified); the others share the workload's repeated texts.
        for i in range(start, stop):
            if cid in about:
                kind, text = encode_message({"kind": "user", "content": (
                    f"{about[cid]} told the agent private detail number {i} of conversation {cid[:8]}: "
                    + common.message_for(i % 4096).get("content", "") if isinstance(
                        common.message_for(i % 4096).get("content"), str) else f"{about[cid]} detail {i}")})
            else:
                kind, text = common.encoded_for(i)
            yield (cid, i, kind, text, now)

    sql = ("INSERT INTO conversations_message (conversation_id, position, kind, content, created_at) "
           "VALUES (%s, %s, %s, %s, %s)")
    with transaction.atomic(), connection.cursor() as cursor:
        for cid in ids:
            cursor.execute(f"UPDATE {Conversation._meta.db_table} SET next_position = %s WHERE id = %s", [per, cid])
        # Groups of GROUP conversations appended turn by turn (as workload 9), so their rows share pages.
        for g in range(0, len(ids), GROUP):
            group = ids[g:g + GROUP]
            batch = []
            for start in range(0, per, TURN):
                for cid in group:
                    batch.extend(rows_of(cid, start, min(per, start + TURN)))
            cursor.executemany(sql, batch)
    store.create_conversation(title="the agent that keeps writing")
    common.close_django()
    common.wal_checkpoint(db)
    if built:
        shutil.copyfile(db, built)


def _measure(args, db, busy, size, build_s, count, per, subjects_deleted, started):
    from conversations.models import Conversation
    from conversations.retention.erasure import execute_deletion

    stop = args.workdir / "stop"
    appender = subprocess.Popen([sys.executable, "-c", APPENDER, str(db), str(busy), str(stop), str(HERE)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert appender.stdout.readline().strip() == "ready"
    windows = {}
    # A smoke run (--quick) only needs some appends in each window, not a baseline worth reading.
    idle_s, settle_s = (1, 0.2) if args.quick else (10, 1)
    time.sleep(idle_s)
    windows["idle"] = (time.time() - idle_s, time.time())

    subjects = sorted({s for s in Conversation.objects.exclude(subject="").values_list("subject", flat=True)})
    erasure_seconds, statuses, stages = [], [], []
    w0 = time.time()
    for subject in subjects[:subjects_deleted]:
        e0 = time.perf_counter()
        began = time.time()
        receipt = execute_deletion(subject=subject, actor="bench")
        stages.append((began, receipt.verification["seconds"]))
        erasure_seconds.append(time.perf_counter() - e0)
        statuses.append(receipt.verification["status"])
        print(f"  deletion {subject}: {erasure_seconds[-1]:.1f} s {receipt.verification['seconds']} "
              f"{receipt.verification['notes']}", flush=True)
    # The same requests in two phases (the default): the rows go at once, and one window cleans
    # and searches the file for all of them (conversations/retention/window.py).
    from django.conf import settings

    from conversations.retention import window

    settings.MEMORYUI_ERASURE_VERIFY = "window"
    settings.MEMORYUI_ERASURE_PENDING_DIR = args.workdir / "pending"
    phase_one, filed = [], subjects[subjects_deleted:2 * subjects_deleted]
    for subject in filed:
        e0 = time.perf_counter()
        execute_deletion(subject=subject, actor="bench")
        phase_one.append(time.perf_counter() - e0)
    e0 = time.perf_counter()
    ran = window.run_window(actor="bench")
    window_s = time.perf_counter() - e0
    print(f"  two phases: phase one {[round(x, 2) for x in phase_one]} s, one window for {len(filed)} "
          f"requests {window_s:.1f} s ({sorted(set(ran.statuses.values()))})", flush=True)
    windows["erasure"] = (w0, time.time())
    common.close_django()

    time.sleep(settle_s)
    w0 = time.time()
    raw = common.connect_memoryui_file(db, isolation_level=None, timeout=120)
    raw.execute("PRAGMA busy_timeout = 120000")
    v0 = time.perf_counter()
    raw.execute("VACUUM")
    vacuum_s = time.perf_counter() - v0
    raw.close()
    windows["vacuum"] = (w0, time.time())
    time.sleep(settle_s)

    marks = common.stop_appender(appender, stop, timeout=300)

    idle, idle_fail = common.appends_in(marks, windows["idle"])
    # Where the slowest appends of the erasure window fell: which request, which of its
    # steps (they run in order: delete, scrub, verify), and how far into it.
    lo, hi = windows["erasure"]
    for m in sorted((m for m in marks if lo < m[0] < hi), key=lambda m: -m[1])[:5]:
        began, seconds = max((s for s in stages if s[0] <= m[0]), key=lambda s: s[0], default=(lo, {}))
        at, step = m[0] - began, "after"
        for name, took in seconds.items():
            if at < took:
                step = name
                break
            at -= took
        print(f"  slow append: {m[1] * 1000:,.0f} ms, {at:.2f} s into the {step} step of request {began - lo:.1f} s "
              f"into the window", flush=True)
    erase, erase_fail = common.appends_in(marks, windows["erasure"])
    vac, vac_fail = common.appends_in(marks, windows["vacuum"])
    res = common.Results("13 erasure stall")
    res.sizes = {"conversations": count, "messages_per_conversation": per, "bytes": size,
                 "subjects_deleted": subjects_deleted, "messages_per_subject": 2 * per,
                 "build_seconds": round(build_s, 1)}
    mb = size / 1e6
    for label, p in (("p50", 50), ("p99", 99)):
        res.add(metric=f"append latency {label} during deletion requests ({mb:,.0f} MB file)",
                memoryui=percentile(erase, p), raw=percentile(vac, p), unit="ms",
                target="raw = same appends during a full VACUUM", ratio=None,
                note=f"idle {label} {common.fmt(percentile(idle, p))} ms")
    worst = max(erase, default=0)
    res.add(metric=f"longest append during deletion requests ({mb:,.0f} MB file)", memoryui=worst,
            raw=max(vac, default=None), unit="ms", target="≤ 1000 ms, no append fails",
            ratio=worst / max(vac) if vac else None, passed=worst <= 1000 and not erase_fail,
            note=(f"{len(erase)} appends during {len(erasure_seconds)} deletion requests, {len(erase_fail)} failed "
                  f"(during VACUUM {len(vac_fail)} failed); receipts: {', '.join(statuses)}; idle max "
                  f"{common.fmt(max(idle, default=0))} ms"))
    res.add(metric=f"one deletion request ({2 * per:,} messages, 2 conversations) on a {mb:,.0f} MB file",
            memoryui=common.median(erasure_seconds), raw=vacuum_s, unit="s",
            target="raw = a full VACUUM of the file (no target)", ratio=common.median(erasure_seconds) / vacuum_s,
            note="erasure includes the verification: the whole file searched in another process")
    res.add(metric=f"phase one of a deletion request ({2 * per:,} messages) on a {mb:,.0f} MB file",
            memoryui=max(phase_one, default=None), unit="s", target="≤ 2 s (the longest of the requests)",
            passed=bool(phase_one) and max(phase_one) <= 2,
            note=f"{len(phase_one)} requests filed in two phases; their receipts say erased until the window")
    one_request = common.median(erasure_seconds)
    res.add(metric=f"one window for {len(filed)} requests on a {mb:,.0f} MB file (one search of the file)",
            memoryui=window_s, raw=one_request, unit="s", target="÷ one request searched on its own ≤ 2",
            ratio=window_s / one_request if one_request else None,
            passed=bool(one_request) and window_s / one_request <= 2,
            note=f"verdicts: {', '.join(sorted(set(ran.statuses.values())))}")
    res.seconds = time.perf_counter() - started
    res.write(args.out)


if __name__ == "__main__":
    sys.exit(main())
