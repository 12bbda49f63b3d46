from django.apps import AppConfig
from django.db.models.signals import post_save

from conversations import metrics, plugins


class FactsConfig(AppConfig):
    name = "conversations.facts"
    label = "facts"

    def ready(self):
        from . import meaning
        from .models import Fact

        post_save.connect(metrics.on_fact_saved, sender=Fact, dispatch_uid="metrics_facts")
        plugins.embedding_jobs.register(meaning.JOB, by=self.label)
