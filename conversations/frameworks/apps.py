from django.apps import AppConfig

from conversations import plugins


class FrameworksConfig(AppConfig):
    name = "conversations.frameworks"
    label = "frameworks"
    verbose_name = "What agent frameworks keep beside their sessions"

    def ready(self):
        # A session summary belongs to its session's conversation: pruning, deletion and
        # deletion requests remove it with it. Its data holds the first prompt's text.
        from .models import SessionSummary

        plugins.owned_tables.register(SessionSummary, by=self.label)
