"""The conversation log: tables and their read QuerySets.

Writes go through `conversations.store`; nothing here writes. The database
itself refuses updates of messages and checkpoints and deletes outside the
store's deletion path (see migration 0002).
"""

import secrets
import time
import uuid
from datetime import timedelta

from django.conf import settings
from django.db import connection, models
from django.db.models import Exists, OuterRef
from django.utils import timezone

from . import params, projects
from .db import LockingQuerySet
from .errors import NotFound
from .personal import PersonalData
from .subjects import normalize_subject


def new_conversation_id() -> uuid.UUID:
    """A UUID version 7 (RFC 9562): the creation time in milliseconds, then 74 random bits.

    Messages are keyed by (conversation, position), so a new conversation's rows go
    where its id sorts. Random ids put them anywhere in the middle of the message
    table's b-tree, splitting full pages of older conversations; ids that start with
    the time put them at its right edge, next to the other live conversations (a fork
    of 50,000 rows took a quarter less CPU on SQLite; PostgreSQL's primary key index
    stays right-leaning the same way). Ids stay unguessable.
    """
    ms = time.time_ns() // 1_000_000
    rand = int.from_bytes(secrets.token_bytes(10), "big")
    value = (ms & (2**48 - 1)) << 80 | 0x7 << 76 | (rand >> 68) << 64 | 0b10 << 62 | (rand & (2**62 - 1))
    return uuid.UUID(int=value)


def parse_conversation_id(value) -> uuid.UUID:
    """A conversation id from a URL or a request; malformed means not found."""
    if isinstance(value, uuid.UUID):
        return value
    try:
        return uuid.UUID(str(value).strip())
    except (ValueError, AttributeError, TypeError):
        raise NotFound(f"conversation {str(value)[:80]!r} not found (not a conversation id)", field="id") from None


class Project(models.Model):
    """A fence around conversations, facts, keys and people (conversations/projects.py).
    `default` (id 1) always exists: migration 0009 put everything that existed into it."""

    id = models.BigAutoField(primary_key=True)
    slug = models.SlugField(max_length=64, unique=True)
    name = models.CharField(max_length=200)
    created_at = models.DateTimeField(default=timezone.now)
    # Days a conversation is kept after memoryui last received a row of it; NULL: the server's
    # MEMORYUI_RETENTION_DAYS. A support project keeps 30 days, a coding project a year.
    retention_days = models.PositiveIntegerField(null=True, blank=True)

    personal_data = PersonalData(not_personal=("slug", "name"))

    class Meta:
        ordering = ["id"]

    def __str__(self):
        return self.slug

    @property
    def kept_days(self) -> int:
        return self.retention_days if self.retention_days is not None else settings.MEMORYUI_RETENTION_DAYS


class InProject(models.Model):
    """A row of one project: its default manager sees the current scope's rows only
    (`everywhere` sees all, for the store's own look-ups), and a new row without a
    project goes into the scope's (conversations/projects.py)."""

    project = models.ForeignKey(Project, on_delete=models.PROTECT, related_name="+", db_index=False)

    class Meta:
        abstract = True

    def save(self, *args, **kwargs):
        if self.project_id is None:
            self.project_id = projects.for_write()
        super().save(*args, **kwargs)


class Membership(models.Model):
    """A person's role in one project: auditor, reviewer or admin (conversations/roles.py).
    A superuser is an admin of every project without a row here."""

    ROLES = ("auditor", "reviewer", "admin")

    id = models.BigAutoField(primary_key=True)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=16, choices=[(r, r) for r in ROLES])
    created_at = models.DateTimeField(default=timezone.now)

    personal_data = PersonalData(not_personal=("role",))

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "project"], name="membership_user_project_uniq")]

    def __str__(self):
        return f"{self.user_id} {self.role} of {self.project_id}"


class ChainedRow(models.Model):
    """A row with its place in a chain (conversations/chain.py): the store sets these in
    the insert's transaction, for messages, checkpoints, audit events and the ledger's rows."""

    salt = models.BinaryField(null=True, editable=False)
    commitment = models.BinaryField(null=True, editable=False)
    chain_hash = models.BinaryField(null=True, editable=False)

    # Hashes: a commitment is salted, so it tells nothing of the text it seals.
    personal_data = PersonalData(not_personal=("salt", "commitment", "chain_hash"))

    class Meta:
        abstract = True


class ConversationQuerySet(LockingQuerySet):
    def live(self):
        """Conversations neither being deleted (a half-finished prune hides its victims) nor
        staged (an import's, until it publishes them)."""
        return self.filter(deleting=False, staged=False)

    def get_live(self, conversation_id) -> "Conversation":
        cid = parse_conversation_id(conversation_id)
        try:
            return self.live().get(pk=cid)
        except Conversation.DoesNotExist:
            raise NotFound(f"conversation {cid} not found", field="id") from None

    def with_external_id(self, namespace: str, external_id: str):
        """The conversation of a (namespace, external_id) given in `params.identifier` form,
        also when its row was written, before ids were normalised, in the decomposed form."""
        return self.filter(namespace__in=params.identifier_forms(namespace),
                           external_id__in=params.identifier_forms(external_id))

    def with_checkpoint_flag(self):
        return self.annotate(
            has_checkpoint=Exists(Checkpoint.objects.filter(conversation=OuterRef("pk")))
        )

    def with_fork_count(self):
        forks = (
            # A subagent's transcript is a child but not a fork: it is counted apart.
            Conversation.objects.filter(parent_id=OuterRef("pk"), deleting=False, staged=False)
            .exclude(parent_relation="subagent")
            .order_by()
            .values("parent_id")
            .annotate(n=models.Count("pk"))
            .values("n")
        )
        return self.annotate(fork_count=models.functions.Coalesce(models.Subquery(forks), 0))

    def detail_of(self, conversation_id) -> "Conversation":
        """One live conversation with `fork_count` and `checkpoint_count`, in one statement.

        The API's conversation GET runs this on every call: compiling the ORM query with
        its two subqueries cost more than an append, a plain statement
        does not."""
        cid = parse_conversation_id(conversation_id)
        table, checkpoints = Conversation._meta.db_table, Checkpoint._meta.db_table
        fence, fenced = projects.sql_fence("c.project_id", "c.namespace")
        sql = (f"SELECT c.*, (SELECT COUNT(*) FROM {table} f WHERE f.parent_id = c.id AND f.deleting = %s "
               f"AND f.staged = %s AND f.parent_relation <> 'subagent') AS fork_count, "
               f"(SELECT COUNT(*) FROM {checkpoints} k WHERE k.conversation_id = c.id) AS checkpoint_count "
               f"FROM {table} c WHERE c.id = %s AND c.deleting = %s AND c.staged = %s{fence}")
        found = next(iter(self.raw(sql, [False, False, Conversation._meta.pk.get_db_prep_value(cid, connection),
                                         False, False, *fenced])), None)
        if found is None:
            raise NotFound(f"conversation {cid} not found", field="id")
        return found

    def about(self, subject: str):
        """About this subject, compared as erasure compares it (NFC, case-folded)."""
        return self.filter(subject_norm=normalize_subject(subject))


class Conversation(models.Model):
    id = models.UUIDField(primary_key=True, default=new_conversation_id, editable=False)
    # The project it belongs to; its forks and subagents stay in it (conversations/projects.py).
    project = models.ForeignKey(Project, on_delete=models.PROTECT, related_name="+", db_index=False)
    title = models.CharField(max_length=300, blank=True, default="")
    # Whom the conversation is about: what deletion requests and facts key on.
    subject = models.CharField(max_length=300, blank=True, default="", db_index=True)
    # The subject as deletion requests compare it (conversations/subjects.py); set on save.
    subject_norm = models.CharField(max_length=1200, blank=True, default="", editable=False)
    # A framework's own id for this conversation: unique within its namespace, never changed once set.
    namespace = models.CharField(max_length=200, blank=True, default="")
    # NULL when there is none, so the unique (namespace, external_id) constraint leaves those rows alone.
    external_id = models.CharField(max_length=200, null=True, blank=True)  # noqa: DJ001
    meta = models.JSONField(default=dict, blank=True)
    # Lineage as plain values, not foreign keys: a fork outlives its parent.
    parent_id = models.UUIDField(null=True, blank=True, db_index=True)
    forked_from_position = models.BigIntegerField(null=True, blank=True)
    # How a child relates to its parent: "fork", or "subagent" (a subagent's own
    # transcript, kept under the session that started it). Empty without a parent.
    parent_relation = models.CharField(max_length=16, blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now)
    # The time of the last row as the transcript has it (an import keeps its own dates).
    last_activity_at = models.DateTimeField(default=timezone.now)
    # When memoryui received the last row, by its own clock: what retention counts from
    # (docs/DESIGN.md, invariant 14). The store sets it on every create, import, fork and append.
    received_at = models.DateTimeField(default=timezone.now)
    pinned = models.BooleanField(default=False)
    # The next position the store will assign; equals the number of messages.
    next_position = models.BigIntegerField(default=0)
    # Set by the deletion path (conversations/deletion.py) before its deletes; the database
    # refuses to delete messages of a conversation without it.
    deleting = models.BooleanField(default=False)
    # An import's conversation, written in many short transactions and hidden, closed to other
    # writers, until the import publishes it (imports/store.py). Not a deletion: the database's
    # delete guards stay shut for it; discarding a staging marks it `deleting` first.
    staged = models.BooleanField(default=False)
    # A fork's parent's chain hash at forked_from_position (conversations/chain.py).
    forked_from_chain_hash = models.BinaryField(null=True, editable=False)

    # `meta` is whatever the client sent along; `external_id` and `namespace` are a framework's ids.
    personal_data = PersonalData(text=("title", "subject"), not_searched=("subject_norm", "meta"),
                                 not_personal=("namespace", "external_id", "parent_relation",
                                               "forked_from_chain_hash"))

    # Reads see the current project's conversations only (and its key's namespaces, if narrowed).
    objects = projects.scoped_manager(ConversationQuerySet, namespace_field="namespace")
    # Every project's: the store's own look-ups that must see a row whatever the scope
    # (a fork's lineage walk, the deletion path), never a read a caller is shown.
    everywhere = ConversationQuerySet.as_manager()

    class Meta:
        base_manager_name = "everywhere"
        indexes = [
            models.Index(fields=["project", "-last_activity_at", "-id"], name="conversation_activity_idx"),
            models.Index(fields=["subject_norm"], name="conversation_subject_norm_idx"),
            models.Index(fields=["namespace"], name="conversation_namespace_idx"),
            models.Index(fields=["received_at"], name="conversation_received_idx"),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["project", "namespace", "external_id"], condition=models.Q(external_id__isnull=False),
                name="conversation_external_id_uniq",
            ),
            models.CheckConstraint(
                condition=models.Q(next_position__gte=0), name="conversation_next_position_nonneg"
            ),
        ]

    def __str__(self):
        return self.title or str(self.id)

    def save(self, *args, **kwargs):
        if self.project_id is None:
            self.project_id = projects.for_write(self.namespace)
        self.subject_norm = normalize_subject(self.subject)
        if self.parent_id and not self.parent_relation:
            self.parent_relation = "fork"
        super().save(*args, **kwargs)

    @property
    def message_count(self) -> int:
        return self.next_position

    def latest_checkpoint(self):
        return Checkpoint.objects.latest_for(self.pk)

    def lineage(self) -> list["Conversation | None"]:
        """Ancestors from the root down to the parent; a pruned ancestor ends the walk."""
        chain = []
        parent_id = self.parent_id
        seen = {self.pk}
        while parent_id and parent_id not in seen:
            seen.add(parent_id)
            parent = Conversation.objects.live().filter(pk=parent_id).first()
            if parent is None:
                break
            chain.append(parent)
            parent_id = parent.parent_id
        chain.reverse()
        return chain

    @property
    def parent_missing(self) -> bool:
        return bool(self.parent_id) and not Conversation.objects.live().filter(pk=self.parent_id).exists()


class MessageQuerySet(models.QuerySet):
    def of(self, conversation_id):
        return self.filter(conversation_id=conversation_id)

    def page(self, conversation_id, *, after: int = -1, limit: int | None = None, until: int | None = None):
        """Keyset page by position: rows with position > after (and <= until)."""
        qs = self.filter(conversation_id=conversation_id, position__gt=after)
        if until is not None:
            qs = qs.filter(position__lte=until)
        qs = qs.order_by("position")
        return qs[:limit] if limit is not None else qs


class Message(ChainedRow):
    # The search app's migrations put triggers on this table (a row is indexed on insert,
    # unindexed on delete, queued for its vector) and, on PostgreSQL, a `search_tsv` column
    # the model does not declare: the only schema a sub-app adds to a core table
    # (conversations/search/migrations, docs/ARCHITECTURE.md).
    #
    # Keyed by (conversation, position): on SQLite the table is WITHOUT ROWID, so a
    # conversation's rows sit together in the file, in order. Reads by position are
    # one range scan, there is no second index to keep, and pruning a conversation
    # frees whole pages that the file can give back.
    pk = models.CompositePrimaryKey("conversation", "position")
    conversation = models.ForeignKey(
        Conversation, on_delete=models.DO_NOTHING, related_name="messages", db_index=False
    )
    position = models.BigIntegerField()
    kind = models.CharField(max_length=16)
    # The message exactly as first encoded; reads return these bytes.
    content = models.TextField()
    created_at = models.DateTimeField()

    personal_data = PersonalData(text=("content",), not_personal=("kind",))

    objects = MessageQuerySet.as_manager()

    class Meta:
        constraints = [
            models.CheckConstraint(condition=models.Q(position__gte=0), name="message_position_nonneg"),
        ]

    def __str__(self):
        return f"{self.conversation_id}#{self.position} {self.kind}"


class CheckpointQuerySet(models.QuerySet):
    def of(self, conversation_id):
        return self.filter(conversation_id=conversation_id)

    def latest_for(self, conversation_id, *, at_or_before: int | None = None, created_before=None):
        qs = self.filter(conversation_id=conversation_id)
        if at_or_before is not None:
            qs = qs.filter(message_position__lte=at_or_before)
        if created_before is not None:
            qs = qs.filter(created_at__lt=created_before)
        return qs.order_by("-message_position", "-id").first()


class Checkpoint(ChainedRow):
    id = models.BigAutoField(primary_key=True)
    conversation = models.ForeignKey(
        Conversation, on_delete=models.DO_NOTHING, related_name="checkpoints", db_index=False
    )
    # The summary stands in for positions 0..message_position.
    message_position = models.BigIntegerField()
    summary = models.TextField()
    created_at = models.DateTimeField(default=timezone.now)
    created_by = models.CharField(max_length=200, blank=True, default="")

    personal_data = PersonalData(text=("summary",), not_personal=("created_by",))

    objects = CheckpointQuerySet.as_manager()

    class Meta:
        indexes = [
            models.Index(fields=["conversation", "message_position"], name="checkpoint_conv_pos_idx"),
        ]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(message_position__gte=0), name="checkpoint_position_nonneg"
            ),
        ]

    def __str__(self) -> str:
        return f"checkpoint {self.id} of {self.conversation_id} at #{self.message_position}"


class ApiKey(models.Model):
    """An agent's credential. Only a hash of the secret is kept; it is shown once.

    A key belongs to one project and its scopes act inside it; `namespaces` narrows it to
    some of that project's namespaces. A key with no project is an operator's key for the
    whole server (`create_api_key --all-projects`)."""

    SCOPES = ("read", "write", "admin", "facts:read", "facts:write")

    id = models.BigAutoField(primary_key=True)
    name = models.CharField(max_length=200)
    project = models.ForeignKey(Project, null=True, blank=True, on_delete=models.PROTECT, related_name="+",
                                db_index=False, default=projects.project_of_new_row)
    # The namespaces the key may read and write; empty: all of its project's.
    namespaces = models.JSONField(default=list, blank=True)
    # The first characters of the key, to find the row without scanning hashes.
    prefix = models.CharField(max_length=16, unique=True)
    key_hash = models.CharField(max_length=64)
    scopes = models.JSONField(default=list)
    created_at = models.DateTimeField(default=timezone.now)
    created_by = models.CharField(max_length=200, blank=True, default="")
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    personal_data = PersonalData(not_personal=("name", "namespaces", "prefix", "key_hash", "scopes", "created_by"))

    # A project's keys; an all-projects key is seen only where every project is.
    objects = projects.scoped_manager(LockingQuerySet)
    everywhere = LockingQuerySet.as_manager()

    class Meta:
        base_manager_name = "everywhere"

    def __str__(self):
        return f"{self.name} ({self.prefix}…)"

    @property
    def active(self) -> bool:
        return self.revoked_at is None

    @property
    def all_projects(self) -> bool:
        return self.project_id is None


class AuditEvent(ChainedRow):
    """What people and keys did. Append-only in the database; holds ids, counts and
    hashes, never message or fact text."""

    id = models.BigAutoField(primary_key=True)
    at = models.DateTimeField(default=timezone.now, db_index=True)
    # The project the event happened in; NULL for the server's own (an all-projects key, a
    # project created, a deletion request across every project).
    project = models.ForeignKey(Project, null=True, blank=True, on_delete=models.PROTECT, related_name="+",
                                db_index=False, default=projects.project_of_new_row)
    actor = models.CharField(max_length=200)  # "user:alice", "key:ci-agent", "system"
    action = models.CharField(max_length=64, db_index=True)
    target_type = models.CharField(max_length=64, blank=True, default="")
    target_id = models.CharField(max_length=200, blank=True, default="")
    detail = models.JSONField(default=dict, blank=True)

    personal_data = PersonalData(not_personal=("actor", "action", "target_type", "target_id", "detail"))

    # The current project's events; the chain itself is read `everywhere` (store.record_audit).
    objects = projects.scoped_manager(models.QuerySet)
    everywhere = projects.unscoped_manager()

    class Meta:
        base_manager_name = "everywhere"
        indexes = [models.Index(fields=["actor", "at"], name="audit_actor_at_idx"),
                   models.Index(fields=["project", "-id"], name="audit_project_idx")]

    def __str__(self) -> str:
        return f"{self.action} by {self.actor} at {self.at}"


def key_lifetime() -> timedelta:
    """How long an Idempotency-Key is kept (conversations/idempotency.py)."""
    return timedelta(hours=settings.MEMORYUI_IDEMPOTENCY_HOURS)


class IdempotencyKeyQuerySet(models.QuerySet):
    def expired(self, *, now=None):
        return self.filter(created_at__lt=(now or timezone.now()) - key_lifetime())


class IdempotencyKey(models.Model):
    """One write sent with an `Idempotency-Key`, and the answer it got (conversations/idempotency.py).

    Written in the same transaction as the write it guards. Holds a hash of the
    request and the response exactly as sent, nothing more; expires after
    MEMORYUI_IDEMPOTENCY_HOURS (the prune run deletes it), and erasure deletes the
    keys that reference an erased conversation or subject.
    """

    id = models.BigAutoField(primary_key=True)
    # "key:<api key id>" or "user:<user id>": keys are scoped per caller.
    caller = models.CharField(max_length=64)
    key = models.CharField(max_length=255)
    # SHA-256 of method, path with query and body: a different request under the same key is refused.
    fingerprint = models.CharField(max_length=64)
    # 0 while an operation that runs outside a transaction (prune, deletion request) holds the key.
    status = models.PositiveSmallIntegerField(default=0)
    content_type = models.CharField(max_length=100, blank=True, default="")
    body = models.TextField(blank=True, default="")
    # The conversation the write touched or created, and the subject the answer names (erasure keys on both).
    conversation_id = models.UUIDField(null=True, blank=True)
    subject_norm = models.CharField(max_length=1200, blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now)
    # The project the write acted in (its answer is that project's data: row-level security
    # fences it, and a deletion request forgets it with the project's rows); NULL: none.
    project = models.ForeignKey(Project, null=True, blank=True, on_delete=models.PROTECT, related_name="+",
                                db_index=False, default=projects.project_of_new_row)

    # The answer as sent can name a conversation's title or subject.
    personal_data = PersonalData(text=("body",), not_searched=("subject_norm",),
                                 not_personal=("caller", "key", "fingerprint", "content_type"))

    objects = IdempotencyKeyQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["caller", "key"], name="idempotency_caller_key_uniq"),
        ]
        indexes = [
            models.Index(fields=["created_at"], name="idempotency_created_idx"),
            models.Index(fields=["conversation_id"], name="idempotency_conversation_idx"),
        ]

    def __str__(self):
        return f"{self.caller} {self.key}"


class UsageTotal(models.Model):
    """A conversation's tokens and cost so far, kept for the list to show and sort by
    (conversations/usage_totals.py). Derived and disposable: counted from its rows' usage up to
    `upto`, brought up to date when read, dropped with its conversation."""

    conversation = models.OneToOneField(Conversation, primary_key=True, on_delete=models.DO_NOTHING,
                                        related_name="usage_total", db_constraint=False)
    upto = models.BigIntegerField(default=-1)
    replies = models.IntegerField(default=0)
    input_tokens = models.BigIntegerField(default=0)
    output_tokens = models.BigIntegerField(default=0)
    cache_tokens = models.BigIntegerField(default=0)
    # Millionths of a US dollar, of the replies whose model has a price.
    cost_micros = models.BigIntegerField(default=0)
    unpriced = models.IntegerField(default=0)

    class Meta:
        indexes = [models.Index(fields=["cost_micros"], name="usage_total_cost_idx")]

    def __str__(self):
        return f"usage of {self.conversation_id} through #{self.upto}"

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens + self.cache_tokens
