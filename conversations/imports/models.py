"""Where imported transcripts came from, and their original entries, kept beside the rows.

- `ImportSource`: one stream of a format (a session file, a SessionStore key, a
  document), identified by (format, namespace, source key: the session id, or a
  hash of the content). Importing the same source again finds it here; a session
  that has grown continues from `entries` with the placer's saved `state`.
- `SourceEntry`: each original line or object, byte for byte, in order, with the
  conversation and position it was placed at. Rendering back to the format reads
  these. Append-only in the database (migration 0001): never updated, deleted
  only with the conversation it belongs to.

Both are registered as owned by a conversation (conversations/owned.py), so pruning,
deletion and deletion requests remove them with it.
"""

from django.db import models
from django.utils import timezone

from conversations import projects
from conversations.db import LockingQuerySet
from conversations.models import InProject
from conversations.personal import PersonalData


class ImportSource(InProject):
    id = models.BigAutoField(primary_key=True)
    format = models.CharField(max_length=32)
    namespace = models.CharField(max_length=200, blank=True, default="")
    source_key = models.CharField(max_length=300)
    # The conversation the stream's entries start in (lineage as a plain value, like forks).
    conversation_id = models.UUIDField(db_index=True)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)
    # Entries stored so far: the next entry's seq.
    entries = models.BigIntegerField(default=0)
    # For files: the text consumed so far, by length and hash, to recognise a grown file.
    consumed_chars = models.BigIntegerField(default=0)
    consumed_hash = models.CharField(max_length=80, blank=True, default="")
    # What the format's placer resumes from (conversation keys → ids, pending folds, …).
    state = models.JSONField(default=dict, blank=True)

    # A placer's pending folds can hold a message's text, in the placer's own JSON.
    personal_data = PersonalData(not_searched=("state",),
                                 not_personal=("format", "namespace", "source_key", "consumed_hash"))

    # A project's sources: its session keys are its own (two projects may both hold session `abc`).
    objects = projects.scoped_manager(LockingQuerySet, namespace_field="namespace")
    everywhere = LockingQuerySet.as_manager()

    class Meta:
        base_manager_name = "everywhere"
        constraints = [
            models.UniqueConstraint(fields=["project", "format", "namespace", "source_key"],
                                    name="import_source_identity"),
        ]

    def __str__(self):
        return f"{self.format}:{self.namespace}/{self.source_key}"


class SourceEntry(models.Model):
    pk = models.CompositePrimaryKey("source_id", "seq")
    source_id = models.BigIntegerField()
    seq = models.BigIntegerField()
    conversation_id = models.UUIDField()
    # The last position of that conversation once the entry was placed (-1: none yet).
    position = models.BigIntegerField(default=-1)
    line = models.BigIntegerField(null=True, blank=True)
    # NULL, not "", for a line without an id (DJ001 is about forms; these rows are never edited in one).
    uuid = models.CharField(max_length=200, null=True, blank=True)  # noqa: DJ001
    parent_uuid = models.CharField(max_length=200, null=True, blank=True)  # noqa: DJ001
    group = models.CharField(max_length=200, null=True, blank=True)  # noqa: DJ001
    real = models.BooleanField(default=False)
    # The original, exactly as it came in.
    raw = models.TextField()

    personal_data = PersonalData(text=("raw",), not_personal=("uuid", "parent_uuid", "group"))

    class Meta:
        indexes = [
            models.Index(fields=["source_id", "uuid"], name="source_entry_uuid_idx"),
            models.Index(fields=["source_id", "parent_uuid"], name="source_entry_parent_idx"),
            models.Index(fields=["conversation_id"], name="source_entry_conv_idx"),
            # An OTel span's trace id: the conversations of a trace are found by it (search/lookup.py).
            models.Index(fields=["group"], name="source_entry_group_idx"),
        ]

    def __str__(self) -> str:
        return f"source {self.source_id} entry {self.seq} -> {self.conversation_id}#{self.position}"


class ImportStage(models.Model):
    """A conversation that an import is still writing (conversations/imports/writer.py).

    The conversation is created marked `staged`, so every read hides it and no agent
    can append to it, and it is written in short transactions; the import's last
    transaction deletes this row and unmarks it. A conversation that stays staged
    with this row (the import crashed) is taken by the next prune, or cleaned by
    the next import of the same source once `holder` is gone or silent.

    Registered as owned by its conversation: every deletion path (prune, deletion
    requests, delete) removes this row first, in its own transaction, and an import
    checks its rows in every transaction it writes, so it never writes rows into a
    conversation that a deletion has started on.
    """

    conversation_id = models.UUIDField(primary_key=True)
    # host:pid:random of the importing process.
    holder = models.CharField(max_length=100)
    source_key = models.CharField(max_length=300, blank=True, default="")
    started_at = models.DateTimeField(default=timezone.now)
    heartbeat_at = models.DateTimeField(default=timezone.now)

    personal_data = PersonalData(not_personal=("holder", "source_key"))

    objects = LockingQuerySet.as_manager()

    def __str__(self) -> str:
        return f"import of {self.conversation_id} held by {self.holder}"
