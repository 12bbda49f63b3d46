"""Every write to task state, the actions ledger and workspace snapshots.

Plain keyword-only functions, one transaction each, as `conversations.store`:
they validate first, lock the conversation (PostgreSQL row lock; SQLite's
IMMEDIATE write lock), read the position the row sits at from the
conversation's counter — the caller never passes one — and insert. Nothing is
ever updated: a new task-state version, a retry, a failed attempt is one more
row. The database backs that up (migration 0002).

No separate audit event is written: each row records who (`actor`) and when,
and rows are never changed, so the ledger is its own audit trail.
"""

import json
import re
from dataclasses import dataclass

from django.db import IntegrityError, transaction
from django.utils import timezone

from conversations import chain, params
from conversations.errors import Conflict, InvalidInput
from conversations.message_schema import max_message_bytes
from conversations.models import Conversation
from conversations.store import lock_conversation, sealed, touch_conversation

from .models import (
    ALREADY_PERFORMED,
    FAILED,
    PERFORMED,
    REPORTED_STATUSES,
    Action,
    TaskStateEvent,
    WorkspaceSnapshot,
)

KEY_MAX = Action._meta.get_field("idempotency_key").max_length
NAME_MAX = Action._meta.get_field("name").max_length
REPO_MAX = WorkspaceSnapshot._meta.get_field("repo").max_length
REF_PREFIX = "refs/memoryui/"
# 40 hex digits (SHA-1 repositories) or 64 (SHA-256).
_COMMIT = re.compile(r"\A(?:[0-9a-f]{40}|[0-9a-f]{64})\Z")
_MAX_FIGURE = 2**31 - 1


# -- validation ---------------------------------------------------------------------


def _encode_json(value, *, field: str) -> str:
    """The one encoding of a JSON payload; reads return exactly this text."""
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError) as exc:
        raise InvalidInput(f"{field} must be plain JSON: {exc}", field=field) from None
    except RecursionError:
        raise InvalidInput(f"{field} is nested too deeply", field=field) from None
    try:
        params.check_tree(value, where=field)
    except InvalidInput as exc:  # the message names the path inside; the field is the payload
        raise InvalidInput(exc.message, field=field) from None
    if len(text.encode()) > max_message_bytes():
        raise InvalidInput(f"{field} is over the {max_message_bytes()}-byte limit", field=field)
    return text


def _text(value, *, field: str, max_length: int) -> str:
    if not isinstance(value, str):
        raise InvalidInput(f"{field} must be a string", field=field)
    if not value.strip():
        raise InvalidInput(f"{field} must not be blank", field=field)
    params.check_text(value, field)
    if len(value) > max_length:
        raise InvalidInput(f"{field} is {len(value)} characters; at most {max_length}", field=field)
    if any(ord(ch) < 32 for ch in value):
        raise InvalidInput(f"{field} must not contain control characters", field=field)
    return value


def _whole(value, *, field: str, minimum: int = 0, maximum: int = params.MAX_BIGINT) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInput(f"{field} must be an integer", field=field)
    if value < minimum or value > maximum:
        raise InvalidInput(f"{field} must be between {minimum} and {maximum}", field=field)
    return value


def _touch(conversation: Conversation, now) -> None:
    # Ledger activity is activity: age-based pruning must not take a ticket being worked on.
    touch_conversation(conversation.pk, at=now)


# -- task state ---------------------------------------------------------------------


@dataclass(frozen=True)
class StateWrite:
    event: TaskStateEvent | None  # the latest version after the write (None: never set)
    changed: bool


def _pointer(path: str, key: str) -> str:
    return f"{path}/{key.replace('~', '~0').replace('/', '~1')}"


def diff_state(old: dict, new: dict, path: str = "") -> list[dict]:
    """What changed, as JSON-Pointer paths: objects are compared key by key,
    anything else (lists included) as a whole."""
    changes = []
    for key, before in old.items():
        where = _pointer(path, key)
        if key not in new:
            changes.append({"op": "remove", "path": where, "old": before})
        elif isinstance(before, dict) and isinstance(new[key], dict):
            changes.extend(diff_state(before, new[key], where))
        elif before != new[key] or type(before) is not type(new[key]):
            changes.append({"op": "replace", "path": where, "old": before, "new": new[key]})
    for key, after in new.items():
        if key not in old:
            changes.append({"op": "add", "path": _pointer(path, key), "new": after})
    return changes


def set_state(*, conversation_id, state, expected_version, actor: str = "") -> StateWrite:
    """Replace the task state with `state` if it is still at `expected_version`.

    A mismatch raises Conflict (`version_conflict`) and writes nothing, so two
    writers cannot overwrite each other unseen. The new version is one event row:
    the whole state, what changed, who, when, and the conversation position.
    Sending the state it already has writes nothing and is no conflict, whatever
    `expected_version` says: the caller's wish holds, and a retried PUT is safe.
    """
    if not isinstance(state, dict):
        raise InvalidInput("state must be a JSON object", field="state")
    expected_version = _whole(expected_version, field="expected_version")
    text = _encode_json(state, field="state")
    state = json.loads(text)  # compare what will be stored (e.g. 1.0 and 1 are one number)
    with transaction.atomic():
        conversation = lock_conversation(conversation_id)
        current = TaskStateEvent.objects.current(conversation.pk)
        version = current.version if current else 0
        if current is not None and not diff_state(current.state_json, state):
            # Already so, whoever wrote it: a retry whose first answer was lost lands here.
            return StateWrite(event=current, changed=False)
        if expected_version != version:
            raise Conflict(
                f"expected the task state at version {expected_version}, but it is at version {version}: "
                f"another writer changed it; read it again and send your change with expected_version {version}",
                field="expected_version", code="version_conflict",
            )
        changes = diff_state(current.state_json if current else {}, state)
        if not changes:
            return StateWrite(event=current, changed=False)
        now = timezone.now()
        event = _create(
            TaskStateEvent, "state", conversation.pk, version=version + 1, position=conversation.next_position - 1,
            state=text, changes=_encode_json(changes, field="state"), actor=str(actor)[:200], created_at=now,
        )
        _touch(conversation, now)
    return StateWrite(event=event, changed=True)


# -- the actions ledger -------------------------------------------------------------


@dataclass(frozen=True)
class Recorded:
    status: str  # performed, failed or already_performed
    action: Action  # the entry that counts: the one that did it, or this attempt
    attempt: Action  # the row this call wrote

    @property
    def first_time(self) -> bool:
        return self.status != ALREADY_PERFORMED


def record_action(*, conversation_id, idempotency_key, name, arguments=None, result=None,
                  status=PERFORMED, actor: str = "") -> Recorded:
    """Record one attempt at a side effect, after the tool returned.

    The first `performed` entry for a business key in the conversation's
    namespace ("" is the project-wide one) of its project is the one that did it. Any later
    attempt with that key — a retry after a timeout, a forked or resumed
    conversation doing it again — is recorded as `already_performed`, pointing at
    that entry, and the answer carries the original. A `failed` attempt is one
    more entry; the next attempt points back at the first one.

    Under concurrency exactly one entry is `performed`: a unique index on
    (namespace, key) for performed entries decides between two writers, and the
    loser's attempt is recorded as a retry of the winner's. Another project's entries are
    never seen: its agents' business keys are theirs (the same key there is another action).
    """
    key = _text(idempotency_key, field="idempotency_key", max_length=KEY_MAX)
    name = _text(name, field="name", max_length=NAME_MAX)
    if status not in REPORTED_STATUSES:
        raise InvalidInput(f"status must be one of {', '.join(REPORTED_STATUSES)}", field="status")
    arguments_text = _encode_json({} if arguments is None else arguments, field="arguments")
    result_text = _encode_json(result, field="result")
    actor = str(actor)[:200]
    with transaction.atomic():
        conversation = lock_conversation(conversation_id)
        now = timezone.now()
        row = dict(position=conversation.next_position - 1, project_id=conversation.project_id,
                   namespace=conversation.namespace, idempotency_key=key, name=name, arguments=arguments_text,
                   result=result_text, actor=actor, created_at=now)
        done = Action.objects.performed(conversation.namespace, key)
        if done is None and status == PERFORMED:
            first = Action.objects.with_key(conversation.namespace, key).first()
            try:
                with transaction.atomic():  # a savepoint: the unique index may refuse us
                    action = _create(Action, "action", conversation.pk, status=PERFORMED,
                                     original_id=first.id if first else None, **row)
            except IntegrityError:
                # Another conversation of the namespace committed this key first.
                done = Action.objects.performed(conversation.namespace, key)
                if done is None:
                    raise
            else:
                _touch(conversation, now)
                return Recorded(PERFORMED, action, action)
        if done is not None:
            attempt = _create(Action, "action", conversation.pk, status=ALREADY_PERFORMED, original_id=done.id, **row)
            _touch(conversation, now)
            return Recorded(ALREADY_PERFORMED, done, attempt)
        first = Action.objects.with_key(conversation.namespace, key).first()
        attempt = _create(Action, "action", conversation.pk, status=FAILED, original_id=first.id if first else None,
                          **row)
        _touch(conversation, now)
    return Recorded(FAILED, attempt, attempt)


# -- workspace snapshots ------------------------------------------------------------


@dataclass(frozen=True)
class SnapshotWrite:
    snapshot: WorkspaceSnapshot
    created: bool


def snapshot_ref(conversation_id, position: int) -> str:
    return f"{REF_PREFIX}{conversation_id}/{position}"


def record_snapshot(*, conversation_id, position, repo, commit, ref=None, base="", files_changed=0,
                    insertions=0, deletions=0, actor: str = "") -> SnapshotWrite:
    """Record the workspace snapshot a harness took for the turn at `position`.

    `position` may be the next one (the turn about to be appended). One record
    per (conversation, position, repository): sending the same one again is a
    no-op that returns it; a different commit for that turn is a Conflict
    (`snapshot_exists`), since records are never replaced.
    """
    position = _whole(position, field="position")
    repo = _text(repo, field="repo", max_length=REPO_MAX)
    if not isinstance(commit, str) or not _COMMIT.match(commit):
        raise InvalidInput("commit must be a full git object id (40 or 64 lowercase hex digits)", field="commit")
    if base not in ("", None) and (not isinstance(base, str) or not _COMMIT.match(base)):
        raise InvalidInput("base must be a full git object id (40 or 64 lowercase hex digits)", field="base")
    figures = {name: _whole(value, field=name, maximum=_MAX_FIGURE) for name, value in
               (("files_changed", files_changed), ("insertions", insertions), ("deletions", deletions))}
    with transaction.atomic():
        conversation = lock_conversation(conversation_id)
        if position > conversation.next_position:
            raise InvalidInput(
                f"position {position} is out of range: a snapshot is taken for a turn up to the next position, "
                f"{conversation.next_position}", field="position",
            )
        expected_ref = snapshot_ref(conversation.pk, position)
        if ref is not None and ref != expected_ref:
            raise InvalidInput(f"ref must be {expected_ref} (refs/memoryui/<conversation>/<position>)", field="ref")
        existing = WorkspaceSnapshot.objects.of(conversation.pk).filter(position=position, repo=repo).first()
        if existing is not None:
            if existing.commit_sha == commit:
                return SnapshotWrite(existing, created=False)
            raise Conflict(
                f"the turn at position {position} already has a snapshot of {repo} (commit {existing.commit_sha}); "
                "snapshot records are never replaced", field="commit", code="snapshot_exists",
            )
        now = timezone.now()
        snapshot = _create(
            WorkspaceSnapshot, "snapshot", conversation.pk, position=position, repo=repo, ref=expected_ref,
            commit_sha=commit, base_sha=base or "", actor=str(actor)[:200], created_at=now, **figures,
        )
        _touch(conversation, now)
    return SnapshotWrite(snapshot, created=True)


# -- forks and governance -----------------------------------------------------------

def copy_into_fork(*, parent_id, child_id, position: int) -> dict:
    """Give a fork the ledger as of its fork position, inside fork_conversation's
    transaction: the task-state versions, actions and snapshots recorded at or
    before `position`, with the same bytes, times and versions. A copied action
    keeps the id of the entry first written (`inherited_from`), so a retry in the
    fork finds it even after the parent is pruned, and reconciliation counts it once.
    """
    # Each copied row is sealed again into the fork's own chain for its table (the fork's
    # ledger chains start at GENESIS): same bytes, times and versions, a new salt.
    versions = _copy(TaskStateEvent, "state", parent_id, child_id, position, order="version")
    actions = _copy(Action, "action", parent_id, child_id, position, order="id", inherited=True)
    snapshots = _copy(WorkspaceSnapshot, "snapshot", parent_id, child_id, position, order="id")
    return {"task_state_events": versions, "actions": actions, "workspace_snapshots": snapshots}


def on_fork_copied(sender, *, child_id, parent_id, upto, **kwargs) -> None:
    """`plugins.fork_copied`'s receiver (registered in LedgerConfig.ready)."""
    copy_into_fork(parent_id=parent_id, child_id=child_id, position=upto)


def _create(model, record_type: str, conversation_id, **fields):
    """Insert a ledger row sealed into its conversation's chain for that table (conversations/chain.py)."""
    values = {name: fields[name] for name in chain.FIELDS[record_type]}
    return model.objects.create(conversation_id=conversation_id, **fields,
                                **sealed(model, record_type, conversation_id, values))


_NOT_COPIED = {"id", "conversation", "salt", "commitment", "chain_hash"}


def _copy(model, record_type: str, parent_id, child_id, position: int, *, order: str, inherited: bool = False) -> int:
    names = [f.attname for f in model._meta.concrete_fields if f.name not in _NOT_COPIED]
    copied = 0
    for row in model.objects.filter(conversation_id=parent_id, position__lte=position).order_by(order).values(
            "id", *names).iterator(chunk_size=500):
        pk = row.pop("id")
        if inherited:
            # A copied action keeps the id of the entry first written (see copy_into_fork).
            row["inherited_from"] = row["inherited_from"] if row["inherited_from"] is not None else pk
        _create(model, record_type, child_id, **row)
        copied += 1
    return copied


def counts_for(conversation_ids) -> dict:
    """Rows the ledger holds for these conversations, for deletion previews and receipts."""
    ids = list(conversation_ids)
    return {
        "task_state_events": TaskStateEvent.objects.filter(conversation_id__in=ids).count(),
        "actions": Action.objects.filter(conversation_id__in=ids).count(),
        "workspace_snapshots": WorkspaceSnapshot.objects.filter(conversation_id__in=ids).count(),
    }
