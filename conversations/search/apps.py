from django.apps import AppConfig


class SearchConfig(AppConfig):
    name = "conversations.search"
    label = "search"
    verbose_name = "Full-text search over messages"

    def ready(self):
        from conversations import store

        from . import lineage

        store.fork_copying.connect(lineage.on_fork_copying, dispatch_uid="search.borrow")
