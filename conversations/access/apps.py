from django.apps import AppConfig

from conversations import plugins


class AccessConfig(AppConfig):
    name = "conversations.access"
    label = "access"
    verbose_name = "Who opened which conversation"

    def ready(self):
        # Rows about one conversation: pruning, deletion and deletion requests
        # remove them with it.
        from . import store
        from .models import ConversationAccess

        plugins.owned_tables.register(ConversationAccess, by=self.label)
        # The core's pages say when a person opens a conversation; the access log records it.
        plugins.conversation_opened.register(store.on_conversation_opened, by=self.label)
