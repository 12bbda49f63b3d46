"""Long-term facts: tables and their read QuerySets.

A fact is personal data about a subject, proposed by an agent and approved by a
person. Its words are never edited in place (the database refuses it, migration
0002); what changes is its lifecycle bookkeeping (status, invalidation,
supersession, access counts), always through `conversations.facts.store`.
Its history is `FactEvent`, append-only in the database.
"""

from django.db import models
from django.db.models import Q
from django.utils import timezone

from conversations import projects
from conversations.db import LockingQuerySet
from conversations.models import InProject
from conversations.personal import PersonalData
from conversations.subjects import normalize_subject

CATEGORIES = ("preference", "observation", "decision", "profile", "other")
PROPOSED, APPROVED, REJECTED, ERASING = "proposed", "approved", "rejected", "erasing"
STATUSES = (PROPOSED, APPROVED, REJECTED, ERASING)

EVENT_KINDS = (
    "proposed",
    "approved",
    "rejected",
    "superseded",
    "invalidated",
    "expired",
    "recalled",
    "kept",
)


class FactQuerySet(LockingQuerySet):
    def about(self, subject: str):
        return self.filter(subject=subject)

    def pending(self):
        """The review queue: proposals nobody has decided on yet, oldest first."""
        return self.filter(status=PROPOSED, superseded_by__isnull=True).order_by("recorded_at", "id")

    def recallable(self, now=None):
        """Approved, valid now in the world, not expired, not superseded: the only facts
        an agent is ever given (docs/DESIGN.md, invariant 8)."""
        now = now or timezone.now()
        return self.filter(
            Q(invalid_at__isnull=True) | Q(invalid_at__gt=now),
            Q(expires_at__isnull=True) | Q(expires_at__gt=now),
            status=APPROVED,
            superseded_by__isnull=True,
            valid_from__lte=now,
        )

    def believed_true_at(self, when):
        """Valid time, as known now: approved, not superseded (a supersession is a
        correction of the record), and true in the world at `when`."""
        return self.filter(
            Q(invalid_at__isnull=True) | Q(invalid_at__gt=when),
            status=APPROVED,
            superseded_by__isnull=True,
            valid_from__lte=when,
        )

    def on_record_at(self, when):
        """Record time: what the store would have recalled at `when`, with what it knew
        then — approved by then, not yet superseded, invalidated or expired then."""
        return self.filter(
            Q(superseded_at__isnull=True) | Q(superseded_at__gt=when),
            Q(invalidated_recorded_at__isnull=True) | Q(invalidated_recorded_at__gt=when) | Q(invalid_at__gt=when),
            Q(expires_at__isnull=True) | Q(expires_at__gt=when),
            status=APPROVED,
            reviewed_at__lte=when,
            recorded_at__lte=when,
            valid_from__lte=when,
        )

    def expiring_between(self, start, end):
        return self.filter(
            status__in=(PROPOSED, APPROVED), superseded_by__isnull=True, invalid_at__isnull=True,
            expires_at__gt=start, expires_at__lte=end,
        ).order_by("expires_at", "id")

    def due_to_expire(self, now=None):
        """Past their expiry with no `expired` event written yet."""
        now = now or timezone.now()
        return self.filter(
            status__in=(PROPOSED, APPROVED), expires_at__lte=now, expiry_recorded_at__isnull=True
        )


class Fact(InProject):
    id = models.BigAutoField(primary_key=True)
    subject = models.CharField(max_length=300)
    # The subject as deletion requests compare it (conversations/subjects.py); set on save.
    subject_norm = models.CharField(max_length=1200, blank=True, default="", editable=False)
    text = models.TextField()
    category = models.CharField(max_length=16, choices=[(c, c) for c in CATEGORIES])
    importance = models.SmallIntegerField()
    status = models.CharField(max_length=10, default=PROPOSED, choices=[(s, s) for s in STATUSES])
    # Valid time: when it became and stopped being true in the world.
    valid_from = models.DateTimeField()
    invalid_at = models.DateTimeField(null=True, blank=True)
    # Record time: when the store learnt it, and when its later changes were recorded.
    recorded_at = models.DateTimeField(default=timezone.now)
    reviewed_at = models.DateTimeField(null=True, blank=True)
    reviewed_by = models.CharField(max_length=200, blank=True, default="")
    invalidated_recorded_at = models.DateTimeField(null=True, blank=True)
    superseded_at = models.DateTimeField(null=True, blank=True)
    superseded_by = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.DO_NOTHING, related_name="supersedes"
    )
    # Why it was rejected, invalidated or superseded (at most one of those happens).
    reason = models.TextField(blank=True, default="")
    # Retention: past this the fact is never recalled; `expire_facts` records the event.
    expires_at = models.DateTimeField(null=True, blank=True)
    expiry_recorded_at = models.DateTimeField(null=True, blank=True)
    # Provenance as values, not foreign keys: a pruned conversation leaves the fact
    # standing, shown as "source removed".
    source_conversation_id = models.UUIDField(null=True, blank=True)
    source_position = models.BigIntegerField(null=True, blank=True)
    created_by = models.CharField(max_length=200)
    access_count = models.IntegerField(default=0)
    last_accessed_at = models.DateTimeField(null=True, blank=True)

    personal_data = PersonalData(text=("subject", "text", "reason"), not_searched=("subject_norm",),
                                 not_personal=("category", "status", "reviewed_by", "created_by"))

    objects = projects.scoped_manager(FactQuerySet)
    everywhere = FactQuerySet.as_manager()

    class Meta:
        base_manager_name = "everywhere"
        indexes = [
            # Recall and the subject page: one subject's facts by status.
            models.Index(fields=["project", "subject", "status"], name="fact_subject_status_idx"),
            # Recall's candidates, answered from the index alone (no table lookups):
            # only the rows recall can ever return, with every column it reads.
            models.Index(
                fields=["project", "subject", "valid_from", "invalid_at", "expires_at", "importance", "recorded_at",
                        "last_accessed_at"],
                condition=Q(status=APPROVED, superseded_by__isnull=True),
                name="fact_recall_idx",
            ),
            # The same for a caller acting in every project (an all-projects key naming none):
            # without it such a recall read every fact in the store (19 ms at 100,000, not 1).
            models.Index(
                fields=["subject", "valid_from", "invalid_at", "expires_at", "importance", "recorded_at",
                        "last_accessed_at"],
                condition=Q(status=APPROVED, superseded_by__isnull=True),
                name="fact_recall_any_project_idx",
            ),
            models.Index(fields=["project", "status", "recorded_at"], name="fact_status_recorded_idx"),
            models.Index(fields=["expires_at"], name="fact_expires_idx"),
            models.Index(fields=["subject_norm"], name="fact_subject_norm_idx"),
        ]
        constraints = [
            models.CheckConstraint(condition=Q(importance__gte=1, importance__lte=10), name="fact_importance_1_10"),
            models.CheckConstraint(condition=Q(status__in=STATUSES), name="fact_status_known"),
            models.CheckConstraint(condition=Q(category__in=CATEGORIES), name="fact_category_known"),
        ]

    def __str__(self):
        return f"fact {self.pk} about {self.subject}"

    def save(self, *args, **kwargs):
        self.subject_norm = normalize_subject(self.subject)
        super().save(*args, **kwargs)

    def state(self, now=None) -> str:
        """One word for the page: what this fact is now."""
        now = now or timezone.now()
        if self.status != APPROVED:
            return "superseded" if self.superseded_by_id else self.status
        if self.superseded_by_id:
            return "superseded"
        if self.invalid_at and self.invalid_at <= now:
            return "invalidated"
        if self.expires_at and self.expires_at <= now:
            return "expired"
        if self.valid_from > now:
            return "not yet valid"
        return "current"


class FactEventQuerySet(models.QuerySet):
    def of_subject(self, subject: str):
        return self.filter(fact__subject=subject)


class FactEvent(models.Model):
    """One change in a fact's life. Never updated; deleted only on the erasure path
    (while its fact is marked `erasing`) — both enforced by the database."""

    id = models.BigAutoField(primary_key=True)
    fact = models.ForeignKey(Fact, on_delete=models.DO_NOTHING, related_name="events")
    kind = models.CharField(max_length=16, choices=[(k, k) for k in EVENT_KINDS])
    at = models.DateTimeField(default=timezone.now)
    actor = models.CharField(max_length=200)
    reason = models.TextField(blank=True, default="")
    # Ids and numbers only (the other fact of a supersession, a recall's score).
    detail = models.JSONField(default=dict, blank=True)

    # A reviewer's reason may quote the fact; it goes with its fact.
    personal_data = PersonalData(not_searched=("reason",), not_personal=("kind", "actor", "detail"))

    # The events of the current project's facts (an event holds no project of its own: its
    # fact does). `everywhere`: every project's.
    objects = projects.scoped_manager(FactEventQuerySet, project_field="fact__project_id")
    everywhere = FactEventQuerySet.as_manager()

    class Meta:
        base_manager_name = "everywhere"
        indexes = [models.Index(fields=["fact", "at"], name="factevent_fact_at_idx")]

    def __str__(self) -> str:
        return f"fact {self.fact_id}: {self.kind} by {self.actor}"


class FactAccessQuerySet(models.QuerySet):
    def recent(self):
        return self.order_by("-at", "-id")


class FactAccess(InProject):
    """A person opened a subject's facts: who, which subject, when."""

    id = models.BigAutoField(primary_key=True)
    at = models.DateTimeField(default=timezone.now)
    actor = models.CharField(max_length=200)
    subject = models.CharField(max_length=300, db_index=True)
    subject_norm = models.CharField(max_length=1200, blank=True, default="", editable=False)
    # Which page (e.g. "subject", "subject as of 2026-01-01").
    view = models.CharField(max_length=100, blank=True, default="")

    personal_data = PersonalData(not_searched=("subject", "subject_norm"), not_personal=("actor", "view"))

    objects = projects.scoped_manager(FactAccessQuerySet)
    everywhere = FactAccessQuerySet.as_manager()

    class Meta:
        base_manager_name = "everywhere"
        indexes = [
            models.Index(fields=["project", "-at", "-id"], name="factaccess_at_idx"),
            models.Index(fields=["subject_norm"], name="factaccess_subject_norm_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.actor} read facts at {self.at} ({self.view or 'view'})"

    def save(self, *args, **kwargs):
        self.subject_norm = normalize_subject(self.subject)
        super().save(*args, **kwargs)


class FactVector(models.Model):
    """A fact's words as a vector (conversations/embeddings), written in the proposal's own
    transaction; recall and the review queue compare meanings with it. Derived personal
    data: erased with its fact, never exported. The model that made it says whether it is
    stale (a change of model: the background embedder writes it again)."""

    fact = models.OneToOneField(Fact, primary_key=True, on_delete=models.DO_NOTHING, related_name="vector")
    model = models.ForeignKey("embeddings.EmbeddingModel", on_delete=models.PROTECT, related_name="+")
    vector = models.BinaryField()

    personal_data = PersonalData(vectors=("vector",))

    class Meta:
        indexes = [models.Index(fields=["model"], name="factvector_model_idx")]

    def __str__(self) -> str:
        return f"vector of fact {self.fact_id}"
