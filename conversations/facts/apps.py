from django.apps import AppConfig


class FactsConfig(AppConfig):
    name = "conversations.facts"
    label = "facts"

    def ready(self):
        from conversations.embeddings import jobs

        from . import meaning

        jobs.register(meaning.JOB)
