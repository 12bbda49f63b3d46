"""Recall by meaning, measured: recall@1 and recall@3 on the paraphrase set (bench/meaning_set.py).

Set-up: a throwaway memoryui SQLite file; the set's 104 facts over 8 subjects (and the 24
of its `NAMED` part and the 24 of its `IDENTIFIERS` part, over 2 more subjects each) proposed
through the store and approved, then given their vectors by the background embedder's
job (the embedded model); importance 3–8 and, for half of them, a last recall some days ago,
drawn at random (seeded): recency and importance differ as they would in use.

Measured: each fact is asked for once, in a shuffled order, by `recall(subject, query,
limit=3)` as an agent would, so every recall reinforces what it returned (access count,
last access) and later recalls see those changes (the issue's finding: use and recency
drowned relevance). Once with each fact's paraphrase query (no content word shared with
the fact), once with its own words, once with its one most telling word; each `NAMED`
fact with its query (a name shared by several facts, the rest in other words); and each
`IDENTIFIERS` fact with its query (an identifier only it holds, the rest in other words).
Each method runs on the same starting state (each pass inside a transaction that is rolled
back): full text alone, vectors alone, and the three fusions (the lift, the default;
reciprocal rank fusion; a weighted sum). Then all 360 queries pooled: a fusion beats a
signal alone when its pooled recall is higher and no class of query loses to that signal.
"""

import random
import sys
import time
from datetime import timedelta

import common
from meaning_set import IDENTIFIERS, NAMED, SET

METHODS = ("words", "meaning", "lift", "rrf", "weighted")
FUSED = ("lift", "rrf", "weighted")
LABELS = {"words": "full text alone", "meaning": "vectors alone", "lift": "fusion: lift (default)",
          "rrf": "fusion: reciprocal rank", "weighted": "fusion: weighted sum"}


def seed():
    from django.utils import timezone

    from conversations.facts import store
    from conversations.facts.models import Fact

    rng = random.Random(45)
    now = timezone.now()
    facts = {}
    for subject, items in (*SET.items(), *NAMED.items(), *IDENTIFIERS.items()):
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


QUERIES = ("paraphrase", "exact", "keyword", "named", "identifier")
# The subjects each class of query asks about.
PART = {"paraphrase": SET, "exact": SET, "keyword": SET, "named": NAMED, "identifier": IDENTIFIERS}
# The targets for the fusion: (recall@1, recall@3), None where it sets none.
TARGETS = {"paraphrase": (0.65, 0.85), "exact": (0.95, None)}


def evaluate(facts: dict, method: str, which: str) -> tuple[float, float, dict]:
    from django.db import transaction

    from conversations.facts import recall as facts_recall

    order = [item for item in facts.items() if item[0][0] in PART[which]]
    random.Random(7).shuffle(order)
    at1 = at3 = 0
    matched = {"words": 0, "meaning": 0}
    with transaction.atomic():
        for (subject, text), (pk, paraphrase) in order:
            query = {"paraphrase": paraphrase, "exact": text, "keyword": keyword_of(text)}.get(which, paraphrase)
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


def measure(res, facts) -> dict:
    """Every class × method into `res`, then the pooled comparison; returns the table
    {(class, method): (recall@1, recall@3, queries)}."""
    table = {}
    for which in QUERIES:
        for method in METHODS:
            r1, r3, matched = evaluate(facts, method, which)
            n = sum(len(items) for items in PART[which].values())
            table[(which, method)] = (r1, r3, n)
            print(f"  {which:10s} {method:9s} recall@1 {r1:.3f} recall@3 {r3:.3f} matched {matched}", flush=True)
            t1, t3 = TARGETS.get(which, (None, None))
            fused = method in FUSED and t1 is not None
            res.add(metric=f"{which} queries, {LABELS[method]}: recall@1 (recall@3 in note)", memoryui=round(r1, 3),
                    unit="share", passed=(r1 >= t1 and (t3 is None or r3 >= t3)) if fused else None,
                    target=(f"recall@1 ≥ {t1}" + (f", recall@3 ≥ {t3}" if t3 else "")) if fused else "",
                    note=f"recall@3 {r3:.3f}")
    for method in METHODS:
        pooled = [sum(table[(w, method)][k] * table[(w, method)][2] for w in QUERIES)
                  / sum(table[(w, method)][2] for w in QUERIES) for k in (0, 1)]
        table[("all", method)] = (*pooled, sum(table[(w, method)][2] for w in QUERIES))
    for method in METHODS:
        r1, r3, n = table[("all", method)]
        passed = target = None
        if method in FUSED:
            # Beats a signal: a higher pooled recall@1, and no class where it recalls less (@1 or @3).
            beaten = [alone for alone in ("words", "meaning")
                      if r1 > table[("all", alone)][0] and all(
                          table[(w, method)][k] >= table[(w, alone)][k] for w in QUERIES for k in (0, 1))]
            passed, target = len(beaten) == 2, "beats full text and vectors alone"
        res.add(metric=f"all {n} queries, {LABELS[method]}: recall@1 (recall@3 in note)", memoryui=round(r1, 3),
                unit="share", passed=passed, target=target or "", note=f"recall@3 {r3:.3f}")
    return table


def main(argv=None):
    args = common.parse_args(__doc__.splitlines()[0], argv)
    started = time.perf_counter()
    common.setup_django(args.workdir / "meaning.sqlite3")
    facts = seed()
    res = common.Results("22 recall by meaning")
    res.sizes = {"facts": len(facts), "subjects": len(SET) + len(NAMED) + len(IDENTIFIERS), "limit": 3}
    measure(res, facts)
    common.finish(res, args, started)


if __name__ == "__main__":
    sys.exit(main())
