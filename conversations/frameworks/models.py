"""What an agent framework keeps beside a session, that is not a message.

- `SessionSummary`: the Claude Agent SDK's per-session summary sidecar. The SDK
  folds each appended batch into it (`fold_session_summary`, client side) so that
  listing a project's sessions takes one call instead of loading each session.
  Its `data` is the SDK's own opaque state: stored verbatim, never interpreted.
  One row per main session stream (an `imports.ImportSource` of format
  claude-code); it changes with every batch, so it is a sidecar, not a log.
  `updated_at` is stamped in the transaction that stores the batch, with the
  same time as the stream's `updated_at`: the SDK compares the two clocks to
  tell a fresh summary from a stale one.
"""

from django.db import models
from django.utils import timezone

from conversations import projects
from conversations.models import InProject
from conversations.personal import PersonalData


class SessionSummary(InProject):
    id = models.BigAutoField(primary_key=True)
    # The main stream this summary folds (imports.ImportSource.id), and where it lives.
    source_id = models.BigIntegerField(unique=True)
    namespace = models.CharField(max_length=200, blank=True, default="")
    session_id = models.CharField(max_length=200)
    # A plain value, not a foreign key (like every owned table): the conversation it goes with.
    conversation_id = models.UUIDField()
    data = models.JSONField(default=dict)
    updated_at = models.DateTimeField(default=timezone.now)

    # The data holds the first prompt's text, as JSON (escaped, so no needle is cut from it).
    personal_data = PersonalData(not_searched=("data",), not_personal=("namespace", "session_id"))

    objects = projects.scoped_manager(models.QuerySet, namespace_field="namespace")
    everywhere = projects.unscoped_manager()

    class Meta:
        base_manager_name = "everywhere"
        indexes = [
            models.Index(fields=["project", "namespace", "session_id"], name="session_summary_key_idx"),
            models.Index(fields=["conversation_id"], name="session_summary_conv_idx"),
        ]

    def __str__(self):
        return f"{self.namespace}/{self.session_id}"
