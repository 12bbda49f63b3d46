"""Workload 9: prune half of a ~1 GB database: time, and file size after against a
freshly built database holding only the survivors.

The database is filled the way agents fill it: conversations are active in groups
of 8 at a time, appended turn by turn (4 messages) round-robin, so the rows of
conversations that were active together share pages. In every group half the
conversations stopped 60 days ago and half went on (last activity now), so
pruning at 30 days removes half the rows from pages that keep the other half:
the hard case for giving the disk back. (Set-up writes the rows in one
transaction of raw INSERTs, not measured.)

memoryui: `conversations.retention.pruning.prune_older_than(days=30, dry_run=False)`
(batched deletes, incremental vacuum, WAL truncated). raw sqlite3: the same
deletes in one transaction on a byte-copy of the same file, then
`PRAGMA incremental_vacuum` and `wal_checkpoint(TRUNCATE)`. Fresh: a new
migrated memoryui file filled with the survivors the same way. Sizes are main
file + WAL after a TRUNCATE checkpoint.
"""

import os
import shutil
import sys
import time
from pathlib import Path

import common

GROUP = 8
TURN = 4


def fill(conversations, per_conversation, old_ids, *, table_conv, table_msg, cursor, encode, ph="%s"):
    """All rows of `conversations`, groups of GROUP appended turn by turn, in one transaction."""
    for cid in conversations:
        cursor.execute(f"UPDATE {table_conv} SET next_position = {ph} WHERE id = {ph}", [per_conversation, cid])
    sql = (f"INSERT INTO {table_msg} (conversation_id, position, kind, content, created_at) "
           f"VALUES ({ph}, {ph}, {ph}, {ph}, {ph})")
    for g in range(0, len(conversations), GROUP):
        group = conversations[g:g + GROUP]
        rows = []
        for start in range(0, per_conversation, TURN):
            for cid in group:
                when = old_ids.get(cid)
                for i in range(start, min(per_conversation, start + TURN)):
                    kind, text = encode(i)
                    rows.append((cid, i, kind, text, when))
        cursor.executemany(sql, rows)


def main(argv=None):
    args = common.parse_args(__doc__.splitlines()[0], argv)
    count, per = (32, 100) if args.quick else (1600, 800)
    started = time.perf_counter()
    db = args.workdir / "memoryui.sqlite3"
    fresh_db = args.workdir / "fresh.sqlite3"
    common.setup_django(db)
    from django.db import connection, transaction

    from conversations import store
    from conversations.models import Conversation, Message
    from conversations.retention.pruning import prune_older_than

    tc, tm = Conversation._meta.db_table, Message._meta.db_table
    old_when = connection.ops.adapt_datetimefield_value(common.days_ago(60))
    new_when = connection.ops.adapt_datetimefield_value(common.days_ago(0))
    t0 = time.perf_counter()
    convs = [store.create_conversation(title=f"bench prune {i}").pk for i in range(count)]
    db_id = lambda c: Conversation._meta.pk.get_db_prep_value(c, connection)  # noqa: E731
    ids = [db_id(c) for c in convs]
    when = {cid: (old_when if (k % GROUP) % 2 == 0 else new_when) for k, cid in enumerate(ids)}
    old = [cid for cid in ids if when[cid] == old_when]
    survivors = [cid for cid in ids if when[cid] == new_when]
    with transaction.atomic(), connection.cursor() as cursor:
        fill(ids, per, when, table_conv=tc, table_msg=tm, cursor=cursor, encode=common.encoded_for)
        for cid in ids:
            # Retention counts from when memoryui received the rows (received_at): both dates go back.
            cursor.execute(f"UPDATE {tc} SET last_activity_at = %s, received_at = %s WHERE id = %s",
                           [when[cid], when[cid], cid])
    connection.close()
    before = common.bytes_on_disk(db)
    build_s = time.perf_counter() - t0
    print(f"  built {before / 1e6:,.0f} MB ({count * per:,} messages) in {build_s:.0f} s", flush=True)

    # raw peer on a byte-copy of the same file
    raw_db = args.workdir / "raw.sqlite3"
    shutil.copyfile(db, raw_db)
    raw = common.raw_connect(raw_db)
    t0 = time.perf_counter()
    raw.execute("BEGIN IMMEDIATE")
    for lo in range(0, len(old), 500):
        chunk = old[lo:lo + 500]
        marks = ",".join("?" * len(chunk))
        raw.execute(f"UPDATE {tc} SET deleting = 1 WHERE id IN ({marks})", chunk)
        raw.execute(f"DELETE FROM {tm} WHERE conversation_id IN ({marks})", chunk)
        raw.execute(f"DELETE FROM conversations_checkpoint WHERE conversation_id IN ({marks})", chunk)
        raw.execute(f"DELETE FROM {tc} WHERE id IN ({marks})", chunk)
    raw.execute("COMMIT")
    # executescript steps the pragma to its end; a plain execute() steps once, which frees one page.
    raw.executescript("PRAGMA incremental_vacuum;")
    raw.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
    raw_s = time.perf_counter() - t0
    raw.close()
    raw_after = common.bytes_on_disk(raw_db)

    t0 = time.perf_counter()
    result = prune_older_than(days=30, dry_run=False)
    prune_s = time.perf_counter() - t0
    assert result.conversations == len(old), (result.conversations, len(old))
    assert result.messages == len(old) * per
    connection.close()
    after = common.bytes_on_disk(db)

    # Fresh: a new memoryui file (same migrations, same pragmas) with only the survivors.
    from django.db import connections

    connections.close_all()
    connections["default"].settings_dict["NAME"] = str(fresh_db)
    template = os.environ.get("MEMORYUI_BENCH_TEMPLATE")
    if args.quick and template and Path(template).exists():
        # A smoke run starts from the run's migrated empty file (common.setup_django) instead of
        # running the migrations' DDL again; a full run migrates, as the file it compares with was.
        shutil.copyfile(template, fresh_db)
    from django.core.management import call_command

    call_command("migrate", verbosity=0, interactive=False)
    fresh_convs = [db_id(store.create_conversation(title=f"bench fresh {i}").pk) for i in range(len(survivors))]
    with transaction.atomic(), connection.cursor() as cursor:
        fill(fresh_convs, per, {c: new_when for c in fresh_convs}, table_conv=tc, table_msg=tm, cursor=cursor,
             encode=common.encoded_for)
    connections.close_all()
    fresh = common.bytes_on_disk(fresh_db)

    res = common.Results("9 prune")
    res.sizes = {"conversations": count, "messages_per_conversation": per, "messages": count * per,
                 "pruned_messages": result.messages, "bytes_before": before, "build_seconds": round(build_s, 1)}
    mb = 1e6
    res.add(metric=f"prune half of {before / mb:,.0f} MB ({result.messages:,} of {count * per:,} messages)",
            memoryui=prune_s, raw=raw_s, unit="s", ratio=prune_s / raw_s, target="memoryui/raw (no target)",
            note="memoryui: batched deletes + incremental vacuum in steps; raw: one transaction")
    ratio = after / fresh
    res.add(metric=f"bytes on disk after prune vs a fresh database of the survivors ({fresh / mb:,.0f} MB)",
            memoryui=after / mb, raw=raw_after / mb, unit="MB", target="after / fresh ≤ 1.1", ratio=ratio,
            passed=ratio <= 1.1,
            note=f"PruneResult.bytes_after {result.bytes_after / mb:,.0f} MB; raw {raw_after / fresh:.2f}× fresh")
    res.seconds = time.perf_counter() - started
    res.write(args.out)


if __name__ == "__main__":
    sys.exit(main())
