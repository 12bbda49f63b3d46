"""The access log of conversations: every time a person opens one.

Opening means reading its rows: the conversation page, an export, "what the
model saw". Append-only in the database (migration 0002); rows go only with
their conversation (pruning, deletion, deletion requests).
"""

from django.db import models
from django.utils import timezone

from conversations import projects
from conversations.models import InProject
from conversations.personal import PersonalData

VIA = {"page": "conversation page", "export": "export", "model_saw": "what the model saw"}


class ConversationAccessQuerySet(models.QuerySet):
    def recent(self):
        return self.order_by("-id")


class ConversationAccess(InProject):
    id = models.BigAutoField(primary_key=True)
    at = models.DateTimeField(default=timezone.now)
    actor = models.CharField(max_length=200)  # "user:alice"
    # A plain value, not a foreign key: the row must not stop the conversation's deletion.
    conversation_id = models.UUIDField()
    via = models.CharField(max_length=16)
    # The row "what the model saw" was opened at; the export format; else empty.
    detail = models.CharField(max_length=40, blank=True, default="")

    personal_data = PersonalData(not_personal=("actor", "via", "detail"))

    objects = projects.scoped_manager(ConversationAccessQuerySet)
    everywhere = ConversationAccessQuerySet.as_manager()

    class Meta:
        base_manager_name = "everywhere"
        indexes = [
            models.Index(fields=["project", "-id"], name="access_project_idx"),
            models.Index(fields=["conversation_id", "id"], name="access_conversation_idx"),
            models.Index(fields=["actor", "id"], name="access_actor_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.actor} opened {self.conversation_id} via {self.via} at {self.at}"

    @property
    def via_label(self) -> str:
        return VIA.get(self.via, self.via)
