from django.apps import AppConfig

from conversations import hooks
from conversations.owned import register


class AccessConfig(AppConfig):
    name = "conversations.access"
    label = "access"
    verbose_name = "Who opened which conversation"

    def ready(self):
        # Rows about one conversation: pruning, deletion and deletion requests
        # remove them with it.
        from . import store
        from .models import ConversationAccess

        register(ConversationAccess)
        # The core's pages say when a person opens a conversation; the access log records it.
        hooks.conversation_opened.connect(store.on_conversation_opened, dispatch_uid="access.opened")
