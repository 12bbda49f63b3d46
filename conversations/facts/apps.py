from django.apps import AppConfig
from django.db.models.signals import post_save

from conversations import metrics


class FactsConfig(AppConfig):
    name = "conversations.facts"
    label = "facts"

    def ready(self):
        from conversations.embeddings import jobs

        from . import meaning
        from .models import Fact

        post_save.connect(metrics.on_fact_saved, sender=Fact, dispatch_uid="metrics_facts")
        jobs.register(meaning.JOB)
