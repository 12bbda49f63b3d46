"""Facts as vectors: queued with the proposal, compared by recall and the review queue.

A proposal does not wait for its vector. The fact row itself is the queue entry: once the
proposal commits, this process's background embedder (conversations/embeddings/worker.py)
is woken and gives every fact without a vector its vector, a batch per transaction, so
none is ever lost (a crash leaves the row waiting; `manage.py embed` does the same work).
The same job writes again every vector a former model made. Until a fact's vector is
stored, recall and the review queue embed its text themselves for the one comparison
(`similarities`), so a fact approved a moment after its proposal is already found by
meaning; they never store what they embed (a read writes nothing).

Why not in the proposal's transaction: embedding one text on a request's path costs more
than the text (the tokenizer and the model's tables are cold again after the commit's
fsync), about a third of a proposal; a batch in the background costs a fraction of that.
"""

import logging

import numpy as np
from django.db import connection, transaction
from django.db.models import Q

from conversations import plugins, projects
from conversations.embeddings import embedders, worker
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
        log.warning("embedding failed; meaning is left out of this comparison: %s", exc)
        return Meaning(None, None)
    return Meaning(model_id(embedder.name, int(vector.shape[0])), vector)


def queue() -> None:
    """A fact waits for its vector: wake the background embedder once the caller's
    transaction commits (nothing to wake when this process runs none)."""
    transaction.on_commit(worker.wake)


# At most this many waiting texts are embedded by one comparison; beyond them (a change of
# model leaves every vector stale) facts are left out of meaning until the background
# embedder reaches them, so a recall never turns into a re-embedding of the subject.
FILL_LIMIT = 64


def similarities(query: Meaning, rows) -> dict[int, float]:
    """fact id → cosine with the query for (id, text, vector bytes, model id) rows.

    A stored vector counts only when the query's model made it. A fact whose vector waits
    (just proposed) or is stale (a former model's) is embedded here, for this comparison
    only, up to FILL_LIMIT of them; when the embedder fails they are absent."""
    if query.vector is None:
        return {}
    dimension = query.vector.shape[0]
    ids, blobs, waiting = [], [], []
    for pk, text, blob, model in rows:
        if blob is not None and model == query.model_id and len(blob) == dimension * 4:
            ids.append(pk)
            blobs.append(blob)
        elif len(waiting) < FILL_LIMIT:
            waiting.append((pk, text))
    matrix = vec.matrix(blobs, dimension)
    if waiting:
        try:
            found = embedders.active().embed([text for _, text in waiting])
        except embedders.EmbeddingFailed as exc:
            log.warning("%d facts waiting for their vectors are left out of meaning: %s", len(waiting), exc)
        else:
            if found.shape[1] == dimension:
                ids += [pk for pk, _ in waiting]
                matrix = np.vstack([matrix, found])
    if not ids:
        return {}
    scores = matrix @ query.vector
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


JOB = plugins.EmbeddingJob(name="facts", label="Facts", counts=_counts, run=_run)
