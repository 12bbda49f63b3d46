from django.apps import AppConfig
from django.db.backends.signals import connection_created
from django.db.models.signals import post_save

from . import metrics, plugins
from .files import restrict_sqlite_files


class ConversationsConfig(AppConfig):
    name = "conversations"
    verbose_name = "Conversations"

    def ready(self):
        connection_created.connect(restrict_sqlite_files, dispatch_uid="memoryui.restrict_sqlite_files")
        from . import deploy_checks  # noqa: F401  (registers memoryui's own `check --deploy` checks)
        from .models import Conversation, IdempotencyKey, UsageTotal

        # A key's stored answer can hold a conversation's title or subject: it goes with the conversation.
        plugins.owned_tables.register(IdempotencyKey, by=self.label)
        # Derived counts (no text), gone with their conversation.
        plugins.owned_tables.register(UsageTotal, by=self.label)
        post_save.connect(metrics.on_conversation_saved, sender=Conversation, dispatch_uid="metrics_conversations")
