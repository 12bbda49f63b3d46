from django.apps import AppConfig

from conversations.owned import register


class LedgerConfig(AppConfig):
    name = "conversations.ledger"
    label = "ledger"
    verbose_name = "Task state, actions ledger and workspace snapshots"

    def ready(self):
        # Rows that belong to a conversation: pruning, deletion and deletion
        # requests remove them with it, and verification samples their text.
        from .models import Action, TaskStateEvent, WorkspaceSnapshot

        register(TaskStateEvent, text_fields=("state", "changes"))
        register(Action, text_fields=("arguments", "result", "idempotency_key"))
        register(WorkspaceSnapshot, text_fields=("repo",))
