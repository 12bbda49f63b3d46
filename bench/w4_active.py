"""Workload 4: the active view at the start of a turn, 1,000,000 messages vs 1,000.

Both conversations have a checkpoint 200 messages before their end; the agent
asks for the first page of what the model receives next:
`conversations.reads.list_active(id, limit=100)` (the latest checkpoint, then a
keyset page of the rows after its position). raw sqlite3 runs the same two
queries on the same file and json.loads each row. Warm cache; each sample is the
mean of a batch of calls, the figure is the median of the samples, the sizes
alternating.
"""

import json
import sys
import time

import common


def main(argv=None):
    args = common.parse_args(__doc__.splitlines()[0], argv)
    reps = args.reps or (3 if args.quick else 9)
    batch = 20 if args.quick else 100
    started = time.perf_counter()
    db, ids = common.big_database(args.shared, args.quick)
    small, big = 1000, max(ids)
    from conversations import reads
    from conversations.models import Checkpoint, Message

    raw = common.raw_connect(db)
    mt, ct = Message._meta.db_table, Checkpoint._meta.db_table

    def mu(n):
        def run():
            t0 = time.perf_counter()
            for _ in range(batch):
                view = reads.list_active(ids[n], limit=100)
            dt = (time.perf_counter() - t0) / batch
            assert view.checkpoint is not None and len(view.page.items) == 100
            return dt
        return run

    def rw(n):
        cid = ids[n].replace("-", "")

        def run():
            t0 = time.perf_counter()
            for _ in range(batch):
                fold = raw.execute(f"SELECT message_position, summary FROM {ct} WHERE conversation_id = ? "
                                   "ORDER BY message_position DESC, id DESC LIMIT 1", (cid,)).fetchone()
                rows = raw.execute(f"SELECT position, kind, created_at, content FROM {mt} WHERE conversation_id = ? "
                                   "AND position > ? ORDER BY position LIMIT 101", (cid, fold[0])).fetchall()
                page = [json.loads(r[3]) for r in rows[:100]]
            dt = (time.perf_counter() - t0) / batch
            assert len(page) == 100
            return dt
        return run

    runs = common.alternate({"mu-small": mu(small), "mu-big": mu(big), "raw-small": rw(small), "raw-big": rw(big)},
                            reps)
    t = {k: common.median(v) * 1000 for k, v in runs.items()}
    res = common.Results("4 active view")
    res.sizes = {"small": small, "big": big, "reps": reps, "batch": batch}
    res.add(metric=f"list_active(limit=100) at {small:,} messages", memoryui=t["mu-small"], raw=t["raw-small"],
            unit="ms", note="checkpoint 200 before the end")
    ratio = t["mu-big"] / t["mu-small"]
    res.add(metric=f"list_active(limit=100) at {big:,} messages", memoryui=t["mu-big"], raw=t["raw-big"], unit="ms",
            target=f"memoryui @{big:,} / @{small:,} ≤ 1.5", ratio=ratio, passed=ratio <= 1.5,
            note=f"raw {t['raw-big'] / t['raw-small']:.2f}×; memoryui/raw at {big:,}: "
                 f"{t['mu-big'] / t['raw-big']:.1f}×")
    common.finish(res, args, started, raw)


if __name__ == "__main__":
    sys.exit(main())
