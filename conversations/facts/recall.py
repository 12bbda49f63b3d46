"""Recall: the best current facts about a subject for a query (written back as `recalled`
events, in the same transaction), and the candidates for forgetting. The other writes to
facts are in `store.py`.

- min–max normalisation: a component that is equal for every candidate (one
  candidate, no query, equal importance) is 0 for all: it does not distinguish
  them, so it adds nothing.
"""

import heapq
import math
import re
from datetime import datetime, timedelta
from typing import NamedTuple

from django.conf import settings
from django.db import connection, transaction
from django.db.models import F, Q
from django.db.models.expressions import RawSQL
from django.utils import timezone

from conversations import projects
from conversations.errors import InvalidInput

from . import meaning as facts_meaning
from .models import Fact, FactEvent
from .store import clean_datetime, clean_subject

RECALL_LIMIT_MAX = 100


def recall_weights() -> tuple[float, float, float]:
    """(recency, importance, relevance) from MEMORYUI_RECALL_WEIGHTS, default 1 each."""
    weights = settings.MEMORYUI_RECALL_WEIGHTS or {}
    return (
        float(weights.get("recency", 1.0)),
        float(weights.get("importance", 1.0)),
        float(weights.get("relevance", 1.0)),
    )


class ScoreParts(NamedTuple):
    """Each component min–max normalised over the candidates, in [0, 1]: `relevance` is the
    fusion of `words` and `meaning`; `cosine` is the raw similarity (None: no vector)."""

    recency: float
    importance: float
    relevance: float
    words: float = 0.0
    meaning: float = 0.0
    cosine: float | None = None


class Recalled(NamedTuple):
    """One recalled fact: by attribute, or `fact, score, parts, matched = item`."""

    fact: Fact
    score: float
    parts: ScoreParts
    matched: tuple[str, ...] = ()


def normalise(values: list[float]) -> list[float]:
    """Min–max to [0, 1]; all equal (or one value) → all 0: it ranks nothing."""
    if not values:
        return []
    lo, hi = min(values), max(values)
    if hi - lo <= 1e-12:
        return [0.0] * len(values)
    return [(v - lo) / (hi - lo) for v in values]


def recency_of(last_reference: datetime, now: datetime) -> float:
    """0.995 ^ hours since the fact was last recalled (or recorded)."""
    hours = max(0.0, (now - last_reference).total_seconds() / 3600.0)
    return 0.995 ** hours


_WORD = re.compile(r"\w+", re.UNICODE)


def query_terms(query: str) -> list[str]:
    """The words of a free-text query; everything else (quotes, operators) is dropped,
    so no query can be an FTS syntax error."""
    return _WORD.findall(query or "")[:32]


# Words that say nothing of a fact's subject matter ("does she want…"): dropped from the
# full-text side of a query, where they would match every fact that has them.
STOP_WORDS = frozenset(
    "a about an and any are as at be been but by can could did do does for from had has have he her hers him "
    "his how i if in into is it its me my of on or our she should so than that the their them they this to "
    "us was we were what when where which who whom why will with would you your".split())


def content_terms(query: str) -> list[str]:
    """The query's words less the stop words (all of them when it has nothing else)."""
    terms = query_terms(query)
    kept = [t for t in terms if t.casefold() not in STOP_WORDS]
    return kept or terms


def _fts_string(value: str) -> str:
    return '"' + value.replace('"', '""') + '"'


def _fts_match(subject: str, terms: list[str]) -> str:
    """The FTS5 query: this subject's facts (its hex key, as the index holds it)
    holding any of the terms."""
    key = subject.encode().hex().upper()  # what SQLite's hex() gives the index
    return f"subject_key : {_fts_string(key)} AND text : (" + " OR ".join(_fts_string(t) for t in terms) + ")"


def _relevance(subject: str, terms: list[str]) -> dict[int, float]:
    """fact id → full-text rank (higher is better) for this subject's facts matching
    any term (may include a few others; the caller looks up its candidates only).
    Facts that match nothing are absent (rank 0)."""
    if not terms:
        return {}
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            # The subject is indexed too: FTS5 intersects the subject's doclist with
            # the terms' instead of ranking every fact in the store sharing a word.
            match = _fts_match(subject, terms)
            # bm25() is lower-is-better (negative); negated so higher is better. The
            # subject column weighs 0: it is the same for every candidate.
            # No join: SQLite would drive it from facts_fact and run the full-text
            # query once per row. The caller keeps only its candidates' ids, which
            # also drops a subject that merely contains this one's words.
            cursor.execute(
                "SELECT rowid, -bm25(facts_fact_fts, 1.0, 0.0) FROM facts_fact_fts WHERE facts_fact_fts MATCH %s",
                [match],
            )
        else:
            # plainto_tsquery ANDs the words; any-word matching ranks better for recall.
            fence, fenced = projects.sql_fence("f.project_id")
            cursor.execute(
                "WITH q AS (SELECT replace(plainto_tsquery('english', %s)::text, '&', '|')::tsquery AS q) "
                "SELECT f.id, ts_rank(f.text_tsv, q.q) FROM facts_fact f, q "
                f"WHERE f.subject = %s AND f.status = 'approved' AND f.text_tsv @@ q.q{fence}",
                [" ".join(terms), subject, *fenced],
            )
        return {pk: float(rank) for pk, rank in cursor.fetchall()}


def _holders(subject: str, terms: list[str]) -> list[set[int]]:
    """For each distinct term (case folded), the ids of the subject's facts that hold it, as
    the full-text index matches it (stemmed). One statement for all the terms."""
    distinct = list(dict.fromkeys(t.casefold() for t in terms))
    if not distinct:
        return []
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute(
                " UNION ALL ".join(f"SELECT {i}, rowid FROM facts_fact_fts WHERE facts_fact_fts MATCH %s"
                                   for i in range(len(distinct))),
                [_fts_match(subject, [t]) for t in distinct],
            )
        else:
            fence, fenced = projects.sql_fence("f.project_id")
            cursor.execute(
                "SELECT t.i - 1, f.id FROM unnest(%s::text[]) WITH ORDINALITY AS t(term, i) "
                "JOIN facts_fact f ON f.text_tsv @@ plainto_tsquery('english', t.term) "
                f"WHERE f.subject = %s AND f.status = 'approved'{fence}",
                [distinct, subject, *fenced],
            )
        holders = [set() for _ in distinct]
        for i, pk in cursor.fetchall():
            holders[i].add(pk)
    return holders


def _rarity_of_shared_words(subject: str, terms: list[str], ids: list[int]) -> dict[int, float]:
    """candidate id → the summed rarity of the query's words it holds, a word's rarity being
    ln((N + 1) / (holders + 0.5)) over the N candidates: a word one fact of twelve holds
    weighs 2.2, one that all hold 0.04. Candidates holding none are absent."""
    candidates = set(ids)
    out: dict[int, float] = {}
    for holders in _holders(subject, terms):
        holders &= candidates
        if holders:
            rarity = math.log((len(candidates) + 1) / (len(holders) + 0.5))
            for pk in holders:
                out[pk] = out.get(pk, 0.0) + rarity
    return out


def rank_by_words(subject: str, text: str) -> dict[int, float]:
    """fact id → full-text rank for the subject's facts sharing words with `text`
    (the review queue's duplicate check). Reads only; may include facts that are
    not current, which the caller filters out."""
    return _relevance(subject, query_terms(text))


def _hours_since_last_reference(now: datetime) -> RawSQL:
    """Hours from the last access (or the recording) to `now`, computed by the
    database: a float per row instead of two datetimes to convert in Python."""
    param = connection.ops.adapt_datetimefield_value(now)
    if connection.vendor == "sqlite":
        return RawSQL("(julianday(%s) - julianday(COALESCE(last_accessed_at, recorded_at))) * 24.0", [param])
    return RawSQL("EXTRACT(EPOCH FROM (%s::timestamptz - COALESCE(last_accessed_at, recorded_at))) / 3600.0",
                  [param])


# How the two relevance signals are fused (MEMORYUI_RECALL_FUSION):
# - "lift" (the default): the meaning's rank, lifted by the query's words each fact holds,
#   each word weighing by how rare it is among the subject's current facts:
#       (meaning + FLOOR) × (1 + LIFT × Σ ln((N + 1) / (holders + 0.5)))
#   A product, not a sum: facts that hold the same words (four facts naming "Marco") keep the
#   order their meaning gives them, where a sum compressed their gaps until recency flipped
#   them; a word only one fact holds (ticket 48217 among its neighbours 48216 and 48218, which
#   a static model's vectors barely tell apart) lifts that fact past them.
# - "weighted": 0.4 · full-text rank + 0.6 · meaning, each min–max normalised.
# - "rrf": reciprocal rank fusion of the two rankings.
# bench/meaning_eval.py measures each against full text and vectors alone; the lift is the one
# that loses no query class to vectors and gains the identifiers (docs/BENCHMARKS.md, workload 22).
FUSIONS = ("lift", "rrf", "weighted")
# One signal alone, for measuring the fusion against each (bench/meaning_eval.py).
SINGLE = ("words", "meaning")
# Reciprocal rank fusion's constant (Cormack et al. use 60; a subject has few facts, and a
# smaller k lets the first ranks count for more).
RRF_K = 5
# The weighted fusion: meaning's share (words get the rest).
MEANING_WEIGHT = 0.6
# The lift per unit of a shared word's rarity. Workload 22 gives the same recall for every
# value from 0.3 to 1.2; this is the middle of that range, not a value tuned to one query.
LIFT = 0.5
# A fact with a query but no relevance at all still ranks, below every relevant one:
# score = (relevance + FLOOR) × recency factor × importance factor.
FLOOR = 0.01
# How far recency and importance may each lower a relevant fact's score: a factor from
# 1 − SWAY (the oldest, least important candidate) to 1.
SWAY = 0.1
# A cosine at or above this, among the best few, is reported as a match by meaning.
MEANING_MATCH = 0.3
MEANING_MATCH_RANK = 3


def _ranks(scores: dict[int, float]) -> dict[int, int]:
    """id → 1-based rank, best (highest) first; ties go to the newer (higher) id."""
    ordered = sorted(scores, key=lambda pk: (-scores[pk], -pk))
    return {pk: i + 1 for i, pk in enumerate(ordered)}


def fuse(ids: list[int], words: dict[int, float], meaning: dict[int, float], method: str) -> list[float]:
    """One relevance per candidate from the full-text scores (`words`: matching facts only;
    for "lift" the rarity of the words each holds, else the database's rank) and the cosines
    (`meaning`: facts with a vector), before normalisation."""
    if method == "words":
        return [words.get(pk, 0.0) for pk in ids]
    if method == "meaning":
        return [meaning.get(pk, -1.0) for pk in ids]
    if method in ("lift", "weighted"):
        m = normalise([meaning.get(pk, 0.0) if pk in meaning else min(meaning.values(), default=0.0) for pk in ids])
        if method == "lift":
            return [(b + FLOOR) * (1.0 + LIFT * words.get(pk, 0.0)) for pk, b in zip(ids, m, strict=True)]
        w = normalise([words.get(pk, 0.0) for pk in ids])
        return [(1 - MEANING_WEIGHT) * a + MEANING_WEIGHT * b for a, b in zip(w, m, strict=True)]
    word_ranks, meaning_ranks = _ranks(words), _ranks(meaning)
    return [(1.0 / (RRF_K + word_ranks[pk]) if pk in word_ranks else 0.0)
            + (1.0 / (RRF_K + meaning_ranks[pk]) if pk in meaning_ranks else 0.0) for pk in ids]


def _fusion() -> str:
    method = settings.MEMORYUI_RECALL_FUSION
    return method if method in FUSIONS else "lift"


def _best(subject, query, terms, now, limit, weights, fusion=None):
    """The winners as (score, id, parts, matched), best first; ties go to the newer fact."""
    w_r, w_i, w_v = weights
    rows = list(
        Fact.objects.recallable(now).about(subject)
        .annotate(hours=_hours_since_last_reference(now))
        .values_list("id", "importance", "hours", "text", "vector__vector", "vector__model_id")
    )
    if not rows:
        return []
    ids = [r[0] for r in rows]
    recency = normalise([0.995 ** max(0.0, float(r[2])) for r in rows])
    importance = normalise([r[1] / 10.0 for r in rows])
    fusion = fusion or _fusion()
    if fusion == "lift":
        words = _rarity_of_shared_words(subject, terms, ids)
    else:
        words = {pk: rank for pk, rank in _relevance(subject, terms).items() if rank > 0}
        words = {pk: words[pk] for pk in ids if pk in words}
    meaning = {}
    if query.strip():
        meaning = facts_meaning.similarities(facts_meaning.of_text(query), [(r[0], *r[3:]) for r in rows])
    if words or meaning:
        relevance = normalise(fuse(ids, words, meaning, fusion))
        w_words, w_meaning = normalise([words.get(pk, 0.0) for pk in ids]), normalise(
            [meaning.get(pk, 0.0) for pk in ids])
        low = 1.0 - SWAY
        scores = [w_v * (relevance[i] + FLOOR) * (low + SWAY * recency[i]) ** w_r
                  * (low + SWAY * importance[i]) ** w_i for i in range(len(ids))]
    else:
        # No query (or nothing to rank it by): the most recent and important first.
        relevance = w_words = w_meaning = [0.0] * len(ids)
        scores = [w_r * recency[i] + w_i * importance[i] for i in range(len(ids))]
    meaning_top = set(sorted(meaning, key=lambda pk: -meaning[pk])[:MEANING_MATCH_RANK])
    best = heapq.nlargest(limit, range(len(ids)), key=lambda i: (scores[i], ids[i]))
    out = []
    for i in best:
        pk = ids[i]
        matched = (["words"] if pk in words else []) + (
            ["meaning"] if pk in meaning_top and meaning[pk] >= MEANING_MATCH else [])
        out.append((scores[i], pk, ScoreParts(recency[i], importance[i], relevance[i], w_words[i], w_meaning[i],
                                              meaning.get(pk)), tuple(matched)))
    return out


def recall(*, subject, query: str = "", limit: int = 10, now: datetime | None = None,
           actor: str = "system", fusion: str | None = None) -> list[Recalled]:
    """The best `limit` facts an agent may use about `subject`, best first.

    Candidates: approved, valid now (valid_from <= now < invalid_at), not expired,
    not superseded, in the current project. Two signals say how well each answers
    `query`: its words (which of the query's words it holds, as the full-text index matches
    them, or for the weighted and rrf fusions the index's rank: SQLite FTS5 bm25, negated;
    PostgreSQL ts_rank) and its meaning (the cosine between the query's vector and the
    fact's, conversations/facts/meaning.py). They are fused into one relevance (by default
    the normalised cosine lifted by the rarity of the query's words the fact holds, see LIFT;
    MEMORYUI_RECALL_FUSION = weighted or rrf for the others), min–max normalised over the
    candidates, and

        score = w_v · (relevance + 0.01) · (0.9 + 0.1·recency)^w_r · (0.9 + 0.1·importance)^w_i

    where recency = 0.995^hours since last access (or since recorded) and importance =
    importance/10, each min–max normalised over the candidates; weights from
    MEMORYUI_RECALL_WEIGHTS (default 1 each). Recency and importance each lower a fact's
    relevance by a tenth at most (SWAY): a fact recalled a minute ago does not outrank the
    one the query is about, which the former sum of the three let it do. Without a query: w_r·recency + w_i·importance.

    Returns a list of `Recalled(fact, score, parts, matched)` where `parts` is
    `ScoreParts(recency, importance, relevance, words, meaning, cosine)`, the normalised
    components (and the raw cosine, None without a vector), and `matched` names the
    signals that found it ("words", "meaning"). Recall reinforces: each returned fact gets
    access_count + 1, last_accessed_at = now and a `recalled` event, in the same
    transaction.
    """
    subject = clean_subject(subject)
    if query is None:
        query = ""
    if not isinstance(query, str):
        raise InvalidInput("query must be a string", field="query")
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= RECALL_LIMIT_MAX:
        raise InvalidInput(f"limit must be a whole number from 1 to {RECALL_LIMIT_MAX}", field="limit")
    if fusion is not None and fusion not in FUSIONS + SINGLE:
        raise InvalidInput(f"fusion must be one of {', '.join(FUSIONS + SINGLE)}", field="fusion")
    now = clean_datetime(now, field="now", default=timezone.now())
    weights = recall_weights()
    with transaction.atomic():
        scored = _best(subject, query, content_terms(query), now, limit, weights, fusion)
        if not scored:
            return []
        top = [pk for _, pk, _, _ in scored]
        Fact.objects.filter(pk__in=top).update(access_count=F("access_count") + 1, last_accessed_at=now)
        FactEvent.objects.bulk_create(
            FactEvent(fact_id=pk, kind="recalled", at=now, actor=str(actor)[:200],
                      detail={"score": round(score, 6), "matched": list(matched)})
            for score, pk, _, matched in scored
        )
        facts = {f.pk: f for f in Fact.objects.filter(pk__in=top)}
    return [Recalled(facts[pk], score, parts, matched) for score, pk, parts, matched in scored]


# ---------------------------------------------------------------- forgetting


def retention_of(fact: Fact, now: datetime) -> float:
    """MemoryBank's R = exp(−t / S): t in days since last access (or recorded),
    S = 1 + access count, capped at MEMORYUI_FACT_STRENGTH_CAP."""
    t = max(0.0, (now - (fact.last_accessed_at or fact.recorded_at)).total_seconds() / 86400.0)
    strength = min(1 + fact.access_count, float(settings.MEMORYUI_FACT_STRENGTH_CAP))
    return math.exp(-t / strength)


def forgetting_candidates(*, now=None, limit: int = 200) -> list[tuple[Fact, float]]:
    """Current approved facts whose retention fell under MEMORYUI_FORGET_THRESHOLD,
    weakest first. Read only: a person decides (invalidate or keep)."""
    now = now or timezone.now()
    threshold = settings.MEMORYUI_FORGET_THRESHOLD
    # With S >= 1, R < threshold needs at least t > −ln(threshold) days: skip the
    # recently used in SQL and compute R only for the rest.
    min_days = -math.log(threshold) if 0 < threshold < 1 else 0.0
    cutoff = now - timedelta(days=min_days)
    qs = Fact.objects.recallable(now).filter(
        Q(last_accessed_at__lte=cutoff) | Q(last_accessed_at__isnull=True, recorded_at__lte=cutoff)
    )
    found = []
    for fact in qs.iterator(chunk_size=2000):
        r = retention_of(fact, now)
        if r < threshold:
            found.append((fact, r))
    found.sort(key=lambda fr: (fr[1], fr[0].pk))
    return found[:limit]
