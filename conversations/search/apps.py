from django.apps import AppConfig

from conversations import plugins


class SearchConfig(AppConfig):
    name = "conversations.search"
    label = "search"
    verbose_name = "Full-text search over messages"

    def ready(self):
        from . import lineage, meaning_queue
        from .models import MessageVector

        plugins.fork_copying.register(lineage.on_fork_copying, by=self.label)
        plugins.embedding_jobs.register(meaning_queue.JOB, by=self.label)
        # A vector is derived personal data: it goes with its conversation (prune, deletion).
        plugins.owned_tables.register(MessageVector, by=self.label)
