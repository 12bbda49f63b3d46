from django.apps import AppConfig
from django.db.models.signals import post_save

from conversations import metrics, plugins


class ImportsConfig(AppConfig):
    name = "conversations.imports"
    label = "imports"

    def ready(self):
        from . import exports, lookup, uploads
        from .models import ImportSource, ImportStage, SourceEntry

        # First: a deletion takes a conversation from an import still writing it (that import
        # stops at its next transaction) before it deletes the conversation's other rows.
        for model in (ImportStage, ImportSource, SourceEntry):
            plugins.owned_tables.register(model, by=self.label)
        # Previews waiting for their confirmation: pruned when expired, erased with their subject.
        plugins.leftover_files.register(uploads.LEFTOVERS, by=self.label)
        # The formats agents write (openai-chat, anthropic, claude-code, memoryui) are rendered here.
        plugins.agent_exporter.register(exports.chunks, by=self.label)
        # The search box finds a conversation by the id its framework knows it by.
        plugins.find_by_framework_id.register(lookup.find_anywhere, by=self.label)
        post_save.connect(metrics.on_import_source_saved, sender=ImportSource, dispatch_uid="metrics_imports")
