"""Workload 17: what the record's hash chain costs.

Appends: N messages one at a time, each committed, through the real
`conversations.store.append_message`, against the same append with the chain step
taken out in the same process (no salt, no SHA-256, no read of the previous row's
chain hash; NULL in the three columns): the "raw sqlite3" column of this row is
that chainless append, not a peer. In alternating rounds of 100 appends (N/100
rounds each), after a warm-up round; the median round's rate.

At full size, on PostgreSQL (when `psql -d postgres` answers), the same comparison in
a process of its own, on a throwaway database.

Verification: one conversation of M messages (1,000,000 at full size, written in
batches of 1,000 through `append_messages`) walked by `chain_verify.verify_conversation`
(every commitment recomputed, every link checked), against a plain scan of the same
rows through the same statements without hashing (the "raw" column here).
"""

import json
import os
import subprocess
import sys
import time

import common

BATCH = 1000
ROUND = 100  # appends per alternating round


def chainless(store, rows):
    """Patch the store's append path to skip the chain; returns a function that undoes it."""
    saved_seal, saved_form, saved_pg = store.seal_rows, dict(rows.SQLITE_FORM), store.BUMP_WITH_PREV_PG

    def seal_nothing(batch, position, prev, stamps):
        for offset, row in enumerate(batch):
            row[1] = position + offset

    store.seal_rows = seal_nothing
    # The same statement without the look-up of the previous chain hash; the unused
    # parameter goes to a NULL that nothing reads.
    no_prev = "RETURNING next_position, (SELECT NULL WHERE %s IS NULL)"
    plain = rows.SQLITE_FORM[store.BUMP_POSITION]
    rows.SQLITE_FORM[store.BUMP_WITH_PREV] = plain.replace("RETURNING next_position", no_prev.replace("%s", "?"))
    store.BUMP_WITH_PREV_PG = store.BUMP_POSITION.replace("RETURNING next_position", no_prev)

    def undo():
        store.seal_rows, store.BUMP_WITH_PREV_PG = saved_seal, saved_pg
        rows.SQLITE_FORM.clear()
        rows.SQLITE_FORM.update(saved_form)

    return undo


def append_rates(store, rows, *, rounds: int) -> dict[str, float]:
    """Median appends/s of alternating rounds with and without the chain (see the docstring)."""
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
        undo = chainless(store, rows)
        try:
            return appends("none")
        finally:
            undo()

    appends("chain")  # warm-up, not counted: the first appends of a process pay for its caches
    # Short rounds, alternating, many of them: fsync time on a shared machine drifts by
    # more than the chain costs, and a drift then hits both sides alike.
    runs = common.alternate({"chain": lambda: appends("chain"), "none": appends_without_chain}, rounds)
    return {name: common.median(values) for name, values in runs.items()}


def postgres_child(url: str, rounds: int) -> int:
    """In a process of its own (Django is configured once per process): the append rates on PostgreSQL."""
    os.environ.update({"DATABASE_URL": url, "DJANGO_SETTINGS_MODULE": "memoryui.settings",
                       "MEMORYUI_LOG_LEVEL": "ERROR"})
    os.environ.setdefault("SECRET_KEY", "bench-w17")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0, interactive=False)
    common.close_django()
    from conversations import rows, store

    print(json.dumps(append_rates(store, rows, rounds=rounds)))
    return 0


def postgres_rates(workdir, rounds: int) -> dict | None:
    """The same comparison on PostgreSQL when one is reachable (psql -d postgres), else None."""
    try:
        reachable = subprocess.run(["psql", "-d", "postgres", "-Atc", "SELECT 1"], capture_output=True,
                                   timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        reachable = False
    if not reachable:
        return None
    name = f"memoryui_bench17_{os.getpid()}"
    subprocess.run(["createdb", name], check=True, capture_output=True)
    try:
        env = dict(os.environ, MEMORYUI_DATA_DIR=str(workdir / "pg-data"))
        env.pop("DATABASE_URL", None)
        proc = subprocess.run([sys.executable, __file__, "--pg-child", f"postgres:///{name}", str(rounds)],
                              capture_output=True, text=True, env=env, check=True)
        return json.loads(proc.stdout.strip().splitlines()[-1])
    finally:
        subprocess.run(["dropdb", "--if-exists", name], capture_output=True)


def main(argv=None):
    args = common.parse_args(__doc__.splitlines()[0], argv)
    n = 300 if args.quick else 10_000
    m = 5_000 if args.quick else 1_000_000
    reps = args.reps or (1 if args.quick else 3)
    started = time.perf_counter()
    common.setup_django(args.workdir / "memoryui.sqlite3")
    from conversations import chain_verify, rows, store
    from conversations.models import Conversation

    rate = append_rates(store, rows, rounds=max(reps, n // ROUND))

    big = store.create_conversation(title="bench verify").pk
    fill_started = time.perf_counter()
    for start in range(0, m, BATCH):
        store.append_messages(conversation_id=big, messages=common.messages(min(BATCH, m - start), start))
    fill_seconds = time.perf_counter() - fill_started
    conversation = Conversation.objects.get(pk=big)

    def verify():
        t0 = time.perf_counter()
        state = chain_verify.verify_conversation(conversation)
        assert state.state == "verified" and state.messages == m, state
        return time.perf_counter() - t0

    def scan():
        t0 = time.perf_counter()
        scanned = sum(1 for _ in chain_verify.message_rows(big))
        assert scanned == m
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
    pg = None if args.quick else postgres_rates(args.workdir, max(reps, n // ROUND))
    if pg is not None:
        ratio = pg["chain"] / pg["none"]
        res.add(metric=f"appends/s with the hash chain vs without on PostgreSQL, {n:,} one at a time",
                memoryui=pg["chain"], raw=pg["none"], unit="msg/s", target="with / without ≥ 0.91 (≤ 10 % slower)",
                ratio=ratio, passed=ratio >= 1 / 1.1,
                note="the same comparison on PostgreSQL (the previous chain hash read by the position-reserving "
                     "UPDATE through memoryui_chain_hash(), the link computed in Python); "
                     "raw column: the store's append with the chain patched out")
    res.add(metric=f"verify one conversation of {m:,} rows (commitments and links)", memoryui=verify_s, raw=scan_s,
            unit="s", target="memoryui < 60 s", ratio=verify_s / scan_s, passed=verify_s < 60,
            note=f"raw column: scanning the same rows without hashing; ratio verify/scan. Filled in "
                 f"{fill_seconds:.0f} s through append_messages ({m // BATCH:,} batches of {BATCH:,})")
    common.finish(res, args, started)


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--pg-child":
        sys.exit(postgres_child(sys.argv[2], int(sys.argv[3])))
    sys.exit(main())
