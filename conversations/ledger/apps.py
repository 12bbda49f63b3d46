from django.apps import AppConfig

from conversations import plugins


class LedgerConfig(AppConfig):
    name = "conversations.ledger"
    label = "ledger"
    verbose_name = "Task state, actions ledger and workspace snapshots"

    def ready(self):
        # Rows that belong to a conversation: pruning, deletion and deletion
        # requests remove them with it, and verification samples what their models
        # declare personal (`personal_data`).
        from . import export, reads, store
        from .models import Action, TaskStateEvent, WorkspaceSnapshot

        for model in (TaskStateEvent, Action, WorkspaceSnapshot):
            plugins.owned_tables.register(model, by=self.label)
        # The conversation page shows the ledger: its panel, and its marks between the rows.
        plugins.ledger_panel.register(reads.panel, by=self.label)
        plugins.ledger_timeline.register(reads.with_timeline, by=self.label)
        plugins.ledger_mark.register(reads.live_mark, by=self.label)
        # A fork gets the task state, actions and snapshots as of its fork position, in its transaction.
        plugins.fork_copied.register(store.on_fork_copied, by=self.label)
        # Every JSON, JSONL and Markdown export carries the ledger (the core imports no sub-app).
        plugins.export_sections.register(plugins.ExportSection(
            header=export.conversation_ledger, jsonl=export.conversation_jsonl, markdown=export.conversation_markdown),
            by=self.label)
