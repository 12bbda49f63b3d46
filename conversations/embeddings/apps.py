from django.apps import AppConfig
from django.db.models.signals import post_migrate


class EmbeddingsConfig(AppConfig):
    name = "conversations.embeddings"
    label = "embeddings"
    verbose_name = "Embeddings: texts as vectors, for recall and search by meaning"

    def ready(self):
        from .models import forget_model_ids

        post_migrate.connect(forget_model_ids, dispatch_uid="embeddings_forget_model_ids")
