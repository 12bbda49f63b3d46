"""Workload 18: the subject access export of a subject with 100,000 messages: peak memory and time.

The subject has four conversations of 25,000 messages each (each with a checkpoint) and 200
reviewed facts. Each export runs in a fresh child process (bench/subject_export_child.py) so
that its peak resident memory is its own: the signed ZIP (JSONL and Markdown of every
conversation, facts, ledger, access log, receipts, manifest), the same conversations exported
as plain JSONL (the peer: what the ZIP adds costs the ratio), and a child that only sets
Django up (the floor).
"""

import json
import subprocess
import sys
import time
from pathlib import Path

import common

HERE = Path(__file__).resolve().parent
SUBJECT = "Customer:Bench-17"


def child(mode, db) -> dict:
    out = subprocess.run([sys.executable, str(HERE / "subject_export_child.py"), mode, str(db), SUBJECT],
                         capture_output=True, text=True, check=True, cwd=HERE)
    return json.loads(out.stdout.strip().splitlines()[-1])


def build(db: Path, per_conversation: int, facts: int) -> None:
    common.setup_django(db)
    from conversations import store
    from conversations.facts import store as facts_store

    for i in range(4):
        conversation = store.create_conversation(title=f"bench subject {i}", subject=SUBJECT.lower())
        common.bulk_fill(conversation.pk, per_conversation)
        store.checkpoint_at(conversation_id=conversation.pk, position=per_conversation // 2,
                            summary="The customer asked for a refund; it was approved.")
    for i in range(facts):
        fact = facts_store.propose_fact(subject=SUBJECT, text=f"Bench fact {i}: prefers email.", importance=5,
                                        created_by="key:bench")
        facts_store.approve_fact(fact_id=fact.pk, actor="user:bench")
    common.close_django()


def main(argv=None):
    args = common.parse_args(__doc__.splitlines()[0], argv)
    reps = args.reps or 1
    started = time.perf_counter()
    per_conversation = 500 if args.quick else 25_000
    db = args.workdir / "w18.sqlite3"
    build(db, per_conversation, 20 if args.quick else 200)
    messages = 4 * per_conversation
    runs = common.alternate({"zip": lambda: child("zip", db), "jsonl": lambda: child("jsonl", db)}, reps)
    base = child("baseline", db)
    t = {k: common.median([r["seconds"] for r in v]) for k, v in runs.items()}
    mem = {k: max(r["peak_mb"] for r in v) for k, v in runs.items()}
    res = common.Results("18 subject export")
    res.sizes = {"messages": messages, "conversations": 4, "reps": reps, "zip_bytes": runs["zip"][0]["bytes"],
                 "jsonl_bytes": runs["jsonl"][0]["bytes"]}
    res.add(metric=f"subject access export, {messages:,} messages: peak memory of the process",
            memoryui=mem["zip"], raw=mem["jsonl"], unit="MB", target="memoryui < 150 MB", ratio=mem["zip"],
            passed=mem["zip"] < 150,
            note=f"raw = the same conversations as plain JSONL; a process that only sets Django up peaks at "
                 f"{base['peak_mb']:.0f} MB")
    res.add(metric=f"subject access export, {messages:,} messages: time", memoryui=t["zip"], raw=t["jsonl"],
            unit="s", ratio=t["zip"] / t["jsonl"], target="zip/jsonl (no target)",
            note="the ZIP adds Markdown, deflate, SHA-256 of every file and a signed head per conversation")
    res.seconds = time.perf_counter() - started
    res.write(args.out)


if __name__ == "__main__":
    sys.exit(main())
