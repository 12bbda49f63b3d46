from django.apps import AppConfig


class LoginGuardConfig(AppConfig):
    name = "conversations.loginguard"
    label = "loginguard"
    verbose_name = "Failed logins, for throttling"
