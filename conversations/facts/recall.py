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
    """Each component min–max normalised over the candidates, in [0, 1]."""

    recency: float
    importance: float
    relevance: float


class Recalled(NamedTuple):
    """One recalled fact: `fact, score, parts = item` or by attribute."""

    fact: Fact
    score: float
    parts: ScoreParts


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


def _best_in_python(subject, terms, now, limit, weights) -> list[tuple[float, int, ScoreParts]]:
    """The winners as (score, id, parts), best first; ties go to the newer fact."""
    w_r, w_i, w_v = weights
    rows = list(
        Fact.objects.recallable(now).about(subject)
        .annotate(hours=_hours_since_last_reference(now))
        .values_list("id", "importance", "hours")
    )
    if not rows:
        return []
    ranks = _relevance(subject, terms)
    ids = [r[0] for r in rows]
    recency = normalise([0.995 ** max(0.0, float(r[2])) for r in rows])
    importance = normalise([r[1] / 10.0 for r in rows])
    relevance = normalise([ranks.get(pk, 0.0) for pk in ids])
    scores = [w_r * recency[i] + w_i * importance[i] + w_v * relevance[i] for i in range(len(ids))]
    # Only the winners get their parts built.
    best = heapq.nlargest(limit, range(len(ids)), key=lambda i: (scores[i], ids[i]))
    return [(scores[i], ids[i], ScoreParts(recency[i], importance[i], relevance[i])) for i in best]


# The same score as _best_in_python, in one statement: on SQLite, fetching the
# subject's candidates into Python and scoring them there cost more than the rest
# of a recall. Min–max normalisation is a window over the candidates; a component
# equal for all of them (within 1e-12) is 0, as in normalise().
_SQLITE_BEST = """
WITH cand AS (
    SELECT id, importance / 10.0 AS imp,
           pow(0.995, max(0.0, (julianday(%s) - julianday(COALESCE(last_accessed_at, recorded_at))) * 24.0)) AS rec
    FROM facts_fact
    WHERE subject = %s AND status = 'approved' AND superseded_by_id IS NULL AND valid_from <= %s
      AND (invalid_at IS NULL OR invalid_at > %s) AND (expires_at IS NULL OR expires_at > %s){fence}
),
ranked AS MATERIALIZED ({ranks}),
parts AS (
    SELECT cand.id, cand.rec, cand.imp, COALESCE(ranked.rank, 0.0) AS rel
    FROM cand LEFT JOIN ranked ON ranked.id = cand.id
),
spread AS (
    SELECT id, rec, imp, rel,
           min(rec) OVER () AS rec_lo, max(rec) OVER () AS rec_hi,
           min(imp) OVER () AS imp_lo, max(imp) OVER () AS imp_hi,
           min(rel) OVER () AS rel_lo, max(rel) OVER () AS rel_hi
    FROM parts
),
norm AS (
    SELECT id,
           CASE WHEN rec_hi - rec_lo <= 1e-12 THEN 0.0 ELSE (rec - rec_lo) / (rec_hi - rec_lo) END AS n_rec,
           CASE WHEN imp_hi - imp_lo <= 1e-12 THEN 0.0 ELSE (imp - imp_lo) / (imp_hi - imp_lo) END AS n_imp,
           CASE WHEN rel_hi - rel_lo <= 1e-12 THEN 0.0 ELSE (rel - rel_lo) / (rel_hi - rel_lo) END AS n_rel
    FROM spread
)
SELECT id, n_rec, n_imp, n_rel, %s * n_rec + %s * n_imp + %s * n_rel AS score
FROM norm ORDER BY score DESC, id DESC LIMIT %s
"""
_NO_RANKS = "SELECT NULL AS id, NULL AS rank WHERE 0"
_FTS_RANKS = ("SELECT rowid AS id, -bm25(facts_fact_fts, 1.0, 0.0) AS rank FROM facts_fact_fts"
              " WHERE facts_fact_fts MATCH %s")


def _best_sqlite(subject, terms, now, limit, weights) -> list[tuple[float, int, ScoreParts]]:
    at = connection.ops.adapt_datetimefield_value(now)
    # The current project's facts only (the recall index leads with the project).
    fence, fenced = projects.sql_fence("project_id")
    args = [at, subject, at, at, at, *fenced]
    if terms:
        ranks = _FTS_RANKS
        args.append(_fts_match(subject, terms))
    else:
        ranks = _NO_RANKS
    args += [*weights, limit]
    with connection.cursor() as cursor:
        cursor.execute(_SQLITE_BEST.format(ranks=ranks, fence=fence), args)
        return [(score, pk, ScoreParts(rec, imp, rel)) for pk, rec, imp, rel, score in cursor.fetchall()]


def recall(*, subject, query: str = "", limit: int = 10, now: datetime | None = None,
           actor: str = "system") -> list[Recalled]:
    """The best `limit` facts an agent may use about `subject`, best first.

    Candidates: approved, valid now (valid_from <= now < invalid_at), not expired,
    not superseded. score = w_r·recency + w_i·importance + w_v·relevance, where
    recency = 0.995^hours since last access (or since recorded), importance =
    importance/10, relevance = the database's full-text rank against `query`
    (SQLite FTS5 bm25, negated; PostgreSQL ts_rank), each min–max normalised over
    the candidates; weights from MEMORYUI_RECALL_WEIGHTS (default 1 each).

    Returns a list of `Recalled(fact, score, parts)` where `parts` is
    `ScoreParts(recency, importance, relevance)`, the normalised components.
    Recall reinforces: each returned fact gets access_count + 1,
    last_accessed_at = now and a `recalled` event, in the same transaction.
    """
    subject = clean_subject(subject)
    if query is None:
        query = ""
    if not isinstance(query, str):
        raise InvalidInput("query must be a string", field="query")
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= RECALL_LIMIT_MAX:
        raise InvalidInput(f"limit must be a whole number from 1 to {RECALL_LIMIT_MAX}", field="limit")
    now = clean_datetime(now, field="now", default=timezone.now())
    w_r, w_i, w_v = recall_weights()
    with transaction.atomic():
        if connection.vendor == "sqlite":
            scored = _best_sqlite(subject, query_terms(query), now, limit, (w_r, w_i, w_v))
        else:
            scored = _best_in_python(subject, query_terms(query), now, limit, (w_r, w_i, w_v))
        if not scored:
            return []
        top = [pk for _, pk, _ in scored]
        Fact.objects.filter(pk__in=top).update(access_count=F("access_count") + 1, last_accessed_at=now)
        FactEvent.objects.bulk_create(
            FactEvent(fact_id=pk, kind="recalled", at=now, actor=str(actor)[:200],
                      detail={"score": round(score, 6)})
            for score, pk, _ in scored
        )
        facts = {f.pk: f for f in Fact.objects.filter(pk__in=top)}
    return [Recalled(facts[pk], score, parts) for score, pk, parts in scored]


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
