from django.apps import AppConfig
from django.db.backends.signals import connection_created
from django.db.models.signals import post_save

from . import metrics
from .files import restrict_sqlite_files
from .owned import register


class ConversationsConfig(AppConfig):
    name = "conversations"
    verbose_name = "Conversations"

    def ready(self):
        connection_created.connect(restrict_sqlite_files, dispatch_uid="memoryui.restrict_sqlite_files")
        from . import deploy_checks  # noqa: F401  (registers memoryui's own `check --deploy` checks)
        from .models import Conversation, IdempotencyKey, UsageTotal

        # A key's stored answer can hold a conversation's title or subject: it goes with the conversation.
        register(IdempotencyKey)
        # Derived counts (no text), gone with their conversation.
        register(UsageTotal)
        post_save.connect(metrics.on_conversation_saved, sender=Conversation, dispatch_uid="metrics_conversations")
