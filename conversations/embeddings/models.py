"""The models that made the stored vectors: a name and a dimension each.

Every stored vector (a fact's, a message's) points at one of these rows, so the model's
name and the vector's dimension go with every vector in two bytes rather than in a string
repeated a million times. A vector whose model is not the active embedder's is stale: it
is embedded again in the background (worker.py). This catalogue holds no project's data
(model names only), so it is the server's, like the list of projects itself.
"""

from django.db import IntegrityError, connection, models, transaction

from conversations.personal import PersonalData


class EmbeddingModel(models.Model):
    id = models.SmallAutoField(primary_key=True)
    name = models.CharField(max_length=200, unique=True)
    dimension = models.IntegerField()
    first_used_at = models.DateTimeField(auto_now_add=True)

    personal_data = PersonalData(not_personal=("name",))

    class Meta:
        constraints = [models.CheckConstraint(condition=models.Q(dimension__gt=0), name="embedding_dimension_positive")]

    def __str__(self):
        return f"{self.name} ({self.dimension} dimensions)"


# (name, dimension) → catalogue id, per process and database, filled only once the row is
# committed (transaction.on_commit): a row a rolled-back transaction made is never remembered.
# Catalogue rows are never deleted, so a remembered id stays right.
_known: dict[tuple[str, str, int], int] = {}


def model_id(name: str, dimension: int) -> int:
    """The catalogue id of (name, dimension), added on first use. A model that changes its
    dimension under one name is a new row (its name gets the dimension appended)."""
    key = (connection.alias + ":" + str(connection.settings_dict.get("NAME")), name, dimension)
    found = _known.get(key)
    if found is not None:
        return found
    stored = name
    known = EmbeddingModel.objects.filter(name=name).values_list("dimension", flat=True).first()
    if known is not None and known != dimension:
        stored = f"{name}@{dimension}"
    row = EmbeddingModel.objects.filter(name=stored).first()
    if row is None:
        try:
            with transaction.atomic():
                row = EmbeddingModel.objects.create(name=stored, dimension=dimension)
        except IntegrityError:
            row = EmbeddingModel.objects.get(name=stored)
    transaction.on_commit(lambda pk=row.pk: _known.__setitem__(key, pk))
    return row.pk


def forget_model_ids(**kwargs) -> None:
    """Forget every remembered id (post_migrate): a database flushed or migrated anew (a test's
    teardown, a restore) may no longer hold the catalogue rows this process remembered."""
    _known.clear()
