from django.apps import AppConfig


class ImportsConfig(AppConfig):
    name = "conversations.imports"
    label = "imports"

    def ready(self):
        from conversations.retention.owned import register

        from .models import ImportSource, SourceEntry

        register(ImportSource)
        register(SourceEntry, text_fields=("raw",))
