from django.apps import AppConfig

from conversations.owned import register


class ImportsConfig(AppConfig):
    name = "conversations.imports"
    label = "imports"

    def ready(self):
        from conversations.retention import leftovers

        from . import uploads
        from .models import ImportSource, ImportStage, SourceEntry

        # First: a deletion takes a conversation from an import still writing it (that import
        # stops at its next transaction) before it deletes the conversation's other rows.
        register(ImportStage)
        register(ImportSource)
        register(SourceEntry, text_fields=("raw",))
        # Previews waiting for their confirmation: pruned when expired, erased with their subject.
        leftovers.register(uploads.LEFTOVERS)
