"""Workload 1: append N messages one at a time, each committed.

memoryui appends through `conversations.store.append_message` (validate, encode,
bump the counter, insert, commit with fsync); raw sqlite3 runs the same two
statements with the same pragmas; LangGraph writes one SqliteSaver checkpoint per
message. Reported: messages per second, and the latency of the 100th and of the
N-th append (median over a window of 50 around each), to see whether cost grows
with history.

LangGraph's cost per append grows with the conversation (the whole list is
serialized again), so appending N one by one would take hours at full size: its
throughput is measured over the first 1,000 appends, and its latency at message N
by seeding a thread with N-50 messages in one checkpoint and then appending 50.
"""

import sys
import time
import uuid

import common

WINDOW = 50


def window_median(latencies, at: int) -> float:
    """Median latency of the appends around the at-th (1-based)."""
    lo = max(0, at - WINDOW // 2 - 1)
    hi = min(len(latencies), lo + WINDOW)
    lo = max(0, hi - WINDOW)
    return common.median(latencies[lo:hi])


def main(argv=None):
    args = common.parse_args(__doc__.splitlines()[0], argv)
    n = 500 if args.quick else 10_000
    lg_n = 100 if args.quick else 1000
    reps = args.reps or (1 if args.quick else 3)
    started = time.perf_counter()
    common.setup_django(args.workdir / "memoryui.sqlite3")
    from conversations import store

    raw = common.raw_connect(args.workdir / "raw.sqlite3")
    lg = common.LangGraphPeer(args.workdir / "langgraph.sqlite3")
    msgs = common.messages(n)

    def run_memoryui():
        cid = store.create_conversation(title="bench append").pk
        lat = []
        for m in msgs:
            t0 = time.perf_counter()
            store.append_message(conversation_id=cid, message=m)
            lat.append(time.perf_counter() - t0)
        return lat

    def run_raw():
        cid = common.raw_create_conversation(raw)
        lat = []
        for m in msgs:
            t0 = time.perf_counter()
            common.raw_append(raw, cid, m)
            lat.append(time.perf_counter() - t0)
        return lat

    def run_langgraph():
        thread = uuid.uuid4().hex
        lat = []
        for i in range(lg_n):
            t0 = time.perf_counter()
            lg.append(thread, i)
            lat.append(time.perf_counter() - t0)
        return lat

    runs = common.alternate({"memoryui": run_memoryui, "raw": run_raw, "langgraph": run_langgraph}, reps)

    rate = {name: common.median([len(lat) / sum(lat) for lat in lats]) for name, lats in runs.items()}
    at100 = {name: common.median([window_median(lat, 100) for lat in lats]) for name, lats in runs.items()}
    atn = {name: common.median([window_median(lat, n) for lat in lats]) for name, lats in runs.items()
           if name != "langgraph"}

    # LangGraph at message n: a thread seeded with n-50 messages, then 50 appends.
    lg_tail = []
    for _ in range(reps):
        thread = uuid.uuid4().hex
        lg.put(thread, [common.lc_message(i) for i in range(n - WINDOW)])
        for i in range(n - WINDOW, n):
            t0 = time.perf_counter()
            lg.append(thread, i)
            lg_tail.append(time.perf_counter() - t0)
    atn["langgraph"] = common.median(lg_tail)

    # How many checkpoints a real one-node graph writes per invoke.
    graph, gconn = common.langgraph_graph(args.workdir / "langgraph-graph.sqlite3")
    for i in range(10):
        graph.invoke({"messages": [common.lc_message(i)]}, {"configurable": {"thread_id": "g"}}, durability="sync")
    per_invoke = gconn.execute("SELECT count(*) FROM checkpoints").fetchone()[0] / 10
    gconn.close()

    res = common.Results("1 append")
    res.sizes = {"messages": n, "langgraph_messages": lg_n, "reps": reps}
    ratio = rate["memoryui"] / rate["raw"]
    res.add(metric=f"appends/s, {n:,} one at a time, each committed", memoryui=rate["memoryui"], raw=rate["raw"],
            langgraph=rate["langgraph"], unit="msg/s", target="memoryui/raw ≥ 0.50", ratio=ratio,
            passed=ratio >= 0.5,
            note=f"LangGraph over its first {lg_n:,} appends (one checkpoint each; a real graph.invoke "
                 f"writes {per_invoke:g} checkpoints per call)")
    ms = 1000
    res.add(metric="latency of the 100th append", memoryui=at100["memoryui"] * ms, raw=at100["raw"] * ms,
            langgraph=at100["langgraph"] * ms, unit="ms", note=f"median of {WINDOW} appends around it")
    growth = atn["memoryui"] / at100["memoryui"]
    res.add(metric=f"latency of the {n:,}th append", memoryui=atn["memoryui"] * ms, raw=atn["raw"] * ms,
            langgraph=atn["langgraph"] * ms, unit="ms", target=f"memoryui @{n:,} / @100 ≤ 1.2", ratio=growth,
            passed=growth <= 1.2,
            note=f"raw {atn['raw'] / at100['raw']:.2f}×, LangGraph {atn['langgraph'] / at100['langgraph']:.0f}× "
                 f"its @100")
    common.finish(res, args, started, lg, raw)


if __name__ == "__main__":
    sys.exit(main())
