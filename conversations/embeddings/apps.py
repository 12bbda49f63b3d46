from django.apps import AppConfig
from django.db.models.signals import post_migrate


def _forget_model_ids(**kwargs):
    # A database flushed or migrated anew (a test's teardown, a restore) may no longer hold the
    # catalogue rows this process remembered.
    from .models import _known

    _known.clear()


class EmbeddingsConfig(AppConfig):
    name = "conversations.embeddings"
    label = "embeddings"
    verbose_name = "Embeddings: texts as vectors, for recall and search by meaning"

    def ready(self):
        post_migrate.connect(_forget_model_ids, dispatch_uid="embeddings_forget_model_ids")
