"""Workload 10: fact recall with 100,000 facts in the store, 1,000 of them about the subject.

Set-up (not measured): one memoryui SQLite file with 100,000 facts written by
`Fact.objects.bulk_create` in one transaction (the full-text index fills itself
through its insert trigger; checked before measuring); 1,000 are about the
measured subject, the rest spread over 990 other subjects of 100 each, sharing
the same vocabulary. Every fact is approved, valid now and not expired, with
importance 1–10, recorded over the last year, half of them recalled at some time.

Measured, warm, alternating, each sample the mean of a batch of calls, the figure
the median of the samples:
- memoryui: `conversations.facts.recall.recall(subject=…, query=…, limit=10)`
  with a three-word query, and without a query. Each call is its own
  transaction: the candidates through the recall index, the full-text ranks, the
  scores, then the reinforcement writes (10 facts updated, 10 `recalled` events)
  and a commit — with WAL and synchronous=FULL, one fsync.
- raw sqlite3: a plain indexed select of the same 1,000 candidates on the same
  file (`SELECT … WHERE subject=? AND status='approved' AND … valid now`), rows
  fetched, nothing scored, nothing written.

Target: under 20 ms per recall (with a query). Also reported: recall / select.
"""

import random
import sys
import time
from datetime import timedelta

import common

QUERY = "refund store credit"
SUBJECT = "customer:bench-subject@example.com"

_FACT_WORDS = (
    "prefers email over phone refund store credit replacement shipping express standard invoice "
    "billing address card expired paypal bank transfer language german english french timezone "
    "morning afternoon weekend support chat callback warranty return label damaged late delivery "
    "loyalty discount coupon subscription monthly annual cancel pause upgrade downgrade account "
    "manager escalation priority vip allergy gift wrap newsletter opt out privacy"
).split()
_CATEGORIES = ("preference", "observation", "decision", "profile", "other")


def fact_text(rng: random.Random) -> str:
    return " ".join(rng.choice(_FACT_WORDS) for _ in range(rng.randint(5, 16))).capitalize()


def seed(total: int, per_subject: int) -> None:
    """`total` approved, valid facts; `per_subject` of them about SUBJECT, the rest
    about other subjects of `per_subject // 10` facts each (at least 1)."""
    from django.db import transaction
    from django.utils import timezone

    from conversations import projects
    from conversations.facts.models import APPROVED, Fact

    rng = random.Random(10)
    now = timezone.now()
    other_size = max(1, per_subject // 10)
    subjects = [SUBJECT] * per_subject + [
        f"customer:{i // other_size:05d}@example.com" for i in range(total - per_subject)
    ]
    rng.shuffle(subjects)  # the subject's rows are spread over the file, as in real life
    batch = 5000
    with transaction.atomic():
        for lo in range(0, total, batch):
            rows = []
            for subject in subjects[lo:lo + batch]:
                recorded = now - timedelta(days=rng.uniform(1, 365))
                accessed = recorded + (now - recorded) * rng.random() if rng.random() < 0.5 else None
                rows.append(Fact(
                    # bulk_create skips save(), which would give each fact the scope's project.
                    project_id=projects.DEFAULT_PROJECT_ID,
                    subject=subject, text=fact_text(rng), category=rng.choice(_CATEGORIES),
                    importance=rng.randint(1, 10), status=APPROVED, valid_from=recorded, recorded_at=recorded,
                    reviewed_at=recorded, reviewed_by="bench-reviewer", expires_at=now + timedelta(days=365),
                    created_by="key:bench", access_count=rng.randint(0, 5) if accessed else 0,
                    last_accessed_at=accessed,
                ))
            Fact.objects.bulk_create(rows)


def check_fulltext(db, per_subject: int) -> int:
    """The FTS5 index is kept by an insert trigger; bulk_create must have fed it:
    every fact indexed, and a subject match finds exactly the subject's facts."""
    from conversations.facts.models import Fact

    conn = common.connect_memoryui_file(db)
    try:
        indexed = conn.execute("SELECT count(*) FROM facts_fact_fts").fetchone()[0]
        key = SUBJECT.encode().hex().upper()
        in_subject = conn.execute("SELECT count(*) FROM facts_fact_fts WHERE facts_fact_fts MATCH ?",
                                  [f'subject_key : "{key}"']).fetchone()[0]
    finally:
        conn.close()
    stored = Fact.objects.count()
    assert indexed == stored, f"full-text index has {indexed} rows, facts_fact {stored}"
    assert in_subject == per_subject, f"full-text finds {in_subject} facts of the subject, expected {per_subject}"
    return indexed


# The facts are the `default` project's, and recall is measured as an agent's key runs it: in
# that project (conversations/projects.py), through the recall index that leads with it.
CANDIDATES_SQL = (
    "SELECT id, importance, recorded_at, last_accessed_at FROM facts_fact "
    "WHERE project_id = 1 AND subject = ? AND status = 'approved' AND superseded_by_id IS NULL AND valid_from <= ? "
    "AND (invalid_at IS NULL OR invalid_at > ?) AND (expires_at IS NULL OR expires_at > ?)"
)


def main(argv=None):
    args = common.parse_args(__doc__.splitlines()[0], argv)
    total, per_subject = (2_000, 100) if args.quick else (100_000, 1_000)
    reps = args.reps or (3 if args.quick else 9)
    batch = 3 if args.quick else 20
    started = time.perf_counter()
    db = args.workdir / "recall.sqlite3"
    common.setup_django(db)
    from django.db import connection
    from django.utils import timezone

    from conversations import projects
    from conversations.facts import recall as facts_recall

    t0 = time.perf_counter()
    seed(total, per_subject)
    common.wal_checkpoint(db)
    seed_seconds = time.perf_counter() - t0
    indexed = check_fulltext(db, per_subject)
    print(f"  seeded {total:,} facts ({per_subject:,} for the subject) in {seed_seconds:.1f} s", flush=True)

    # The raw peer: a bare sqlite3 connection (the same SQLite library, see
    # common.connect_memoryui_file) on the same file with the same pragmas (not
    # common.raw_connect, which would add its message tables to this file).
    raw = common.connect_memoryui_file(db, isolation_level=None, check_same_thread=False, timeout=30)
    raw.executescript(common.RAW_PRAGMAS)
    plan = " / ".join(r[-1] for r in raw.execute("EXPLAIN QUERY PLAN " + CANDIDATES_SQL, ["", "", "", ""]))

    def mu(query):
        def run():
            t0 = time.perf_counter()
            for _ in range(batch):
                with projects.scoped(projects.one(projects.DEFAULT_PROJECT_ID)):
                    found = facts_recall.recall(subject=SUBJECT, query=query, limit=10, actor="bench")
            dt = (time.perf_counter() - t0) / batch
            assert len(found) == 10
            return dt
        return run

    def rw():
        t0 = time.perf_counter()
        for _ in range(batch):
            # The same moment format Django stores (naive UTC text) so the comparison is the one recall makes.
            now = connection.ops.adapt_datetimefield_value(timezone.now())
            rows = raw.execute(CANDIDATES_SQL, (SUBJECT, now, now, now)).fetchall()
        dt = (time.perf_counter() - t0) / batch
        assert len(rows) == per_subject, len(rows)
        return dt

    runs = common.alternate({"mu-query": mu(QUERY), "mu-plain": mu(""), "raw": rw}, reps)
    t = {k: common.median(v) * 1000 for k, v in runs.items()}
    res = common.Results("10 recall")
    res.sizes = {"facts": total, "subject_facts": per_subject, "other_subjects": (total - per_subject)
                 // max(1, per_subject // 10), "limit": 10, "reps": reps, "batch": batch,
                 "seed_seconds": round(seed_seconds, 1), "fts_rows": indexed, "select_plan": plan}
    for key, label in (("mu-query", f"recall(limit=10, query={QUERY!r})"), ("mu-plain", "recall(limit=10), no query")):
        ms = t[key]
        res.add(metric=f"{label}, {per_subject:,} of {total:,} facts", memoryui=ms, raw=t["raw"], unit="ms",
                target="recall < 20 ms", ratio=ms, passed=ms < 20,
                note=f"recall / plain indexed select of the same {per_subject:,} candidates: {ms / t['raw']:.1f}×; "
                     + ("recall also ranks them by full text, and " if key == "mu-query" else "recall ")
                     + "commits its reinforcement (10 updates, 10 events, one fsync)")
    common.finish(res, args, started, raw)


if __name__ == "__main__":
    sys.exit(main())
