"""State beside the transcript: task state, the actions ledger, workspace snapshots.

Three append-only tables, each row belonging to one conversation. Writes go
through `conversations.ledger.store`; nothing here writes. The database refuses
updates of every row and deletes outside the conversation-deletion path
(migration 0002), as it does for messages.

A row's `position` says where it sits in the conversation's timeline:

- a task-state change and an action are recorded *after* the message at
  `position` (the last message when the store wrote them; -1 before any);
- a workspace snapshot is the files as they were when the turn at `position`
  began (the harness takes it before the turn).

JSON payloads (state, changes, arguments, result) are kept as the text the store
encoded once, so every read returns the same bytes and the deletion request's
raw-byte verification can look for them.
"""

import json
import shlex

from django.db import models
from django.utils import timezone

from conversations import projects
from conversations.models import ChainedRow, Conversation, Project
from conversations.personal import PersonalData

PERFORMED, FAILED, ALREADY_PERFORMED = "performed", "failed", "already_performed"
ACTION_STATUSES = (PERFORMED, FAILED, ALREADY_PERFORMED)
# What a caller may report; `already_performed` is the store's answer, never a claim.
REPORTED_STATUSES = (PERFORMED, FAILED)


def _loads(text: str):
    return json.loads(text) if text else None


class TaskStateQuerySet(models.QuerySet):
    def of(self, conversation_id):
        return self.filter(conversation_id=conversation_id)

    def current(self, conversation_id) -> "TaskStateEvent | None":
        """The latest version: one step down the (conversation, version) index."""
        return self.of(conversation_id).order_by("-version").first()

    def history(self, conversation_id, *, after_version: int = 0, limit: int | None = None):
        qs = self.of(conversation_id).filter(version__gt=after_version).order_by("version")
        return qs[:limit] if limit is not None else qs


class TaskStateEvent(ChainedRow):
    """One version of a conversation's task state: the whole state after the
    change, and what changed from the version before."""

    id = models.BigAutoField(primary_key=True)
    conversation = models.ForeignKey(Conversation, on_delete=models.DO_NOTHING, related_name="+",
                                     db_index=False)
    version = models.BigIntegerField()
    position = models.BigIntegerField()
    state = models.TextField()
    changes = models.TextField()
    actor = models.CharField(max_length=200, blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now)

    personal_data = PersonalData(text=("state", "changes"), not_personal=("actor",))

    objects = TaskStateQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["conversation", "version"], name="ledger_state_version_uniq"),
            models.CheckConstraint(condition=models.Q(version__gte=1), name="ledger_state_version_pos"),
            models.CheckConstraint(condition=models.Q(position__gte=-1), name="ledger_state_position_min"),
        ]

    def __str__(self) -> str:
        return f"task state v{self.version} of {self.conversation_id} at #{self.position}"

    @property
    def state_json(self) -> dict:
        return _loads(self.state)

    @property
    def changes_json(self) -> list:
        return _loads(self.changes) or []


class ActionQuerySet(models.QuerySet):
    def of(self, conversation_id):
        return self.filter(conversation_id=conversation_id)

    def with_key(self, namespace: str, key: str):
        """Every entry for a business key in a namespace, in the order written:
        one range of the (namespace, idempotency_key, id) index."""
        return self.filter(namespace=namespace, idempotency_key=key).order_by("id")

    def performed(self, namespace: str, key: str) -> "Action | None":
        """The entry that did it: the original if it still exists, else the
        oldest copy a fork carried (the original's conversation was deleted)."""
        rows = self.with_key(namespace, key).filter(status=PERFORMED)
        return rows.order_by(models.F("inherited_from").asc(nulls_first=True), "id").first()

    def for_reconciliation(self):
        """What happened, once: original entries, plus a fork's copy of an entry
        whose original is gone (the oldest such copy), never a second copy."""
        originals = Action.objects.filter(pk=models.OuterRef("inherited_from"))
        older_copy = Action.objects.filter(inherited_from=models.OuterRef("inherited_from"),
                                           id__lt=models.OuterRef("id"))
        return self.filter(
            models.Q(inherited_from__isnull=True)
            | (~models.Exists(originals) & ~models.Exists(older_copy))
        )


class Action(ChainedRow):
    """One attempt at a side effect, written by code after the tool returned.

    `idempotency_key` is the business key (ticket, order, item, amount …), unique
    among `performed` entries of a namespace of a project: a retry with the same key is
    recorded as `already_performed`, pointing at the entry that did it.
    """

    id = models.BigAutoField(primary_key=True)
    conversation = models.ForeignKey(Conversation, on_delete=models.DO_NOTHING, related_name="+",
                                     db_index=False)
    # The conversation's project (a fork's stays its parent's): business keys are the project's own.
    project = models.ForeignKey(Project, on_delete=models.PROTECT, related_name="+", db_index=False)
    position = models.BigIntegerField()
    # The conversation's namespace when recorded ("" is the store-wide namespace).
    namespace = models.CharField(max_length=200, blank=True, default="")
    idempotency_key = models.CharField(max_length=255)
    name = models.CharField(max_length=200)
    arguments = models.TextField()
    result = models.TextField()
    status = models.CharField(max_length=20, choices=[(s, s) for s in ACTION_STATUSES])
    # For a retry: the entry it repeats (the performed one, else the first attempt).
    # Plain values, not foreign keys: the original may live in another conversation.
    original_id = models.BigIntegerField(null=True, blank=True)
    # For an entry a fork carried over: the id of the entry first written.
    inherited_from = models.BigIntegerField(null=True, blank=True)
    actor = models.CharField(max_length=200, blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now)

    # A business key can be a person's order or ticket number.
    personal_data = PersonalData(text=("arguments", "result", "idempotency_key"),
                                 not_personal=("namespace", "name", "status", "actor"))

    # The current project's entries (and its key's namespaces'): a lookup by business key never
    # finds another project's. `everywhere`: the store's own chain look-ups.
    objects = projects.scoped_manager(ActionQuerySet, namespace_field="namespace")
    everywhere = ActionQuerySet.as_manager()

    class Meta:
        base_manager_name = "everywhere"
        indexes = [
            models.Index(fields=["project", "namespace", "idempotency_key", "id"], name="ledger_action_key_idx"),
            models.Index(fields=["conversation", "position", "id"], name="ledger_action_timeline_idx"),
            models.Index(fields=["created_at", "id"], name="ledger_action_created_idx"),
            models.Index(fields=["inherited_from"], name="ledger_action_inherited_idx",
                         condition=models.Q(inherited_from__isnull=False)),
        ]
        constraints = [
            # The rule the ledger exists for: one entry did it, whatever the retries.
            models.UniqueConstraint(
                fields=["project", "namespace", "idempotency_key"],
                condition=models.Q(status=PERFORMED, inherited_from__isnull=True),
                name="ledger_action_performed_once",
            ),
            models.CheckConstraint(condition=models.Q(status__in=ACTION_STATUSES), name="ledger_action_status"),
            models.CheckConstraint(
                condition=~models.Q(status=ALREADY_PERFORMED) | models.Q(original_id__isnull=False),
                name="ledger_action_retry_has_original",
            ),
            models.CheckConstraint(condition=models.Q(position__gte=-1), name="ledger_action_position_min"),
        ]

    def __str__(self) -> str:
        return f"action {self.name} of {self.conversation_id} at #{self.position}"

    @property
    def arguments_json(self):
        return _loads(self.arguments)

    @property
    def result_json(self):
        return _loads(self.result)

    @property
    def entry_id(self) -> int:
        """The id of the entry as first written (a fork's copy answers for its original)."""
        return self.inherited_from or self.id


class SnapshotQuerySet(models.QuerySet):
    def of(self, conversation_id):
        return self.filter(conversation_id=conversation_id)

    def timeline(self, conversation_id):
        return self.of(conversation_id).order_by("position", "repo", "id")


class WorkspaceSnapshot(ChainedRow):
    """The files at a turn: a git commit object the harness stored under
    `refs/memoryui/<conversation>/<position>` in its own repository, with the
    size of the change against the commit it was taken on (`base_sha`)."""

    id = models.BigAutoField(primary_key=True)
    conversation = models.ForeignKey(Conversation, on_delete=models.DO_NOTHING, related_name="+",
                                     db_index=False)
    position = models.BigIntegerField()
    repo = models.CharField(max_length=1000)
    ref = models.CharField(max_length=400)
    commit_sha = models.CharField(max_length=64)
    base_sha = models.CharField(max_length=64, blank=True, default="")
    files_changed = models.IntegerField()
    insertions = models.IntegerField()
    deletions = models.IntegerField()
    actor = models.CharField(max_length=200, blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now)

    personal_data = PersonalData(text=("repo",), not_personal=("ref", "commit_sha", "base_sha", "actor"))

    objects = SnapshotQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["conversation", "position", "repo"], name="ledger_snapshot_turn_uniq"),
            models.CheckConstraint(condition=models.Q(position__gte=0), name="ledger_snapshot_position_min"),
            models.CheckConstraint(
                condition=models.Q(files_changed__gte=0, insertions__gte=0, deletions__gte=0),
                name="ledger_snapshot_figures_min",
            ),
        ]

    def __str__(self) -> str:
        return f"workspace {self.commit_sha[:12]} of {self.conversation_id} at #{self.position}"

    @property
    def restore_command(self) -> str:
        return f"git -C {shlex.quote(self.repo)} stash apply {shlex.quote(self.ref)}"
