from django.apps import AppConfig

from conversations import hooks
from conversations.owned import register


class LedgerConfig(AppConfig):
    name = "conversations.ledger"
    label = "ledger"
    verbose_name = "Task state, actions ledger and workspace snapshots"

    def ready(self):
        # Rows that belong to a conversation: pruning, deletion and deletion
        # requests remove them with it, and verification samples what their models
        # declare personal (`personal_data`).
        from conversations import export as core_export

        from . import export, reads, store
        from .models import Action, TaskStateEvent, WorkspaceSnapshot

        register(TaskStateEvent)
        register(Action)
        register(WorkspaceSnapshot)
        # The conversation page shows the ledger: its panel, and its marks between the rows.
        hooks.ledger_panel.register(reads.panel)
        hooks.ledger_timeline.register(reads.with_timeline)
        hooks.ledger_mark.register(reads.live_mark)
        # A fork gets the task state, actions and snapshots as of its fork position, in its transaction.
        hooks.fork_copied.connect(store.on_fork_copied, dispatch_uid="ledger.copy_into_fork")
        # Every JSON, JSONL and Markdown export carries the ledger (the core imports no sub-app).
        core_export.register_section(core_export.ExportSection(
            header=export.conversation_ledger, jsonl=export.conversation_jsonl, markdown=export.conversation_markdown))
