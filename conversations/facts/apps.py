from django.apps import AppConfig


class FactsConfig(AppConfig):
    name = "conversations.facts"
    label = "facts"
