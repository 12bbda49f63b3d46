from django.db import models

from conversations.personal import PersonalData


class LoginFailure(models.Model):
    """One failed login, or one being checked right now (an attempt counts as a failure
    from the moment it is let through: guard.reserve_attempt): when, for which account
    (a keyed hash of the name as typed, never the name: people type passwords into the
    username field) and from where. Rows older than the window are deleted as new
    attempts come in."""

    at = models.DateTimeField(db_index=True)
    username_key = models.CharField(max_length=64)
    ip = models.CharField(max_length=64)

    # Who tried to log in, kept for the window on purpose: nothing a subject's erasure looks for.
    personal_data = PersonalData(not_personal=("username_key", "ip"))

    class Meta:
        indexes = [models.Index(fields=["username_key", "at"]), models.Index(fields=["ip", "at"])]

    def __str__(self) -> str:
        return f"failed login at {self.at}"
