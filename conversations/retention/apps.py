from django.apps import AppConfig


class RetentionConfig(AppConfig):
    name = "conversations.retention"
    label = "retention"
