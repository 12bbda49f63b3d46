from django.apps import AppConfig
from django.db.models.signals import post_save

from conversations import metrics
from conversations.owned import register


class ImportsConfig(AppConfig):
    name = "conversations.imports"
    label = "imports"

    def ready(self):
        from conversations import export, hooks
        from conversations.retention import leftovers

        from . import exports, lookup, uploads
        from .models import ImportSource, ImportStage, SourceEntry

        # First: a deletion takes a conversation from an import still writing it (that import
        # stops at its next transaction) before it deletes the conversation's other rows.
        register(ImportStage)
        register(ImportSource)
        register(SourceEntry)
        # Previews waiting for their confirmation: pruned when expired, erased with their subject.
        leftovers.register(uploads.LEFTOVERS)
        # The formats agents write (openai-chat, anthropic, claude-code, memoryui) are rendered here.
        export.register_agent_exporter(exports.chunks)
        # The search box finds a conversation by the id its framework knows it by.
        hooks.find_by_framework_id.register(lookup.find_anywhere)
        post_save.connect(metrics.on_import_source_saved, sender=ImportSource, dispatch_uid="metrics_imports")
