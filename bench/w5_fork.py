"""Workload 5: fork at the middle of a 100,000-message conversation.

memoryui: `conversations.store.fork_conversation(position=49,999)` (lock the
parent, create the child, INSERT … SELECT of 50,000 rows, carry the latest
checkpoint, commit). The copies get no full-text index entries (search finds them
through the parent's rows): the index is counted before and after the forks.
raw sqlite3: the same child row and the same INSERT … SELECT in one committed
transaction on a file of the same shape, same pragmas, without memoryui's
append-only triggers. Each peer forks the same parent repeatedly, alternating.
"""

import sys
import time

import common


def main(argv=None):
    args = common.parse_args(__doc__.splitlines()[0], argv)
    n = 4000 if args.quick else 100_000
    at = n // 2 - 1
    reps = args.reps or (2 if args.quick else 5)
    started = time.perf_counter()
    common.setup_django(args.workdir / "memoryui.sqlite3")
    from conversations import store

    parent = store.create_conversation(title="bench fork parent").pk
    common.bulk_fill(parent, n)
    store.checkpoint_at(conversation_id=parent, position=at - 100, summary="what happened before")
    raw = common.raw_connect(args.workdir / "raw.sqlite3")
    rparent = common.raw_create_conversation(raw)
    common.raw_bulk_fill(raw, rparent, n)

    def run_memoryui():
        t0 = time.perf_counter()
        child = store.fork_conversation(conversation_id=parent, position=at)
        dt = time.perf_counter() - t0
        assert child.next_position == at + 1
        return dt

    def index_rows():
        """Documents in the full-text index and rows waiting to enter it (search migration 0002)."""
        from django.db import connection

        with connection.cursor() as cursor:
            cursor.execute("SELECT (SELECT count(*) FROM search_message_fts_docsize) + "
                           "(SELECT count(*) FROM search_message_pending)")
            return cursor.fetchone()[0]

    indexed_before = index_rows()

    def run_raw():
        t0 = time.perf_counter()
        cid = __import__("uuid").uuid4().hex
        now = common.now_text()
        raw.execute("BEGIN IMMEDIATE")
        raw.execute("INSERT INTO conversation (id, next_position, created_at, last_activity_at) VALUES (?, ?, ?, ?)",
                    (cid, at + 1, now, now))
        cur = raw.execute("INSERT INTO message (conversation_id, position, kind, content, created_at) "
                          "SELECT ?, position, kind, content, created_at FROM message "
                          "WHERE conversation_id = ? AND position <= ? ORDER BY position", (cid, rparent, at))
        copied = cur.rowcount
        raw.execute("COMMIT")
        dt = time.perf_counter() - t0
        assert copied == at + 1
        return dt

    runs = common.alternate({"memoryui": run_memoryui, "raw": run_raw}, reps)
    t = {k: common.median(v) * 1000 for k, v in runs.items()}
    ratio = t["memoryui"] / t["raw"]
    res = common.Results("5 fork")
    res.sizes = {"messages": n, "fork_at": at, "reps": reps}
    res.add(metric=f"fork at {at:,} of {n:,} (copies {at + 1:,} rows)", memoryui=t["memoryui"], raw=t["raw"],
            unit="ms", target="memoryui/raw ≤ 1.5", ratio=ratio, passed=ratio <= 1.5,
            note="LangGraph: n/a (a fork there is a new checkpoint from an old one, see workload 2 for its size)")
    forks = len(runs["memoryui"])
    indexed_after = index_rows()
    res.add(metric=f"full-text index rows after {forks} forks of {at + 1:,} rows each (raw column: before)",
            memoryui=indexed_after, raw=indexed_before, unit="rows", target="after / before = 1 (no row added)",
            ratio=indexed_after / indexed_before, passed=indexed_after == indexed_before,
            note="a fork's copies are found through the rows they were copied from (search migration 0004)")
    common.finish(res, args, started, raw)


if __name__ == "__main__":
    sys.exit(main())
