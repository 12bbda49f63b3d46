"""Workload 17: what the record's hash chain costs (issue 23.6).

Appends: N messages one at a time, each committed, through the real
`conversations.store.append_message`, against the same append with the chain step
taken out in the same process (no salt, no SHA-256, no read of the previous row's
chain hash; NULL in the three columns): the "raw sqlite3" column of this row is
that chainless append, not a peer. In alternating rounds of 100 appends (N/100
rounds each), after a warm-up round; the median round's rate.

Verification: one conversation of M messages (1,000,000 at full size, written in
batches of 1,000 through `append_messages`) walked by `proof.verify_conversation`
(every commitment recomputed, every link checked), against a plain scan of the same
rows through the same statements without hashing (the "raw" column here).
"""

import sys
import time

import common

BATCH = 1000
ROUND = 100  # appends per alternating round


def chainless(store, chain):
    """Patch the store's append path to skip the chain; returns a function that undoes it."""
    saved_seal, saved_form = store._seal_rows, dict(store._SQLITE_FORM)

    def seal_nothing(rows, position, prev, stamps):
        for offset, row in enumerate(rows):
            row[1] = position + offset

    store._seal_rows = seal_nothing
    # The same statement without the subquery; `?` takes the unused parameter.
    plain = store._SQLITE_FORM[store._BUMP_POSITION]
    store._SQLITE_FORM[store._BUMP_WITH_PREV] = plain.replace("RETURNING next_position",
                                                              "RETURNING next_position, (SELECT NULL WHERE ? IS NULL)")

    def undo():
        store._seal_rows = saved_seal
        store._SQLITE_FORM.clear()
        store._SQLITE_FORM.update(saved_form)

    return undo


def main(argv=None):
    args = common.parse_args(__doc__.splitlines()[0], argv)
    n = 300 if args.quick else 10_000
    m = 5_000 if args.quick else 1_000_000
    reps = args.reps or (1 if args.quick else 3)
    started = time.perf_counter()
    common.setup_django(args.workdir / "memoryui.sqlite3")
    from conversations import chain, proof, store
    from conversations.models import Conversation

    msgs = common.messages(ROUND)
    conversations = {"chain": store.create_conversation(title="bench chain").pk,
                     "none": store.create_conversation(title="bench without chain").pk}

    def appends(name):
        cid = conversations[name]
        t0 = time.perf_counter()
        for message in msgs:
            store.append_message(conversation_id=cid, message=message)
        return ROUND / (time.perf_counter() - t0)

    def appends_without_chain():
        undo = chainless(store, chain)
        try:
            return appends("none")
        finally:
            undo()

    appends("chain")  # warm-up, not counted: the first appends of a process pay for its caches
    # Short rounds, alternating, many of them: fsync time on a shared machine drifts by
    # more than the chain costs, and a drift then hits both sides alike.
    rounds = common.alternate({"chain": lambda: appends("chain"), "none": appends_without_chain},
                              max(reps, n // ROUND))
    rate = {name: common.median(values) for name, values in rounds.items()}

    big = store.create_conversation(title="bench verify").pk
    fill_started = time.perf_counter()
    for start in range(0, m, BATCH):
        store.append_messages(conversation_id=big, messages=common.messages(min(BATCH, m - start), start))
    fill_seconds = time.perf_counter() - fill_started
    conversation = Conversation.objects.get(pk=big)

    def verify():
        t0 = time.perf_counter()
        state = proof.verify_conversation(conversation)
        assert state.state == "verified" and state.messages == m, state
        return time.perf_counter() - t0

    def scan():
        t0 = time.perf_counter()
        rows = sum(1 for _ in proof._paged(
            f"SELECT position, kind, content, created_at, salt, commitment, chain_hash FROM {proof._MSG} "
            "WHERE conversation_id = %s AND position > %s ORDER BY position LIMIT %s", [proof._db_id(big)], 0))
        assert rows == m
        return time.perf_counter() - t0

    checks = common.alternate({"verify": verify, "scan": scan}, 1 if args.quick else 2)
    verify_s, scan_s = common.median(checks["verify"]), common.median(checks["scan"])

    res = common.Results("17 chain")
    res.sizes = {"appends": n, "verified_rows": m, "reps": reps}
    ratio = rate["chain"] / rate["none"]
    res.add(metric=f"appends/s with the hash chain vs without, {n:,} one at a time, each committed",
            memoryui=rate["chain"], raw=rate["none"], unit="msg/s", target="with / without ≥ 0.91 (≤ 10 % slower)",
            ratio=ratio, passed=ratio >= 1 / 1.1,
            note="raw column: the same store append with the chain step patched out (no salt, no SHA-256, "
                 "no read of the previous chain hash)")
    res.add(metric=f"verify one conversation of {m:,} rows (commitments and links)", memoryui=verify_s, raw=scan_s,
            unit="s", target="memoryui < 60 s", ratio=verify_s / scan_s, passed=verify_s < 60,
            note=f"raw column: scanning the same rows without hashing; ratio verify/scan. Filled in "
                 f"{fill_seconds:.0f} s through append_messages ({m // BATCH:,} batches of {BATCH:,})")
    common.close_django()
    res.seconds = time.perf_counter() - started
    res.write(args.out)


if __name__ == "__main__":
    sys.exit(main())
