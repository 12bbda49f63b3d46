"""Workload 11: full-text search over 1,000,000 messages, the index's bytes, appends with it.

memoryui answers `conversations.search.reads.search_messages(q, limit=20)`: the
FTS5 query in the index's own order (newest conversation first), joined to the
messages and conversations, the first page decoded and given snippets marked by
FTS5. raw sqlite3 runs the same FTS5 MATCH … ORDER BY rowid DESC LIMIT 21 on the
same file and fetches the rowids (no join, no snippets): the floor. Warm cache;
the latency percentiles are over every single call, the sizes alternating.

The corpus: 100 conversations of 10,000 messages (the generator's ~300-character
texts, each with its own ticket number "T<i>"), indexed by the triggers as they
were bulk-inserted, then rows appended one at a time into a 101st conversation
until 63 wait to enter the index (SQLite: it takes rows in 64 at a time), which
every search matches in memory besides the index: the most a search ever has to.

Bytes: the file per message (main file after a WAL checkpoint), and the pages
of the index's own tables (SQLite's dbstat). Appends: one at a time, each
committed, into a new conversation of that big file, with the index and with its
trigger dropped, against raw sqlite3 doing the same inserts (its own file, as in
workload 1), alternating.
"""

import importlib
import sys
import time

import common

QUERIES = {
    "two common words": "refund warehouse",
    # "ticket" is in every message, T<n> in one (set in main for the corpus size).
    "a common and a rare word": "ticket T{rare}",
    "a phrase": '"shipping label"',
    "a prefix": "wareh*",
}


def fill(conversation_id, n: int, start_ticket: int):
    from django.db import connection, transaction
    from django.utils import timezone

    from conversations.message_schema import encode_message
    from conversations.models import Conversation, Message

    cid = Conversation._meta.pk.get_db_prep_value(conversation_id, connection)
    when = connection.ops.adapt_datetimefield_value(timezone.now())
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(f"UPDATE {Conversation._meta.db_table} SET next_position = %s WHERE id = %s", [n, cid])
        rows = []
        for i in range(n):
            m = common.message_for(i % 4096)
            key = "text" if "text" in m else "content"
            m[key] = f"{m[key]} ticket T{start_ticket + i}"
            kind, text = encode_message(m)
            rows.append((cid, i, kind, text, when))
            if len(rows) == 20_000:
                cursor.executemany(f"INSERT INTO {Message._meta.db_table} (conversation_id, position, kind, "
                                   "content, created_at) VALUES (%s, %s, %s, %s, %s)", rows)
                rows = []
        if rows:
            cursor.executemany(f"INSERT INTO {Message._meta.db_table} (conversation_id, position, kind, "
                               "content, created_at) VALUES (%s, %s, %s, %s, %s)", rows)


def percentile(values, p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def _leave_rows_waiting(flush_at: int) -> int:
    """The worst case for a search: 63 rows waiting to enter the index (it takes them
    in 64 at a time), which every search matches in memory besides the index. Returns
    how many rows it appended."""
    from django.db import connection

    from conversations import store

    def waiting_rows() -> int:
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM search_message_pending")
            return cursor.fetchone()[0]

    waiting = store.create_conversation(title="search bench, waiting rows")
    topping = (flush_at - 1 - waiting_rows()) % flush_at
    for i in range(topping):
        m = common.message_for(i)
        key = "text" if "text" in m else "content"
        m[key] = f"{m[key]} ticket W{i}"
        store.append_message(conversation_id=waiting.pk, message=m)
    assert waiting_rows() == flush_at - 1
    return topping


def _memoryui_search(search_messages, filters_class, q, **filters):
    """A timed call of memoryui's search (seconds), which must find something."""
    def run():
        t0 = time.perf_counter()
        page = search_messages(q, filters=filters_class(**filters), limit=20)
        dt = time.perf_counter() - t0
        assert page.hits, q
        return dt
    return run


def _raw_search(raw, q):
    """A timed bare FTS5 query (rowids only) for the same words, on the same file."""
    from conversations.search.query import parse_query

    expression = parse_query(q).fts5()

    def run():
        t0 = time.perf_counter()
        rows = raw.execute("SELECT rowid FROM search_message_fts WHERE search_message_fts MATCH ? "
                           "ORDER BY rowid DESC LIMIT 21", (expression,)).fetchall()
        dt = time.perf_counter() - t0
        assert rows
        return dt
    return run


def main(argv=None):
    args = common.parse_args(__doc__.splitlines()[0], argv)
    conversations, per = (10, 1_000) if args.quick else (100, 10_000)
    calls = 10 if args.quick else 200
    appends = 100 if args.quick else 3_000
    reps = args.reps or (1 if args.quick else 3)
    started = time.perf_counter()

    # --- the big corpus
    db = args.workdir / "search.sqlite3"
    common.setup_django(db)
    text_bytes = sum(len(t.encode()) for _, t in common.encoded(4096)) / 4096 + 14
    from django.db import connection

    from conversations import store
    from conversations.search.reads import Filters, search_messages

    FLUSH_AT = importlib.import_module("conversations.search.migrations.0002_pending_rows").FLUSH_AT

    t0 = time.perf_counter()
    ids = []
    for c in range(conversations):
        conversation = store.create_conversation(title=f"search bench {c}")
        fill(conversation.pk, per, c * per)
        ids.append(conversation.pk)
    topping = _leave_rows_waiting(FLUSH_AT)
    common.wal_checkpoint(db)
    build = time.perf_counter() - t0
    total = conversations * per + topping
    print(f"  built {total:,} messages with the index in {build:.1f} s", flush=True)

    raw = common.connect_memoryui_file(db, isolation_level=None, check_same_thread=False, timeout=30)
    raw.executescript(common.RAW_PRAGMAS)
    plan = " / ".join(r[-1] for r in connection.cursor().execute(
        "EXPLAIN QUERY PLAN SELECT f.rowid FROM search_message_fts f JOIN search_conversationkey k "
        "ON k.seq = f.rowid >> 32 WHERE search_message_fts MATCH 'a' ORDER BY f.rowid DESC LIMIT 21").fetchall())

    def mu(q, **filters):
        return _memoryui_search(search_messages, Filters, q, **filters)

    def rw(q):
        return _raw_search(raw, q)

    queries = {label: q.format(rare=conversations * per * 7 // 9) for label, q in QUERIES.items()}
    runners = {}
    for label, q in queries.items():
        runners[f"mu:{label}"] = mu(q)
        runners[f"raw:{label}"] = rw(q)
    runners["mu:one conversation"] = mu("refund warehouse", conversation_id=ids[len(ids) // 2])
    runners["mu:only tool rows"] = mu("refund warehouse", kinds=("tool",))
    samples = {name: [] for name in runners}
    for _ in range(calls):
        for name, run in runners.items():
            samples[name].append(run())
    ms = 1000

    res = common.Results("11 search")
    res.sizes = {"messages": total, "conversations": conversations, "calls": calls, "appends": appends, "reps": reps,
                 "build_seconds": round(build, 1), "plan": plan}
    for label, q in queries.items():
        p50, p99 = percentile(samples[f"mu:{label}"], 50) * ms, percentile(samples[f"mu:{label}"], 99) * ms
        r50 = percentile(samples[f"raw:{label}"], 50) * ms
        two_words = label == "two common words"
        res.add(metric=f"search {q!r} ({label}), first 20 of {total:,} messages: p50", memoryui=p50, raw=r50,
                unit="ms", target="p50 ≤ 50 ms" if two_words else "", ratio=p50 if two_words else None,
                passed=(p50 <= 50) if two_words else None,
                note=f"p99 {p99:.1f} ms; raw is the bare FTS5 query (rowids only) on the same file")
    for label in ("one conversation", "only tool rows"):
        p50, p99 = percentile(samples[f"mu:{label}"], 50) * ms, percentile(samples[f"mu:{label}"], 99) * ms
        res.add(metric=f"search 'refund warehouse', {label}: p50", memoryui=p50, unit="ms",
                note=f"p99 {p99:.1f} ms")

    # --- bytes: the whole file per message, and the index's own pages (dbstat)
    whole = common.bytes_on_disk(db) / total
    index_pages = raw.execute("SELECT sum(pgsize) FROM dbstat WHERE name LIKE 'search_message_fts%' "
                              "OR name LIKE 'search_conversationkey%'").fetchone()[0] or 0
    res.add(metric=f"bytes per message at {total:,}, with the search index", memoryui=whole,
            raw=whole - index_pages / total, unit="B/msg", target="(no target)",
            ratio=whole / (whole - index_pages / total),
            note=f"raw column: the same file less the index's pages; the index takes "
                 f"{index_pages / total:.0f} B/msg (message text ≈ {text_bytes:.0f} B)")

    # --- appends with and without the index, and raw sqlite3 doing the same inserts
    raw_conn = common.raw_connect(args.workdir / "append-raw.sqlite3")
    msgs = common.messages(appends)
    trigger_sql = raw.execute("SELECT sql FROM sqlite_master WHERE name = 'search_message_index'").fetchone()[0]

    def run_memoryui():
        cid = store.create_conversation(title="bench append").pk
        t0 = time.perf_counter()
        for m in msgs:
            store.append_message(conversation_id=cid, message=m)
        return appends / (time.perf_counter() - t0)

    def run_raw():
        cid = common.raw_create_conversation(raw_conn)
        t0 = time.perf_counter()
        for m in msgs:
            common.raw_append(raw_conn, cid, m)
        return appends / (time.perf_counter() - t0)

    def run_without_index():
        with connection.cursor() as cursor:
            cursor.execute("DROP TRIGGER search_message_index")
        try:
            return run_memoryui()
        finally:
            with connection.cursor() as cursor:
                cursor.execute(trigger_sql)

    rates = {"memoryui": [], "raw": [], "plain": []}
    for _ in range(reps):
        rates["memoryui"].append(run_memoryui())
        rates["raw"].append(run_raw())
        rates["plain"].append(run_without_index())
    with_index = common.median(rates["memoryui"])
    raw_rate = common.median(rates["raw"])
    without = common.median(rates["plain"])
    res.add(metric=f"appends/s with the search index, {appends:,} one at a time, each committed",
            memoryui=with_index, raw=raw_rate, unit="msg/s", target="memoryui/raw ≥ 0.50",
            ratio=with_index / raw_rate, passed=with_index / raw_rate >= 0.5,
            note=f"without the index trigger: {without:,.0f} msg/s (the index costs "
                 f"{(1 / with_index - 1 / without) * 1e6:.0f} µs per append)")
    common.finish(res, args, started, raw_conn, raw)


if __name__ == "__main__":
    sys.exit(main())
