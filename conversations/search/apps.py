from django.apps import AppConfig


class SearchConfig(AppConfig):
    name = "conversations.search"
    label = "search"
    verbose_name = "Full-text search over messages"

    def ready(self):
        from conversations import store
        from conversations.embeddings import jobs
        from conversations.owned import register

        from . import lineage, meaning_queue
        from .models import MessageVector

        store.fork_copying.connect(lineage.on_fork_copying, dispatch_uid="search.borrow")
        jobs.register(meaning_queue.JOB)
        # A vector is derived personal data: it goes with its conversation (prune, deletion).
        register(MessageVector)
