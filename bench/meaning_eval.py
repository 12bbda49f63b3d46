"""Recall by meaning, measured: recall@1 and recall@3 on the paraphrase set (bench/meaning_set.py).

Set-up: a throwaway memoryui SQLite file; the set's 104 facts over 8 subjects (and the 24
of its `NAMED` part over 2 more) proposed
through the store and approved, then given their vectors by the background embedder's
job (the embedded model); importance 3–8 and, for half of them, a last recall some days ago,
drawn at random (seeded): recency and importance differ as they would in use.

Measured: each fact is asked for once, in a shuffled order, by `recall(subject, query,
limit=3)` as an agent would, so every recall reinforces what it returned (access count,
last access) and later recalls see those changes (the issue's finding: use and recency
drowned relevance). Once with each fact's paraphrase query (no content word shared with
the fact), once with its own words, once with its one most telling word; and each `NAMED`
fact with its query (a name shared by several facts, the rest in other words). Each
method runs on the same starting state (each pass inside a transaction that is rolled
back): full text alone, vectors alone, and the two fusions (reciprocal rank fusion, a
weighted sum).
"""

import random
import sys
import time
from datetime import timedelta

import common
from meaning_set import NAMED, SET

METHODS = ("words", "meaning", "rrf", "weighted")
LABELS = {"words": "full text alone", "meaning": "vectors alone", "rrf": "fusion: reciprocal rank",
          "weighted": "fusion: weighted sum"}


def seed():
    from django.utils import timezone

    from conversations.facts import store
    from conversations.facts.models import Fact

    rng = random.Random(45)
    now = timezone.now()
    facts = {}
    for subject, items in (*SET.items(), *NAMED.items()):
        for text, query in items:
            fact = store.propose_fact(subject=subject, text=text, importance=rng.randint(3, 8), created_by="bench")
            store.approve_fact(fact_id=fact.pk, actor="bench-reviewer")
            if rng.random() < 0.5:
                Fact.objects.filter(pk=fact.pk).update(last_accessed_at=now - timedelta(days=rng.uniform(0.1, 60)),
                                                       access_count=rng.randint(1, 5))
            facts[(subject, text)] = (fact.pk, query)
    from conversations.embeddings import worker

    worker.run_until_done()  # their vectors, as the server's background embedder writes them
    return facts


def keyword_of(text: str) -> str:
    """A fact's one most telling word, as an agent that knows a name or a number asks: its
    longest word outside the stop words (the issue's "refunds", "peanut")."""
    from conversations.facts.recall import STOP_WORDS, query_terms

    words = [w for w in query_terms(text) if w.casefold() not in STOP_WORDS]
    return max(words, key=len)


QUERIES = ("paraphrase", "exact", "keyword", "named")


def evaluate(facts: dict, method: str, which: str) -> tuple[float, float, dict]:
    from django.db import transaction

    from conversations.facts import recall as facts_recall

    named = which == "named"
    order = [item for item in facts.items() if (item[0][0] in NAMED) == named]
    random.Random(7).shuffle(order)
    at1 = at3 = 0
    matched = {"words": 0, "meaning": 0}
    with transaction.atomic():
        for (subject, text), (pk, paraphrase) in order:
            query = paraphrase if named else {"paraphrase": paraphrase, "exact": text,
                                              "keyword": keyword_of(text)}[which]
            got = facts_recall.recall(subject=subject, query=query, limit=3, actor="bench", fusion=method)
            ids = [r.fact.pk for r in got]
            at1 += bool(ids) and ids[0] == pk
            at3 += pk in ids
            for r in got:
                if r.fact.pk == pk:
                    for signal in r.matched:
                        matched[signal] += 1
        transaction.set_rollback(True)
    n = len(order)
    return at1 / n, at3 / n, matched


def main(argv=None):
    args = common.parse_args(__doc__.splitlines()[0], argv)
    started = time.perf_counter()
    common.setup_django(args.workdir / "meaning.sqlite3")
    facts = seed()
    res = common.Results("19 recall by meaning")
    res.sizes = {"facts": len(facts), "subjects": len(SET), "limit": 3}
    table = {}
    for which in QUERIES:
        for method in METHODS:
            r1, r3, matched = evaluate(facts, method, which)
            table[(which, method)] = (r1, r3)
            print(f"  {which:10s} {method:9s} recall@1 {r1:.3f} recall@3 {r3:.3f} matched {matched}", flush=True)
    targets = {"paraphrase": (0.65, 0.85), "exact": (0.95, None)}
    for which in ("paraphrase", "exact"):
        best_alone = max(table[(which, "words")][0], table[(which, "meaning")][0])
        for method in METHODS:
            r1, r3 = table[(which, method)]
            t1, t3 = targets[which]
            fused = method in ("rrf", "weighted")
            passed = r1 >= t1 and (t3 is None or r3 >= t3) if fused else None
            target = f"recall@1 ≥ {t1}" + (f", recall@3 ≥ {t3}" if t3 else "") if fused else ""
            res.add(metric=f"{which} queries, {LABELS[method]}: recall@1", memoryui=round(r1, 3), unit="share",
                    target=target, passed=passed,
                    note=f"recall@3 {r3:.3f}" + (f"; best single signal's recall@1 {best_alone:.3f}" if fused else ""))
    common.finish(res, args, started)


if __name__ == "__main__":
    sys.exit(main())
