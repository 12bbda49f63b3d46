"""Checking the record against its hash chains (conversations/chain.py), in the app.

`verify_conversation` walks one conversation's message and checkpoint chains;
`verify_erased` walks the commitments a deletion request kept of what it erased
(retention's ErasedRow); `verify_audit` walks the audit log's chain. `verify_all`
does all of them for `manage.py verify_log` and the verification page.

Rows are read with plain statements in keyset pages (no ORM per row): verifying a
million rows is bounded by SHA-256, not by Python objects.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import asdict, dataclass, field
from datetime import datetime

from django.apps import apps
from django.db import connection

from . import chain, projects
from .models import AuditEvent, Checkpoint, Conversation, Message

PAGE = 5000
_MSG, _CKPT, _AUDIT = (m._meta.db_table for m in (Message, Checkpoint, AuditEvent))

VERIFIED, ERASED, TAMPERED, UNCHECKED = "verified", "erased", "tampered", "unchecked"


@dataclass
class ChainState:
    """One conversation's (or one erased conversation's) verdict, as the page and JSON show it."""

    conversation_id: str
    title: str = ""
    state: str = VERIFIED  # verified | erased | tampered | unchecked (over the page's row budget)
    messages: int = 0
    checkpoints: int = 0
    ledger: int = 0  # task-state versions, actions and snapshots
    head_position: int | None = None
    head: str = ""  # hex chain hash of the last message row
    erased_positions: list[int] = field(default_factory=list)
    receipt_id: str = ""
    # Where a tampered conversation breaks: which chain, which position (or row id), why.
    chain: str = ""
    broken_at: int | None = None
    reason: str = ""

    def as_dict(self) -> dict:
        return asdict(self)

    def describe(self) -> str:
        if self.state == TAMPERED:
            return f"tampered at #{self.broken_at} ({self.chain}): {self.reason}"
        if self.state == ERASED:
            return (f"erased by deletion request {self.receipt_id}: {len(self.erased_positions)} rows, "
                    "chain verified without their content")
        return f"verified: {self.messages} messages, {self.checkpoints} checkpoints"


def _canonical_db_time(value) -> str:
    """A created_at as the database cursor returns it, in the payload's form."""
    if isinstance(value, datetime):
        return chain.canonical_time(value)
    # SQLite stores naive UTC text: "YYYY-MM-DD HH:MM:SS[.ffffff]".
    text = str(value)
    if len(text) == 19:
        text += ".000000"
    return text.replace(" ", "T", 1) + "Z"


def _db_id(value):
    return Conversation._meta.pk.get_db_prep_value(value, connection)


def _paged(sql: str, params: list, key_index: int, after: int | None = None):
    """Yield rows of `sql` (which ends in `> %s ORDER BY key LIMIT %s`) page by page, from after `after`."""
    after = -(2 ** 63) if after is None else after
    with connection.cursor() as cursor:
        while True:
            cursor.execute(sql, [*params, after, PAGE])
            rows = cursor.fetchall()
            yield from rows
            if len(rows) < PAGE:
                return
            after = rows[-1][key_index]


_MESSAGE_ROWS = (f"SELECT position, kind, content, created_at, salt, commitment, chain_hash FROM {_MSG} "
                 "WHERE conversation_id = %s AND position > %s ORDER BY position LIMIT %s")


def message_rows(conversation_id):
    """(position, kind, content, created_at, salt, commitment, chain_hash) of a conversation's
    messages, in order, read a page at a time: what verification reads, before any hashing."""
    return _paged(_MESSAGE_ROWS, [_db_id(conversation_id)], 0)


def message_records(conversation_id):
    """(position, "message", salt, commitment, chain_hash, payload) of a conversation, in order."""
    encode = chain.message_payload
    last_at, last_stamp = None, ""
    for position, kind, content, created_at, salt, commitment, chain_hash in message_rows(conversation_id):
        if created_at != last_at:  # a batch's rows share one time: convert it once
            last_at, last_stamp = created_at, _canonical_db_time(created_at)
        body = encode(position, kind, content, last_stamp) if salt is not None else None
        yield position, "message", salt, commitment, chain_hash, body


def chained_tables() -> list[tuple[str, str, type]]:
    """(name, record type, model) of every per-conversation chain besides the messages',
    in the order they are checked; the ledger's when its app is installed."""
    tables = [("checkpoints", "checkpoint", Checkpoint)]
    for name, record_type, model_name in (("task state", "state", "TaskStateEvent"), ("actions", "action", "Action"),
                                          ("snapshots", "snapshot", "WorkspaceSnapshot")):
        try:
            tables.append((name, record_type, apps.get_model("ledger", model_name)))
        except LookupError:
            pass
    return tables


def model_records(model, record_type: str, conversation_id):
    """(id, record type, salt, commitment, chain_hash, payload) of one conversation's rows of `model`, by id."""
    names = chain.FIELDS[record_type]
    columns = ", ".join(model._meta.get_field(n).column for n in names)
    times = [i for i, n in enumerate(names) if n == "created_at"]
    sql = (f"SELECT id, {columns}, salt, commitment, chain_hash FROM {model._meta.db_table} "
           "WHERE conversation_id = %s AND id > %s ORDER BY id LIMIT %s")
    for row in _paged(sql, [_db_id(conversation_id)], 0):
        pk, values, (salt, commitment, chain_hash) = row[0], list(row[1:-3]), row[-3:]
        for i in times:
            values[i] = _canonical_db_time(values[i])
        body = chain.payload(record_type, values) if salt is not None else None
        yield pk, record_type, salt, commitment, chain_hash, body


def audit_records(after_id: int | None = None, *, counted=None):
    """The audit chain's records from after `after_id`; `counted(project_id)` is called for each."""
    sql = (f"SELECT id, at, actor, action, target_type, target_id, detail, salt, commitment, chain_hash, project_id "
           f"FROM {_AUDIT} WHERE id > %s ORDER BY id LIMIT %s")
    rows = _paged(sql, [], 0, after=after_id)
    for pk, at, actor, action, target_type, target_id, detail, salt, commitment, chain_hash, project_id in rows:
        if counted is not None:
            counted(project_id)
        if isinstance(detail, str):
            detail = json.loads(detail)
        body = chain.payload("audit", [_canonical_db_time(at), actor, action, target_type, target_id, detail])
        yield pk, "audit", salt, commitment, chain_hash, body if salt is not None else None


def _break(state: ChainState, name: str, verdict: chain.Verdict) -> ChainState:
    state.state, state.chain, state.broken_at, state.reason = TAMPERED, name, verdict.broken_at, verdict.reason
    return state


def verify_conversation(conversation: Conversation) -> ChainState:
    """Walk a live conversation's message and checkpoint chains."""
    state = ChainState(conversation_id=str(conversation.pk), title=conversation.title)
    messages = chain.verify_rows(message_records(conversation.pk), record_type="message", first_position=0,
                                 expected_rows=conversation.next_position)
    state.messages = messages.rows
    state.head_position = messages.last_position
    state.head = messages.head.hex() if messages.rows else ""
    state.erased_positions = messages.erased
    if not messages.ok:
        return _break(state, "messages", messages)
    if messages.rows > conversation.next_position:
        state.state, state.chain, state.broken_at = TAMPERED, "messages", conversation.next_position
        state.reason = f"row #{conversation.next_position} lies beyond the conversation's last handed-out position"
        return state
    fork_point = _fork_point(conversation)
    if fork_point:
        return _break(state, "fork", fork_point)
    for name, record_type, model in chained_tables():
        verdict = chain.verify_rows(model_records(model, record_type, conversation.pk), record_type=record_type,
                                    first_position=None)
        if record_type == "checkpoint":
            state.checkpoints = verdict.rows
        else:
            state.ledger += verdict.rows
        if not verdict.ok:
            return _break(state, name, verdict)
    if messages.erased:
        state.state = ERASED
    return state


def _fork_point(conversation: Conversation) -> chain.Verdict | None:
    """A fork's row at its fork position must carry the chain hash the fork recorded of its parent."""
    recorded = conversation.forked_from_chain_hash
    position = conversation.forked_from_position
    if recorded is None or position is None:
        return None
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT chain_hash FROM {_MSG} WHERE conversation_id = %s AND position = %s",
                       [_db_id(conversation.pk), position])
        found = cursor.fetchone()
    if found is not None and found[0] is not None and bytes(found[0]) == bytes(recorded):
        return None
    return chain.Verdict().fail(position, f"the fork's row #{position} does not carry the parent's chain hash "
                                          "recorded when it was forked")


def verify_audit(*, last: int | None = None) -> chain.Verdict:
    """The audit log's chain; with `last`, only its last `last` events, linked from the chain
    hash of the event before them (the page; verify_log walks it all).

    The chain is one for the whole server, so it is walked past the project fence (each link
    needs the event before it, whichever project's); inside one project the verdict counts
    that project's events only, and shows nothing of the others' but their hashes' agreement."""
    scope = projects.current()
    own = 0

    def counted(project_id):
        nonlocal own
        own += scope.sees(project_id)

    genesis, after = chain.GENESIS, None
    with projects.unfenced():
        if last is not None:
            before = list(AuditEvent.everywhere.order_by("-id").values_list("id", "chain_hash")[last:last + 1])
            if before:
                after, prev = before[0]
                genesis = bytes(prev) if prev is not None else chain.GENESIS
        verdict = chain.verify_rows(audit_records(after, counted=counted), record_type="audit", genesis=genesis,
                                    first_position=None)
    verdict.rows = own
    return verdict


def audit_events_seen(*, last: int) -> int:
    """How many of the audit log's last `last` events are the current scope's. The chain runs
    through every project's events and is walked whole; a page of one project counts its own."""
    boundary = list(AuditEvent.everywhere.order_by("-id").values_list("id", flat=True)[last:last + 1])
    events = AuditEvent.objects.all()
    return (events.filter(id__gt=boundary[0]) if boundary else events).count()


def _erased_model():
    try:
        return apps.get_model("retention", "ErasedRow")
    except LookupError:
        return None


def verify_erased(*, limit: int | None = None) -> list[ChainState]:
    """The conversations deletion requests erased, each checked by the commitments kept of it."""
    model = _erased_model()
    if model is None:
        return []
    groups = (model.objects.values_list("receipt_id", "conversation_ref").distinct()
              .order_by("-receipt_id", "conversation_ref"))
    if limit is not None:
        groups = groups[:limit]
    states = []
    for receipt_id, ref in groups:
        state = ChainState(conversation_id=ref, state=ERASED, receipt_id=str(receipt_id))
        walks = [("messages", "message", 0)] + [(n, t, None) for n, t, _m in chained_tables()]
        for name, record_type, first in walks:
            rows = (model.objects.filter(receipt_id=receipt_id, conversation_ref=ref, record_type=record_type)
                    .order_by("position").values_list("position", "record_type", "commitment", "chain_hash"))
            verdict = chain.verify_rows(((p, t, None, c, h, None) for p, t, c, h in rows.iterator(chunk_size=PAGE)),
                                        record_type=record_type, first_position=first)
            if record_type == "message":
                state.messages, state.erased_positions = verdict.rows, verdict.erased
                state.head_position = verdict.last_position
                state.head = verdict.head.hex() if verdict.rows else ""
            elif record_type == "checkpoint":
                state.checkpoints = verdict.rows
            else:
                state.ledger += verdict.rows
            if not verdict.ok:
                _break(state, name, verdict)
                break
        states.append(state)
    return states


@dataclass
class Report:
    conversations: list[ChainState]
    erased: list[ChainState]
    audit: chain.Verdict

    @property
    def tampered(self) -> list[ChainState]:
        return [s for s in self.conversations + self.erased if s.state == TAMPERED]

    @property
    def ok(self) -> bool:
        return not self.tampered and self.audit.ok

    def as_dict(self) -> dict:
        audit = {"state": VERIFIED if self.audit.ok else TAMPERED, "rows": self.audit.rows,
                 "head": self.audit.head.hex() if self.audit.rows else "", "head_id": self.audit.last_position,
                 "broken_at": self.audit.broken_at, "reason": self.audit.reason}
        counts = {VERIFIED: 0, ERASED: 0, TAMPERED: 0, UNCHECKED: 0}
        for s in self.conversations:
            counts[s.state] += 1
        return {"ok": self.ok, "counts": {**counts, "erased_conversations": len(self.erased)},
                "audit_log": audit, "conversations": [s.as_dict() for s in self.conversations],
                "erased_conversations": [s.as_dict() for s in self.erased]}


def verify_all(*, conversation_ids=None, limit: int | None = None, row_budget: int | None = None,
               audit_last: int | None = None) -> Report:
    """Every live conversation (or those given), every erased one, and the audit log.
    For the page: `limit` takes the most recently active conversations only, `row_budget`
    leaves a conversation unchecked once its rows would pass it, `audit_last` walks only the
    audit log's last events."""
    qs = Conversation.objects.live().order_by("-last_activity_at", "-id")
    if conversation_ids is not None:
        qs = qs.filter(pk__in=[c if isinstance(c, uuid.UUID) else uuid.UUID(str(c)) for c in conversation_ids])
    if limit is not None:
        qs = qs[:limit]
    states = []
    for conversation in qs.iterator(chunk_size=500):
        if row_budget is not None and conversation.next_position > row_budget:
            states.append(ChainState(conversation_id=str(conversation.pk), title=conversation.title, state=UNCHECKED,
                                     messages=conversation.next_position))
            continue
        states.append(verify_conversation(conversation))
        if row_budget is not None:
            row_budget -= conversation.next_position
    erased = verify_erased(limit=limit) if conversation_ids is None else []
    return Report(conversations=states, erased=erased, audit=verify_audit(last=audit_last))
