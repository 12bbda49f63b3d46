from django.apps import AppConfig


class ImportsConfig(AppConfig):
    name = "conversations.imports"
    label = "imports"

    def ready(self):
        from conversations.retention import leftovers
        from conversations.retention.owned import register

        from . import uploads
        from .models import ImportSource, ImportStage, SourceEntry

        # First: a deletion takes a conversation from an import still writing it (that import
        # stops at its next transaction) before it deletes the conversation's other rows.
        register(ImportStage)
        register(ImportSource)
        register(SourceEntry, text_fields=("raw",))
        # Previews waiting for their confirmation: pruned when expired, erased with their subject.
        leftovers.register(uploads.LEFTOVERS)
