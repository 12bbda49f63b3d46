from django.apps import AppConfig


class EmbeddingsConfig(AppConfig):
    name = "conversations.embeddings"
    label = "embeddings"
    verbose_name = "Embeddings: texts as vectors, for recall and search by meaning"
