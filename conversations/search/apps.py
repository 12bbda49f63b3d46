from django.apps import AppConfig


class SearchConfig(AppConfig):
    name = "conversations.search"
    label = "search"
    verbose_name = "Full-text search over messages"
