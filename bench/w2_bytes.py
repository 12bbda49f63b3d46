"""Workload 2: bytes on disk per message at 1,000 and 10,000 messages.

Each peer appends one message at a time (committed) into its own file; after
each size the WAL is checkpointed into the main file (TRUNCATE) and the growth of
main file + WAL since the empty schema is divided by the message count. The
yardstick is the message's own size: the UTF-8 bytes of the text memoryui stores
(compact JSON of the message).

LangGraph keeps every checkpoint and each holds the whole list, so its file grows
with the square of the conversation: it is measured at the small size and, at the
large size, estimated from the measured size of one checkpoint at that length
(Σ over k of size(k) ≈ n/2 · size(n); marked "est.").
"""

import sys
import time
import uuid

import common


def main(argv=None):
    args = common.parse_args(__doc__.splitlines()[0], argv)
    sizes = (100, 500) if args.quick else (1000, 10_000)
    started = time.perf_counter()
    db = args.workdir / "memoryui.sqlite3"
    common.setup_django(db)
    from conversations import store

    raw_path = args.workdir / "raw.sqlite3"
    raw = common.raw_connect(raw_path)
    lg_path = args.workdir / "langgraph.sqlite3"
    lg = common.LangGraphPeer(lg_path)

    base = {"memoryui": common.bytes_on_disk(db), "raw": common.bytes_on_disk(raw_path),
            "langgraph": common.bytes_on_disk(lg_path)}
    cid = store.create_conversation(title="bench bytes").pk
    rcid = common.raw_create_conversation(raw)
    thread = uuid.uuid4().hex
    stored = common.encoded(sizes[-1])
    text_bytes = {n: sum(len(t.encode()) for _, t in stored[:n]) / n for n in sizes}

    per_message = {}
    done = 0
    lg_done = 0
    lg_limit = sizes[0]
    for n in sizes:
        for i in range(done, n):
            m = common.message_for(i)
            store.append_message(conversation_id=cid, message=m)
            common.raw_append(raw, rcid, m)
        if n <= lg_limit:
            for i in range(lg_done, n):
                lg.append(thread, i)
            lg_done = n
        done = n
        per_message[n] = {
            "memoryui": (common.bytes_on_disk(db) - base["memoryui"]) / n,
            "raw": (common.bytes_on_disk(raw_path) - base["raw"]) / n,
            "langgraph": (common.bytes_on_disk(lg_path) - base["langgraph"]) / n if n <= lg_limit else None,
        }

    # LangGraph at the large size: the size of one checkpoint holding n messages.
    n = sizes[-1]
    before = common.bytes_on_disk(lg_path)
    lg.put("probe-" + uuid.uuid4().hex, [common.lc_message(i) for i in range(n)])
    one_checkpoint = common.bytes_on_disk(lg_path) - before
    per_message[n]["langgraph"] = (n / 2 * one_checkpoint) / n  # Σ size(k) ≈ n/2 · size(n), per message

    res = common.Results("2 bytes on disk")
    res.sizes = {"sizes": list(sizes), "langgraph_measured_up_to": lg_limit}
    for n in sizes:
        pm = per_message[n]
        ratio = pm["memoryui"] / text_bytes[n]
        est = " (LangGraph est.)" if n > lg_limit else ""
        res.add(metric=f"bytes per message at {n:,} (message text {text_bytes[n]:.0f} B)", memoryui=pm["memoryui"],
                raw=pm["raw"], langgraph=pm["langgraph"], unit="B/msg", target="memoryui / text ≤ 2.0",
                ratio=ratio, passed=ratio <= 2.0,
                note=f"raw {pm['raw'] / text_bytes[n]:.2f}×, LangGraph {pm['langgraph'] / text_bytes[n]:,.0f}× "
                     f"the text{est}")
    common.finish(res, args, started, lg, raw)


if __name__ == "__main__":
    sys.exit(main())
