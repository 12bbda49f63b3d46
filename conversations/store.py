"""Every write to the conversation log, one transaction each.

Views, API handlers and commands call these functions; nothing else writes
conversations, messages or checkpoints. The other doors (imports, sessions, OTLP,
the ledger) call the public primitives below and in `store_recorded.py`, built on
the row primitives of `rows.py`. Each function validates first, writes in one
transaction (`transaction.atomic()`; the SQLite append hot path issues its own
BEGIN IMMEDIATE … COMMIT), returns model instances, and raises the domain errors
of `conversations.errors`. The database backs the rules up (migration 0002): a
message row can be inserted, never updated, and deleted only with its whole
conversation, by the one deletion path (`deletion.py`, run by
`retention.pruning.delete_conversations_in_batches`, which age-based pruning and deletion
requests both run). Transactions and locks:
conversations/db.py.
"""

import json
from dataclasses import dataclass

from django.db import DEFAULT_DB_ALIAS, IntegrityError, connection, connections, transaction
from django.utils import timezone

from . import calls, chain, metrics, params, plugins, projects, rows
from .db import advisory_lock, writer_queue
from .errors import (
    CheckpointBeforeLatest,
    CheckpointSplitsToolCall,
    Conflict,
    InvalidInput,
    PositionOutOfRange,
    StoreError,
)
from .message_schema import encode_message, max_message_bytes
from .models import AuditEvent, Checkpoint, Conversation, Message, parse_conversation_id
from .params import check_text, check_tree
from .rows import (  # the row primitives every door writes through (rows.py)
    _execute_one,
    _insert_rows,
    _prev_chain,
    add_checkpoint,
    copy_prefix,
    db_id,
    db_now_stamped,
    seal_rows,
)

# Re-exported: the other doors (imports, the ledger) and the tests reach these through the store.
_db_now, db_datetime, insert_reserved, reserve_positions, sealed = (
    rows._db_now, rows.db_datetime, rows.insert_reserved, rows.reserve_positions, rows.sealed)


TITLE_MAX = Conversation._meta.get_field("title").max_length
SUBJECT_MAX = Conversation._meta.get_field("subject").max_length
NAMESPACE_MAX = Conversation._meta.get_field("namespace").max_length
EXTERNAL_ID_MAX = Conversation._meta.get_field("external_id").max_length
# Messages per batch append: one transaction, so a bound on how long it holds the write lock.
BATCH_MAX = 1000
PARENT_RELATIONS = ("fork", "subagent")

_conversation_table = Conversation._meta.db_table
_message_table = Message._meta.db_table
_checkpoint_table = Checkpoint._meta.db_table


def _db_uuid(value):
    return Conversation._meta.pk.get_db_prep_value(value, connection)


def clean_text(value, *, field: str, max_length: int, required: bool = False) -> str:
    """A short text column (a title, a subject, a name) as stored: stripped, checked, bounded."""
    if value is None:
        value = ""
    if not isinstance(value, str):
        raise InvalidInput(f"{field} must be a string", field=field)
    value = value.strip()
    check_text(value, field)
    if required and not value:
        raise InvalidInput(f"{field} must not be blank", field=field)
    if len(value) > max_length:
        raise InvalidInput(f"{field} is {len(value)} characters; at most {max_length}", field=field)
    return value


def check_meta(meta) -> dict:
    """A JSON object both databases store as it is (meta, an import's state); {} for None."""
    if meta is None:
        return {}
    if not isinstance(meta, dict):
        raise InvalidInput("meta must be a JSON object", field="meta")
    try:
        json.dumps(meta, allow_nan=False, ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        raise InvalidInput(f"meta must be plain JSON: {exc}", field="meta") from None
    # PostgreSQL's jsonb refuses \u0000, and no database stores half a surrogate pair.
    check_tree(meta, where="meta")
    return meta


def _clean_external_id(namespace, external_id) -> tuple[str, str | None]:
    namespace = params.identifier(namespace, "namespace", max_length=NAMESPACE_MAX)
    return namespace, _clean_id(external_id)


def _clean_id(external_id) -> str | None:
    if external_id is None:
        return None
    return params.identifier(external_id, "external_id", max_length=EXTERNAL_ID_MAX, required=True)


def create_conversation(*, title: str = "", subject: str = "", meta: dict | None = None,
                        namespace: str = "", external_id: str | None = None) -> Conversation:
    """A new conversation. `namespace` and `external_id` (a framework's own session id) are
    unique together and never change once set; an existing pair is a Conflict here
    (`get_or_create_conversation` answers with the existing one instead)."""
    conversation, created = _create(title=title, subject=subject, meta=meta, namespace=namespace,
                                    external_id=external_id, get_existing=False)
    return conversation


def get_or_create_conversation(*, namespace: str = "", external_id: str, title: str = "", subject: str = "",
                               meta: dict | None = None, parent_id=None, parent_relation: str = "",
                               forked_from_position: int | None = None) -> tuple[Conversation, bool]:
    """The conversation with this (namespace, external_id), created if there is none.

    Returns (conversation, created). An existing conversation is returned as it is:
    the title, subject, meta and parent given are used only to create. Two racing
    callers get the same conversation: on SQLite the IMMEDIATE transaction makes the
    look-up and the insert one step; on PostgreSQL the loser's insert meets the unique
    index, rolls back to its savepoint and reads the winner's row. Every door that
    names a conversation by a framework's id (the API, the session stores) creates it
    here. `parent_id` with `parent_relation` "subagent" (and the row that spawned it,
    `forked_from_position`) makes a subagent's transcript."""
    if external_id is None:
        raise InvalidInput("external_id is required to find a conversation by it", field="external_id")
    return _create(title=title, subject=subject, meta=meta, namespace=namespace, external_id=external_id,
                   get_existing=True, parent_id=parent_id, parent_relation=parent_relation,
                   forked_from_position=forked_from_position)


def _create(*, title, subject, meta, namespace, external_id, get_existing: bool, parent_id=None,
            parent_relation: str = "", forked_from_position: int | None = None) -> tuple[Conversation, bool]:
    title = clean_text(title, field="title", max_length=TITLE_MAX)
    subject = clean_text(subject, field="subject", max_length=SUBJECT_MAX)
    namespace, external_id = _clean_external_id(namespace, external_id)
    meta = check_meta(meta)
    if (parent_id is None) != (not parent_relation) or parent_relation not in ("", *PARENT_RELATIONS):
        raise InvalidInput("a parent needs its relation (fork or subagent), and a relation its parent",
                           field="parent_relation")
    lineage = {"parent_id": parent_id, "parent_relation": parent_relation,
               "forked_from_position": forked_from_position} if parent_id is not None else {}
    project_id = _project_for(namespace, parent_id)
    with transaction.atomic():
        if external_id is not None:
            existing = _by_external_id(namespace, external_id, project_id)
            if existing is not None:
                return _existing(existing, get_existing), False
        try:
            with transaction.atomic():
                conversation = Conversation.objects.create(
                    project_id=project_id, title=title, subject=subject, meta=meta, namespace=namespace,
                    external_id=external_id, **lineage)
        except IntegrityError:
            existing = _by_external_id(namespace, external_id, project_id) if external_id is not None else None
            if existing is None:
                raise
            return _existing(existing, get_existing), False
    return conversation, True


def _project_for(namespace: str, parent_id=None) -> int:
    """The project a new conversation goes into: the scope's (which the namespace must be
    open to), or, for a child created where every project is seen, its parent's."""
    project_id = projects.for_write(namespace)
    if parent_id is not None and projects.current().every:
        found = Conversation.everywhere.filter(pk=parent_id).values_list("project_id", flat=True).first()
        project_id = found if found is not None else project_id
    return project_id


def _by_external_id(namespace: str, external_id: str, project_id: int) -> Conversation | None:
    """The conversation of a framework's id in one project (ids are unique per project and
    namespace), whatever the scope sees: uniqueness is the project's, not the reader's."""
    found = list(Conversation.everywhere.filter(project_id=project_id).with_external_id(namespace, external_id)[:4])
    # The normalised spelling first; a row of an older, decomposed spelling otherwise.
    found.sort(key=lambda c: (c.namespace != namespace, c.external_id != external_id))
    return found[0] if found else None


def _existing(conversation: Conversation, get_existing: bool) -> Conversation:
    if conversation.deleting:
        raise Conflict(
            f"the conversation with external_id {conversation.external_id!r} is being deleted; "
            "try again when the deletion has finished", field="external_id", code="being_deleted")
    if conversation.staged:
        raise Conflict(
            f"the conversation with external_id {conversation.external_id!r} is being imported; "
            "try again when the import has finished", field="external_id", code="being_imported")
    if not get_existing:
        raise Conflict(
            f"namespace {conversation.namespace!r} already has a conversation with external_id "
            f"{conversation.external_id!r} ({conversation.pk})", field="external_id", code="external_id_taken")
    return conversation


# The project fence is a condition of the statement itself (every project, or this one), so
# the statement stays one text, prepared once per connection (rows._execute_one). Public: the
# benchmarks run the append's own statements (bench/w8_http.py, alone as a bound on its cost;
# bench/w17_chain.py, with the chain taken out), so that they measure what the store runs.
BUMP_POSITION = (
    f"UPDATE {_conversation_table} SET next_position = next_position + %s, "
    "last_activity_at = %s, received_at = %s WHERE id = %s AND NOT deleting AND NOT staged AND (%s OR project_id = %s) "
    "RETURNING next_position"
)
# The same, returning also the chain hash of the row before the first one reserved. On SQLite
# the write lock is held from BEGIN IMMEDIATE, so a subquery sees every earlier writer's row.
# On PostgreSQL a subquery would read the statement's snapshot, taken before the row lock was
# granted, and miss the row of the writer it waited for; there a VOLATILE function reads it
# (migration 0008), with a snapshot of its own taken after the lock is held.
BUMP_WITH_PREV = BUMP_POSITION + (
    f", (SELECT chain_hash FROM {_message_table} WHERE conversation_id = {_conversation_table}.id "
    f"AND position = {_conversation_table}.next_position - %s - 1)"
)
BUMP_WITH_PREV_PG = BUMP_POSITION + ", memoryui_chain_hash(id, next_position - %s - 1)"
rows.sqlite_form(BUMP_POSITION, BUMP_WITH_PREV)


def _bump_and_insert(db, cid, rows: list[list], expected_position: int | None, stamps) -> int:
    """Reserve len(rows) positions and insert the rows there, chained; returns the first position."""
    # The rows carry the store's clock: the conversation's activity and its receipt are now.
    n = len(rows)
    bump = BUMP_WITH_PREV if db.vendor == "sqlite" else BUMP_WITH_PREV_PG
    scope = projects.current()
    if scope.namespaces is not None:
        Conversation.objects.get_live(cid)  # a key narrowed to namespaces: NotFound outside them
    found = _execute_one(db, bump, [n, rows[0][4], rows[0][4], rows[0][0], scope.every, scope.project_id, n])
    if found is None:
        Conversation.objects.get_live(cid)  # raises NotFound; the caller rolls back
    position = found[0] - n
    if expected_position is not None and expected_position != position:
        raise Conflict(
            f"expected the next position to be {expected_position}, but it is {position}: "
            "another writer appended first; read the conversation again",
            field="expected_position",
            code="position_conflict",
        )
    seal_rows(rows, position, bytes(found[1]) if found[1] is not None else chain.GENESIS, stamps)
    _insert_rows(db, rows)
    return position


def _write_rows(db, cid, rows: list[list], expected_position: int | None, stamps) -> int:
    if db.vendor == "sqlite" and not db.in_atomic_block:
        # The hot path of every agent step: BEGIN IMMEDIATE … COMMIT on the sqlite3
        # connection itself. atomic() would do the same with twice the Python around
        # it (autocommit toggling, savepoint bookkeeping), which costs as much as the
        # statements. Errors are still raised as Django's database errors.
        db.ensure_connection()
        raw = db.connection
        with db.wrap_database_errors, writer_queue(db):
            raw.execute("BEGIN IMMEDIATE")
            try:
                position = _bump_and_insert(db, cid, rows, expected_position, stamps)
                raw.execute("COMMIT")
            except BaseException:
                raw.execute("ROLLBACK")
                raise
        return position
    # Inside the idempotency middleware's transaction around a keyed API write, no savepoint:
    # it costs two statements (two round trips on PostgreSQL) per append, and an error here
    # fails the request, whose transaction then rolls back whole. Other callers keep theirs.
    with transaction.atomic(savepoint=not getattr(db, "request_transaction", False)):
        if db.vendor == "sqlite":
            db.begin_pending()  # _bump_and_insert runs on the sqlite3 connection itself
        return _bump_and_insert(db, cid, rows, expected_position, stamps)


def append_message(*, conversation_id, message, expected_position: int | None = None) -> int:
    """Append one message and return the position the store gave it.

    The position comes from the conversation's counter, bumped with
    UPDATE … RETURNING in the same transaction as the insert: under PostgreSQL the
    row lock, under SQLite the IMMEDIATE write lock, make concurrent appends
    queue, so positions stay 0..n-1 with no gap and no duplicate.
    """
    kind, text = encode_message(message)
    cid = parse_conversation_id(conversation_id)
    # One look-up of the connection: `connection` is a thread-local proxy, and the
    # hot path below would otherwise pay for a dozen of them.
    db = connections[DEFAULT_DB_ALIAS]
    now, stamp = db_now_stamped(db)
    row = [db_id(db, cid), None, kind, text, now, None, None, None]
    position = _write_rows(db, cid, [row], expected_position, (stamp,))
    metrics.appended(1, conversation_id=cid)
    return position


@dataclass(frozen=True)
class Appended:
    first_position: int
    last_position: int

    @property
    def count(self) -> int:
        return self.last_position - self.first_position + 1


def append_messages(*, conversation_id, messages, expected_position: int | None = None) -> Appended:
    """Append 1..BATCH_MAX messages at contiguous positions, all or nothing.

    Every message is validated and encoded before anything is written; a bad one
    raises its error with the field named `messages.<i>.<field>`. Then one
    transaction reserves the positions (one counter bump) and inserts the rows,
    so no other writer's message lands between them. `expected_position` applies
    to the first message. All rows carry the same timestamp.
    """
    if not isinstance(messages, list) or not messages:
        raise InvalidInput("messages must be a non-empty list of messages", field="messages")
    if len(messages) > BATCH_MAX:
        raise InvalidInput(f"messages holds {len(messages)} messages; at most {BATCH_MAX} per batch",
                           field="messages")
    encoded = []
    for i, message in enumerate(messages):
        try:
            encoded.append(encode_message(message))
        except StoreError as exc:
            field = f"messages.{i}" + (f".{exc.field}" if exc.field else "")
            raise type(exc)(f"messages.{i}: {exc.message}", field=field, code=exc.code) from None
    cid = parse_conversation_id(conversation_id)
    db = connections[DEFAULT_DB_ALIAS]
    db_cid, (now, stamp) = db_id(db, cid), db_now_stamped(db)
    rows = [[db_cid, None, kind, text, now, None, None, None] for kind, text in encoded]
    first = _write_rows(db, cid, rows, expected_position, [stamp] * len(rows))
    metrics.appended(len(rows), conversation_id=cid)
    return Appended(first_position=first, last_position=first + len(rows) - 1)


def _check_position(conversation: Conversation, position, *, field: str = "position") -> int:
    if isinstance(position, bool) or not isinstance(position, int):
        raise InvalidInput(f"{field} must be an integer", field=field)
    last = conversation.next_position - 1
    if position < 0 or position > last:
        where = "the conversation has no messages" if last < 0 else f"it must be between 0 and {last}"
        raise PositionOutOfRange(f"{field} {position} is out of range: {where}", field=field)
    return position


def checkpoint_at(*, conversation_id, position: int, summary: str, created_by: str = "",
                  actor: str | None = None) -> Checkpoint:
    """Fold positions 0..position into `summary`. Deletes and changes nothing else.

    With an `actor` (a person or a key), the audit event is written in the same
    transaction, and the actor is the checkpoint's author unless `created_by` says
    otherwise."""
    if not isinstance(summary, str) or not summary.strip():
        raise InvalidInput("summary must not be blank", field="summary")
    check_text(summary, "summary")
    if len(summary.encode()) > max_message_bytes():
        raise InvalidInput(
            f"summary is over the {max_message_bytes()}-byte message limit", field="summary"
        )
    with transaction.atomic():
        conversation = lock_conversation(conversation_id)
        _check_position(conversation, position)
        floor = fold_floor(conversation.pk, position)
        _check_fold_keeps_calls(conversation, position, floor=floor)
        checkpoint = add_checkpoint(conversation_id=conversation.pk, message_position=position, summary=summary,
                                    created_by=str(created_by or actor or "")[:200])
        touch_conversation(conversation.pk, at=checkpoint.created_at)
        if actor:
            record_audit(actor=actor, action="conversation.checkpointed", target_type="conversation",
                         target_id=str(conversation.pk), detail={"checkpoint_id": checkpoint.pk, "position": position})
    return checkpoint


def fold_floor(conversation_id, position: int) -> int:
    """The latest checkpoint's position (0 without one): a fold may not go back before it."""
    latest = Checkpoint.objects.latest_for(conversation_id)
    if latest is not None and position < latest.message_position:
        raise CheckpointBeforeLatest(
            f"position {position} is before the latest checkpoint at position "
            f"{latest.message_position}; a checkpoint can only move the fold forward",
            field="position",
        )
    return latest.message_position if latest else 0


def _check_fold_keeps_calls(conversation: Conversation, position: int, *, floor: int) -> None:
    """Refuse a fold that would separate a tool call from its result (conversations/calls.py):
    the next request would start with a result whose call is gone, which no provider takes."""
    rows = calls.Rows(conversation.pk, conversation.next_position - 1)
    split = calls.split_calls(rows, position)
    if not split:
        return
    before, after = calls.nearest_allowed(rows, position, floor=floor)
    nearest = " and ".join(f"{p} ({side})" for p, side in ((before, "before"), (after, "after")) if p is not None)
    raise CheckpointSplitsToolCall(
        f"position {position} is between the tool call {', '.join(split[:3])} and its result; a fold there "
        f"would leave the result without its call. The nearest positions that keep calls with their results: "
        f"{nearest or 'none nearby'}",
        field="position",
    )


def fork_conversation(*, conversation_id, position: int, title: str | None = None,
                      actor: str | None = None, external_id: str | None = None,
                      relation: str = "fork") -> Conversation:
    """Copy rows 0..position into a new child conversation, in one transaction.

    The rows are copied by the database (INSERT … SELECT) with the same bytes and
    timestamps; the latest checkpoint at or before `position` comes along, and the
    lineage is recorded. The parent is not touched. The task state, actions and
    workspace snapshots as of `position` come along too (`plugins.fork_copied`).
    With an `actor`, the audit event is written in the same transaction. The child
    is in the parent's namespace; it gets an `external_id` only when one is given
    (a framework's id for the branch), and `relation` says what it is to its parent
    ("fork", or "subagent" for a subagent's transcript).
    """
    if relation not in PARENT_RELATIONS:
        raise InvalidInput(f"relation must be one of {', '.join(PARENT_RELATIONS)}", field="relation")
    with transaction.atomic():
        parent = lock_conversation(conversation_id)
        # The parent's namespace as stored (it may predate the identifier rules).
        namespace, external_id = parent.namespace, _clean_id(external_id)
        taken = _by_external_id(namespace, external_id, parent.project_id) if external_id is not None else None
        if taken is not None:
            _existing(taken, False)
        _check_position(parent, position)
        if title is None or not str(title).strip():
            title = f"{parent.title or 'Untitled'} (fork at {position})"[:TITLE_MAX]
        title = clean_text(title, field="title", max_length=TITLE_MAX)
        now = timezone.now()
        child = Conversation.objects.create(
            # A fork stays in its parent's project, whoever forks it.
            project_id=parent.project_id,
            title=title,
            subject=parent.subject,
            meta=parent.meta,
            parent_id=parent.pk,
            forked_from_position=position,
            parent_relation=relation,
            # Same namespace: the fork's actions ledger keys are checked against its parent's.
            namespace=namespace,
            external_id=external_id,
            created_at=now,
            last_activity_at=now,
            received_at=now,
            # The parent's chain hash at the fork position: the copied rows carry it too.
            forked_from_chain_hash=_prev_chain(connection, _db_uuid(parent.pk), position + 1),
        )
        plugins.fork_copying.send(sender=Conversation, child_id=child.pk, parent_id=parent.pk, upto=position)
        copy_fork_rows(child_id=child.pk, parent_id=parent.pk, start=0, count=position + 1, upto=position)
        child.next_position = position + 1
        if actor:
            record_audit(actor=actor, action="conversation.forked", target_type="conversation",
                         target_id=str(child.pk),
                         detail={"parent_id": str(parent.pk), "position": position, "messages": child.next_position})
    return child


# ---- the primitives of the other doors ---------------------------------------------------
#
# Imports, sessions, OTLP, the ledger and the framework stores write the core tables only
# through these, the functions above and conversations/store_recorded.py (conversations as a
# transcript recorded them). Each runs in the caller's transaction; the caller holds the
# conversation: lock_conversation() in that transaction, or a staged import's hold (its
# conversations are hidden and closed to every other writer until it publishes them).


def lock_conversation(conversation_id) -> Conversation:
    """The live conversation, locked for the rest of the transaction (conversations/db.py).

    PostgreSQL takes a row lock; SQLite already holds the database write lock
    (IMMEDIATE transactions), so the plain read is as good as a lock there.
    """
    return Conversation.objects.for_update().get_live(conversation_id)


def touch_conversation(conversation_id, *, at) -> None:
    """Activity on a conversation at `at`: age-based pruning counts from its receipt, so a
    conversation being worked on (a fold, a ledger entry) is not taken."""
    Conversation.objects.filter(pk=conversation_id).update(last_activity_at=at, received_at=at)


def copy_fork_rows(*, child_id, parent_id, start: int, count: int, upto: int, staged: bool = False) -> None:
    """Copy the parent's rows start..start+count-1 into the fork `child_id`, at the positions
    its counter hands out, with the same bytes, times, salts, commitments and chain hashes.
    The step that reaches `upto` (the fork position) also brings the latest checkpoint at or
    before it, and the rows other apps keep per conversation as of it (`plugins.fork_copied`:
    the ledger's task state, actions and snapshots). A copy in several steps (a staged import's chunks) calls this
    once per step."""
    if reserve_positions(conversation_id=child_id, count=count, staged=staged) != start:
        raise Conflict("the fork changed underneath the copy of its parent's rows", field="conversation")
    copied = copy_prefix(child_id=child_id, parent_id=parent_id, start=start, count=count)
    if copied != count:
        raise Conflict(f"the fork copied {copied} rows of its parent, expected {count}; nothing was written")
    if start + count != upto + 1:
        return
    checkpoint = Checkpoint.objects.latest_for(parent_id, at_or_before=upto)
    if checkpoint is not None:
        add_checkpoint(conversation_id=child_id, message_position=checkpoint.message_position,
                       summary=checkpoint.summary, created_at=checkpoint.created_at,
                       created_by=checkpoint.created_by)
    # The apps that keep rows per conversation copy theirs as of the fork position (the ledger).
    plugins.fork_copied.send(sender=Conversation, child_id=child_id, parent_id=parent_id, upto=upto)


def set_pinned(*, conversation_id, pinned: bool, actor: str | None = None) -> Conversation:
    """Pin (age-based pruning never takes it) or unpin; audited when an actor is given."""
    with transaction.atomic():
        conversation = lock_conversation(conversation_id)
        Conversation.objects.filter(pk=conversation.pk).update(pinned=bool(pinned))
        conversation.pinned = bool(pinned)
        if actor:
            record_audit(actor=actor, action="conversation.pinned" if pinned else "conversation.unpinned",
                         target_type="conversation", target_id=str(conversation.pk))
    return conversation


# The audit log's chain is one for the whole database: PostgreSQL writers of audit
# events take this transaction-level advisory lock (SQLite's write lock does the same).
AUDIT_CHAIN_LOCK = 0x6D75_6368  # "much"


def _project_of(conversation_id) -> int | None:
    try:
        cid = parse_conversation_id(conversation_id)
    except StoreError:
        return None
    return Conversation.everywhere.filter(pk=cid).values_list("project_id", flat=True).first()


def record_audit(*, actor: str, action: str, target_type: str = "", target_id: str = "", detail=None,
                 project_id=projects.CURRENT) -> AuditEvent:
    """Append one audit event, chained after the last one (conversations/chain.py).
    Callers pass ids, counts and hashes, never content. The event belongs to the current
    scope's project unless the caller names one (None: the server's own, such as a project
    created or a request filed for every project)."""
    detail = json.loads(chain.canonical_json(detail or {}))  # what is hashed is what is stored
    actor, target_id = str(actor)[:200], str(target_id)[:200]
    if project_id is projects.CURRENT:
        scope = projects.current()
        project_id = scope.project_id
        if scope.every:
            # An operator's process: an event about one conversation is its project's; any
            # other goes where the operator's writes go, into `default` (projects.for_write).
            found = _project_of(target_id) if target_type == "conversation" and target_id else None
            project_id = found if found is not None else projects.DEFAULT_PROJECT_ID
    # One chain for the whole database: its last event is read, and the new one written, past
    # the project fence (the event may be the server's own, or a project's the scope names).
    with projects.unfenced(), transaction.atomic():
        advisory_lock(AUDIT_CHAIN_LOCK)
        prev = AuditEvent.everywhere.order_by("-id").values_list("chain_hash", flat=True).first()
        at = timezone.now()
        body = chain.payload("audit", [at, actor, action, target_type, target_id, detail])
        salt, commitment, chain_hash = chain.seal(bytes(prev) if prev is not None else chain.GENESIS, body)
        return AuditEvent.everywhere.create(project_id=project_id, actor=actor, action=action,
                                            target_type=target_type, target_id=target_id, detail=detail, at=at,
                                            salt=salt, commitment=commitment, chain_hash=chain_hash)
