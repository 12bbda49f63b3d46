from django.apps import AppConfig

from conversations import hooks


class RetentionConfig(AppConfig):
    name = "conversations.retention"
    label = "retention"

    def ready(self):
        from . import erasure

        # The API's DELETE of a conversation takes the deletion request's path (text gone, verified, a receipt).
        hooks.delete_conversation.register(erasure.delete_one_conversation)
