"""Facts as vectors: written with the proposal, compared by recall and the review queue.

A fact's vector is computed before its proposal's transaction (the embedder needs no
database) and inserted inside it, so a proposal and its vector commit together. When the
embedder fails (an endpoint that is down), the proposal still commits, without a vector:
the fact row itself is then the queue entry, and the background embedder
(conversations/embeddings/worker.py) gives every fact without a vector its vector, so none
is ever lost. The same job writes again every vector a former model made.
"""

import logging

import numpy as np
from django.db import connection, transaction
from django.db.models import Q

from conversations import projects
from conversations.embeddings import embedders, jobs
from conversations.embeddings import vectors as vec
from conversations.embeddings.models import model_id

from .models import ERASING, Fact, FactVector

log = logging.getLogger("memoryui.facts")


class Meaning:
    """A text's vector and the model id that made it (None: the embedder failed)."""

    __slots__ = ("model_id", "vector")

    def __init__(self, model_id_: int | None, vector: np.ndarray | None):
        self.model_id, self.vector = model_id_, vector


def of_text(text: str) -> Meaning:
    """The vector of one text by the active embedder; an empty Meaning when it fails."""
    embedder = embedders.active()
    try:
        vector = embedder.embed([text])[0]
    except embedders.EmbeddingFailed as exc:
        log.warning("a fact was stored without its vector (the background embedder will add it): %s", exc)
        return Meaning(None, None)
    return Meaning(model_id(embedder.name, int(vector.shape[0])), vector)


def save(fact: Fact, meaning: Meaning) -> None:
    """Insert the fact's vector, in the caller's transaction (nothing when there is none)."""
    if meaning.vector is not None:
        # One statement, not the ORM's create (which cost a proposal a third of its time).
        with connection.cursor() as cursor:
            cursor.execute(f"INSERT INTO {FactVector._meta.db_table} (fact_id, model_id, vector) VALUES (%s, %s, %s)",
                           [fact.pk, meaning.model_id, vec.to_bytes(meaning.vector)])


def similarities(query: np.ndarray, rows) -> dict[int, float]:
    """fact id → cosine with `query` for (id, vector bytes) rows; rows without a vector, or
    of another dimension (a model changed, not yet embedded again), are absent."""
    dimension = query.shape[0]
    ids, blobs = [], []
    for pk, blob in rows:
        if blob is not None and len(blob) == dimension * 4:
            ids.append(pk)
            blobs.append(blob)
    if not ids:
        return {}
    scores = vec.matrix(blobs, dimension) @ query
    return dict(zip(ids, scores.tolist(), strict=True))


# ---------------------------------------------------------------- the background job


def _counts(current: int) -> dict:
    facts = Fact.everywhere.exclude(status=ERASING)
    with_vector = FactVector.objects.filter(fact__in=facts)
    now = with_vector.filter(model_id=current).count()
    return {"current": now, "stale": with_vector.count() - now,
            "waiting": facts.filter(vector__isnull=True).count()}


def _run(embedder, current: int, limit: int) -> int:
    """Embed up to `limit` facts without a vector or with a stale one, in one transaction."""
    todo = list(Fact.everywhere.exclude(status=ERASING)
                .filter(Q(vector__isnull=True) | ~Q(vector__model_id=current))
                .order_by("id").values_list("id", "text")[:limit])
    if not todo:
        return 0
    found = embedder.embed([text for _, text in todo])
    with transaction.atomic():
        # Only facts that still exist and are not being erased (erasure may have run meanwhile).
        alive = set(Fact.everywhere.filter(pk__in=[pk for pk, _ in todo]).exclude(status=ERASING)
                    .values_list("id", flat=True))
        FactVector.objects.filter(fact_id__in=alive).delete()
        FactVector.objects.bulk_create(
            FactVector(fact_id=pk, model_id=current, vector=vec.to_bytes(v))
            for (pk, _), v in zip(todo, found, strict=True) if pk in alive)
    return len(todo)


def sample_vectors(subject_norm: str, count: int) -> list[bytes]:
    """A few of the subject's fact vectors as stored, for erasure's search of the files."""
    # Fact.objects is the current project's: another project's vectors are not this request's.
    rows = (FactVector.objects.filter(fact__in=Fact.objects.filter(subject_norm=subject_norm)).order_by("fact_id")
            .values_list("vector", flat=True)[:count])
    return [bytes(v)[:32] for v in rows]


def erase_vectors(subject_norm: str) -> int:
    """Delete the vectors of the subject's facts (marked `erasing`) in the request's project
    (every project's for a request filed for all); the caller's transaction."""
    fence, fenced = projects.sql_fence("project_id")
    with connection.cursor() as cursor:
        cursor.execute(
            f"DELETE FROM {FactVector._meta.db_table} WHERE fact_id IN "
            f"(SELECT id FROM {Fact._meta.db_table} WHERE subject_norm = %s AND status = %s{fence})",
            [subject_norm, ERASING, *fenced])
        return cursor.rowcount


JOB = jobs.Job(name="facts", label="Facts", counts=_counts, run=_run)
