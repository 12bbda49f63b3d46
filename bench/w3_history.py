"""Workload 3: load the whole history of a 10,000-message conversation (resume).

memoryui: `conversations.reads.list_messages(id)` (every row read and decoded into
the message model). raw sqlite3: the same SELECT on the same file, each row's
text parsed with json.loads. LangGraph: `SqliteSaver.get_tuple` of the thread's
latest checkpoint holding the same messages (what a graph reads at resume).
"""

import json
import sys
import time

import common


def main(argv=None):
    args = common.parse_args(__doc__.splitlines()[0], argv)
    n = 500 if args.quick else 10_000
    reps = args.reps or (3 if args.quick else 7)
    started = time.perf_counter()
    db = args.workdir / "memoryui.sqlite3"
    common.setup_django(db)
    from conversations import reads, store
    from conversations.models import Message

    cid = store.create_conversation(title="bench history").pk
    common.bulk_fill(cid, n)
    lg = common.LangGraphPeer(args.workdir / "langgraph.sqlite3")
    lg.put("t", [common.lc_message(i) for i in range(n)])
    raw = common.raw_connect(db)
    table = Message._meta.db_table
    raw_cid = cid.hex

    def run_memoryui():
        t0 = time.perf_counter()
        page = reads.list_messages(cid)
        dt = time.perf_counter() - t0
        assert len(page.items) == n
        return dt

    def run_raw():
        t0 = time.perf_counter()
        rows = raw.execute(f"SELECT position, kind, created_at, content FROM {table} "
                           "WHERE conversation_id = ? ORDER BY position", (raw_cid,)).fetchall()
        loaded = [json.loads(r[3]) for r in rows]
        dt = time.perf_counter() - t0
        assert len(loaded) == n
        return dt

    def run_langgraph():
        t0 = time.perf_counter()
        loaded = lg.load("t")
        dt = time.perf_counter() - t0
        assert len(loaded) == n
        return dt

    runs = common.alternate({"memoryui": run_memoryui, "raw": run_raw, "langgraph": run_langgraph}, reps)
    t = {k: common.median(v) * 1000 for k, v in runs.items()}
    res = common.Results("3 load history")
    res.sizes = {"messages": n, "reps": reps}
    res.add(metric=f"load all {n:,} messages", memoryui=t["memoryui"], raw=t["raw"], langgraph=t["langgraph"],
            unit="ms", ratio=t["memoryui"] / t["raw"], target="memoryui/raw (no target)",
            note="memoryui validates every row into its message model; raw only json.loads; "
                 "LangGraph deserializes one checkpoint")
    common.finish(res, args, started, raw, lg)


if __name__ == "__main__":
    sys.exit(main())
