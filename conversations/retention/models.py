"""What retention did: prune runs (with their progress) and deletion receipts.

A receipt is proof, so the database keeps it append-only (migration 0002 of
this app), like the audit log. It holds ids, counts and hashes, never a
subject or a message text.
"""

import uuid

from django.db import models
from django.utils import timezone

from conversations import projects
from conversations.db import LockingQuerySet
from conversations.models import Project
from conversations.personal import PersonalData


class PruneRun(models.Model):
    RUNNING, FINISHED, FAILED = "running", "finished", "failed"
    STATUSES = [(RUNNING, "running"), (FINISHED, "finished"), (FAILED, "failed")]

    id = models.BigAutoField(primary_key=True)
    # The project pruned, each by its own retention; NULL: every project (a server-wide run).
    project = models.ForeignKey(Project, null=True, blank=True, on_delete=models.PROTECT, related_name="+",
                                db_index=False, default=projects.project_of_new_row)
    started_at = models.DateTimeField(default=timezone.now, db_index=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    actor = models.CharField(max_length=200)
    older_than_days = models.IntegerField()
    cutoff = models.DateTimeField()
    batch_size = models.IntegerField()
    status = models.CharField(max_length=16, choices=STATUSES, default=RUNNING)
    # Progress, updated after every batch so the page can show it while it runs.
    total_rows = models.BigIntegerField(default=0)
    done_rows = models.BigIntegerField(default=0)
    conversations = models.BigIntegerField(default=0)
    messages = models.BigIntegerField(default=0)
    checkpoints = models.BigIntegerField(default=0)
    resumed = models.BigIntegerField(default=0)
    bytes_before = models.BigIntegerField(default=0)
    bytes_after = models.BigIntegerField(null=True, blank=True)
    # Conversation ids (not personal data); capped so a huge run stays a small row.
    conversation_ids = models.JSONField(default=list, blank=True)
    notes = models.JSONField(default=list, blank=True)
    error = models.TextField(blank=True, default="")

    personal_data = PersonalData(not_personal=("actor", "status", "conversation_ids", "notes", "error"))

    objects = projects.scoped_manager(models.QuerySet)
    everywhere = projects.unscoped_manager()

    class Meta:
        base_manager_name = "everywhere"
        ordering = ["-started_at", "-id"]

    def __str__(self) -> str:
        return f"prune {self.id} by {self.actor} ({self.older_than_days} days)"

    @property
    def percent(self) -> int:
        if not self.total_rows:
            return 100 if self.status != self.RUNNING else 0
        return min(100, int(self.done_rows * 100 / self.total_rows))

    @property
    def bytes_freed(self) -> int | None:
        if self.bytes_after is None:
            return None
        return self.bytes_before - self.bytes_after


class ReceiptQuerySet(models.QuerySet):
    def newest_first(self):
        return self.order_by("-created_at", "-id")


class DeletionReceipt(models.Model):
    """The record that a deletion request was carried out and checked."""

    # The request id: generated when the request is executed.
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    # The project the request erased in; NULL: every project (a data controller's request).
    project = models.ForeignKey(Project, null=True, blank=True, on_delete=models.PROTECT, related_name="+",
                                db_index=False, default=projects.project_of_new_row)
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    actor = models.CharField(max_length=200)
    # "subject" (a deletion request) or "conversation" (one conversation from its page).
    kind = models.CharField(max_length=16)
    # SHA-256 of the UTF-8 subject; empty when no subject was given.
    subject_sha256 = models.CharField(max_length=64, blank=True, default="")
    conversation_ids = models.JSONField(default=list)
    counts = models.JSONField(default=dict)
    # The verification as the request filed it: `erased` when the search of the files waits for
    # the maintenance window (retention/window.py), which adds a ReceiptCheck with its verdict.
    filed_verification = models.JSONField(default=dict, db_column="verification")
    # When the window must have verified it by (NULL: verified when it was filed).
    verify_by = models.DateTimeField(null=True, blank=True)

    # A receipt holds ids, counts and a hash of the subject, never a text (tests/test_erasure_request.py).
    personal_data = PersonalData(not_personal=("actor", "kind", "subject_sha256", "conversation_ids", "counts",
                                               "filed_verification"))

    objects = projects.scoped_manager(ReceiptQuerySet)
    everywhere = ReceiptQuerySet.as_manager()

    class Meta:
        base_manager_name = "everywhere"
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"deletion receipt {self.id} ({self.kind})"

    @property
    def verification(self) -> dict:
        """The latest verdict: the window's last check, else what the request filed."""
        if not hasattr(self, "_latest_check"):
            checks = getattr(self, "_prefetched_objects_cache", {}).get("checks")
            latest = max(checks, key=lambda c: (c.at, c.pk)) if checks is not None and checks else (
                None if checks is not None else ReceiptCheck.objects.filter(receipt_id=self.pk)
                .order_by("-at", "-id").first())
            self._latest_check = latest
        return self._latest_check.verification if self._latest_check is not None else self.filed_verification

    @property
    def verified(self) -> bool:
        return self.verification.get("status") == "verified"

    @property
    def phase(self) -> str:
        """`erased` (the rows are gone; the files wait for the window) or `checked`."""
        return "erased" if self.verification.get("status") == "erased" else "checked"

    @property
    def overdue(self) -> bool:
        return self.phase == "erased" and self.verify_by is not None and self.verify_by < timezone.now()

    def as_document(self) -> dict:
        """The receipt as the JSON a person downloads: no subject, no text."""
        return {
            "request_id": str(self.id),
            "created_at": self.created_at.isoformat(),
            "actor": self.actor,
            "kind": self.kind,
            # Which project the request erased in, or every project (all_projects).
            "project": self.project.slug if self.project_id else None,
            "all_projects": self.project_id is None,
            "subject_sha256": self.subject_sha256 or None,
            "conversation_ids": self.conversation_ids,
            "counts": self.counts,
            "verification": self.verification,
            # Two phases: the rows went when it was filed; the files are searched by this time.
            "verify_by": self.verify_by.isoformat() if self.verify_by else None,
            # A request that carried out an earlier one again after a restore: which, of which backup, when.
            "reapplied": self.filed_verification.get("reapplied"),
        }


class ReceiptCheck(models.Model):
    """A maintenance window's verdict on a deletion request filed before it (retention/window.py):
    what was searched and found, as the receipt's `verification`. Append-only in the database,
    like the receipt it completes; the latest is the receipt's verdict."""

    id = models.BigAutoField(primary_key=True)
    receipt = models.ForeignKey(DeletionReceipt, on_delete=models.DO_NOTHING, related_name="checks")
    at = models.DateTimeField(default=timezone.now)
    status = models.CharField(max_length=32)
    verification = models.JSONField(default=dict)

    personal_data = PersonalData(not_personal=("status", "verification"))

    class Meta:
        indexes = [models.Index(fields=["receipt", "at"], name="receiptcheck_receipt_idx")]

    def __str__(self) -> str:
        return f"check of {self.receipt_id}: {self.status}"


class MaintenanceLease(models.Model):
    """Who is running maintenance (a prune or a deletion request) right now.

    At most one row, named "maintenance": a second run finds it and is refused. The
    holder refreshes `heartbeat_at` while it works; a row whose heartbeat stopped
    (the process died) is stale and the next run takes it over (retention/lease.py).
    """

    name = models.CharField(max_length=32, primary_key=True)
    holder = models.CharField(max_length=64)
    kind = models.CharField(max_length=16)
    actor = models.CharField(max_length=200)
    acquired_at = models.DateTimeField()
    heartbeat_at = models.DateTimeField()

    personal_data = PersonalData(not_personal=("name", "holder", "kind", "actor"))

    objects = LockingQuerySet.as_manager()

    def __str__(self) -> str:
        return f"{self.name} lease held by {self.holder} for {self.kind}"


class ErasedRowManager(models.Manager):
    """The rows kept by the receipts the current scope sees: an erased row holds no project of
    its own, its receipt does (a request filed for every project: seen where every project is)."""

    def get_queryset(self):
        rows = super().get_queryset()
        if projects.current().every:
            return rows
        return rows.filter(receipt_id__in=DeletionReceipt.objects.values("id"))


class ErasedRow(models.Model):
    """What a deletion request keeps of each row it erased: the row's commitment and chain
    hash, never its content or salt (conversations/chain.py). The erased conversation's
    chains still verify from these, and the commitments reveal nothing of what was erased.
    Append-only in the database (migration 0004)."""

    id = models.BigAutoField(primary_key=True)
    receipt_id = models.UUIDField(db_index=True)
    # The erased conversation's id as text (with dashes): not the form its rows stored it
    # in, so the receipt's search for leftover copies of those rows still means something.
    conversation_ref = models.CharField(max_length=36)
    record_type = models.CharField(max_length=16)  # a record type of conversations/chain.py
    # A message's position; the row id of any other record (its chain's order).
    position = models.BigIntegerField()
    commitment = models.BinaryField(null=True)
    chain_hash = models.BinaryField(null=True)

    personal_data = PersonalData(not_personal=("conversation_ref", "record_type", "commitment", "chain_hash"))

    objects = ErasedRowManager()
    everywhere = projects.unscoped_manager()

    class Meta:
        base_manager_name = "everywhere"
        constraints = [
            models.UniqueConstraint(fields=["receipt_id", "conversation_ref", "record_type", "position"],
                                    name="erasedrow_uniq"),
        ]

    def __str__(self) -> str:
        return f"erased {self.record_type} #{self.position} of {self.conversation_ref}"
