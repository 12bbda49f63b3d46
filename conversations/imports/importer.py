"""Import transcripts: parse (conversations.formats), then write through the stores.

Three doors call this module: `manage.py import`, the admin upload page, and
`POST /api/v1/imports` (whole files, or a batch of entries for one session key,
which is how the Claude Agent SDK's SessionStore appends).

- Idempotent: a source is identified by (format, namespace, session id or content
  hash) and recorded in `ImportSource`; importing it again creates nothing.
- Incremental: a file that has grown since (same beginning) appends only its new
  lines; a batch of entries appends only entries whose uuid is not stored yet.
- Each conversation is written atomically (a savepoint inside the import's
  transaction): a hard error in one imports nothing of it and is reported, the
  others are written. Soft problems (a line that is not JSON, an unknown type, a
  torn last line, a dangling parentUuid) are reported with their line numbers.
- A dry run does all of it and rolls back.
"""

import hashlib
import json
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from conversations import params
from conversations import store as conversation_store
from conversations.errors import Conflict, ImportInProgress, InvalidInput, NotFound, StoreError
from conversations.formats import FORMATS, check_format, claude_code, codex, detect, parse
from conversations.formats.base import (
    ConvPlan,
    FormatError,
    Plan,
    Problem,
    dumps,
    loads,
    read_jsonl,
    split_lines,
    storable,
)
from conversations.models import Conversation, Message
from conversations.retention.pruning import default_retention_days

from . import new_session, store, subagents, textfile
from .models import ImportSource, SourceEntry
from .textfile import Text
from .writer import TARGET_SECONDS, Writer


class _DryRun(Exception):
    pass


@dataclass
class ImportResult:
    format: str
    source_key: str
    namespace: str = ""
    dry_run: bool = False
    created: list[dict] = field(default_factory=list)
    appended: list[dict] = field(default_factory=list)
    failed: list[dict] = field(default_factory=list)
    # Conversations of the file that are here already (a memoryui export imported again): untouched.
    present: list[dict] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    entries_added: int = 0
    unchanged: bool = False
    conversation_id: str | None = None
    # The entries door: where the stream stands after the batch (entries stored, mtime).
    stream: dict | None = None
    # Write transactions it took, and how long the longest held the write lock (seconds).
    transactions: int = 0
    longest_transaction: float = 0.0
    # Subagents that came before this session and were linked to it now (subagents.py).
    linked: list[dict] = field(default_factory=list)
    # A file reusing the session id of another conversation without continuing it: imported
    # as a conversation of its own ({"session_id", "conversation_id", "external_id"}).
    distinct_from: dict | None = None
    # Ids of the conversations pinned on the caller's request (`pin_older_than_retention`).
    pinned: list[str] = field(default_factory=list)

    @property
    def older_than_retention(self) -> list[dict]:
        """The conversations written whose own dates are older than the retention period. A
        prune counts from when memoryui received them, so none is taken for that period
        (DESIGN invariant 14); after it they go unless pinned: the doors say so and offer to."""
        cutoff = timezone.now() - timedelta(days=default_retention_days())
        older = []
        for c in self.created + self.appended:
            at = c.get("last_activity_at")
            if at and datetime.fromisoformat(at) < cutoff:
                older.append({"id": c["id"], "title": c.get("title", ""), "last_activity_at": at})
        return older

    @property
    def messages(self) -> int:
        return sum(c["messages"] for c in self.created + self.appended)

    @property
    def checkpoints(self) -> int:
        return sum(c["checkpoints"] for c in self.created + self.appended)

    def as_dict(self) -> dict:
        return {
            "format": self.format, "source": self.source_key, "namespace": self.namespace, "dry_run": self.dry_run,
            "unchanged": self.unchanged, "conversation_id": self.conversation_id,
            "created": self.created, "appended": self.appended, "failed": self.failed, "present": self.present,
            "messages": self.messages, "checkpoints": self.checkpoints, "entries": self.entries_added,
            "problems": [p.as_dict() for p in self.problems], "linked": self.linked,
            "retention_days": default_retention_days(), "older_than_retention": self.older_than_retention,
            "pinned": self.pinned,
            **({"distinct_from": self.distinct_from} if self.distinct_from is not None else {}),
            **({"stream": self.stream} if self.stream is not None else {}),
        }


def _hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def default_namespace(format: str, path: str | None) -> str:
    """Claude Code: the project directory a session file lives in (what the SDK's
    SessionStore uses as project_key), so both doors find the same conversation."""
    if path and format == "claude-code":
        p = Path(path)
        parts = p.parts
        if "subagents" in parts:
            i = parts.index("subagents")
            # <project>/<session>/subagents/…: the session's namespace (its file's folder)
            return namespace_for_project(parts[i - 2]) if i >= 2 else format
        return namespace_for_project(p.parent.name) if p.parent.name else format
    return format


def namespace_for_project(project_key: str) -> str:
    """A project key as a namespace: itself, or when over 200 characters (Claude Code
    directory names of long paths are) its first 183 and a hash of the whole. The
    client's SessionStore (memoryui_client.integrations.claude.namespace_for) uses the
    same rule."""
    if len(project_key) <= 200:
        return project_key
    return project_key[:183] + "-" + hashlib.sha256(project_key.encode("utf-8", "surrogatepass")).hexdigest()[:16]


# ---- whole files -------------------------------------------------------------------------


def import_text(data, *, format: str = "auto", namespace: str | None = None, subject: str = "", actor: str = "system",
                dry_run: bool = False, path: str | None = None, progress=None, finish=None,
                pin_older_than_retention: bool = False) -> ImportResult:
    """Import one file (text, bytes, or a `textfile.Text`). Raises FormatError/InvalidInput
    for input that is not a transcript at all; everything else is reported in the result.
    `progress(done, total)`, if given, is told how many lines of a new Claude Code session
    are placed and written so far (the long case: the other formats are small documents).

    `finish(result)`, if given, is called with the complete result inside the import's
    last write transaction (never in a dry run, nor when nothing is written): a door
    renders its answer there, and records its idempotency key with it, so an answer
    that cannot be given (or a crash before it is) leaves that transaction undone.

    `pin_older_than_retention`: pin the conversations written whose own dates are older
    than the retention period (`ImportResult.older_than_retention`), in that same last
    transaction, so an archive is never pruned once its period from receipt runs out."""
    format = check_format(format)
    if pin_older_than_retention and not dry_run:
        finish = _pinning(finish, actor=actor)
    text = data if isinstance(data, Text) else Text(data)
    if format == "auto":
        try:
            format = detect(text.head())
        except FormatError:
            if len(text) <= textfile.HEAD:
                raise
            format = detect(text.whole())  # e.g. a large pretty-printed JSON document
    # A namespace the caller gives is an identifier (NFC, nothing invisible: 422 otherwise).
    namespace = (params.identifier(namespace, "namespace", max_length=200) if namespace is not None
                 else default_namespace(format, path).strip()[:200])
    subject = (subject or "").strip()
    kw = dict(format=format, namespace=namespace, subject=subject, actor=actor, path=path, dry_run=dry_run,
              finish=finish)
    if format == "claude-code":
        key = new_session.session_key(text)
        distinct = None
        for _copy in range(MAX_DISTINCT_COPIES):
            if key is None:
                break
            source = _found_source(format, namespace, key)
            if source is None:
                result = ImportResult(format=format, source_key=key, namespace=namespace, dry_run=dry_run,
                                      distinct_from=distinct)
                result = new_session.import_new_session(
                    text, key=key, namespace=namespace, subject=subject, actor=actor, dry_run=dry_run, result=result,
                    progress=progress, finish=_linking(finish, namespace=namespace, key=key, actor=actor),
                    meta={"distinct_from": distinct} if distinct else None)
                if dry_run and subagents.parse_key(key) is None:
                    result.linked = subagents.link_waiting(namespace=namespace, session=key, actor=actor, dry_run=True)
                return result
            if _unchanged(text, source):
                return ImportResult(format=format, source_key=source.source_key, namespace=namespace,
                                    dry_run=dry_run, unchanged=True, conversation_id=str(source.conversation_id))
            relation, diverges_at = _relation_to(text, source)
            if relation == "older":
                return ImportResult(format=format, source_key=source.source_key, namespace=namespace,
                                    dry_run=dry_run, unchanged=True, conversation_id=str(source.conversation_id))
            if relation == "continues":
                kw["key"] = key
                break
            # The same session id, other entries: a conversation of its own, under a key of its own.
            session = (distinct or {}).get("session_id") or key
            distinct = {"session_id": session, "conversation_id": str(source.conversation_id),
                        "external_id": None}
            key = f"{key.split('~', 1)[0]}~{_hash(diverges_at)[:12]}"
            distinct["external_id"] = key[:200]
        else:
            raise InvalidInput("this file reuses a session id that several other files already use; give it a "
                               "namespace of its own", field="namespace")
    return _import_text(text.whole(), **kw)


# How many other files may reuse one session id, each a conversation of its own.
MAX_DISTINCT_COPIES = 20


def _uuid_sequence(uuids) -> list[str]:
    seen, out = set(), []
    for u in uuids:
        if u not in seen:
            seen.add(u)
            out.append(u)
    return out


def _relation_to(text: Text, source: ImportSource) -> tuple[str, str]:
    """How a Claude Code file stands to the stream stored under its session id, by the
    order of their entries' uuids: "continues" (the stored ones are its beginning),
    "older" (it is the beginning of the stored ones: nothing new), or "diverged" (neither:
    another file that reuses the session id). Also the file's first uuid where they part."""
    stored = _uuid_sequence(SourceEntry.objects.filter(source_id=source.pk).exclude(uuid=None).order_by(
        "seq").values_list("uuid", flat=True).iterator(chunk_size=5000))
    mine = []
    for _number, line, _last in text.lines():
        try:
            obj = loads(line)
        except (ValueError, RecursionError):
            continue
        if isinstance(obj, dict) and isinstance(obj.get("uuid"), str) and obj["uuid"]:
            mine.append(_stored_uuid(obj["uuid"]))
    mine = _uuid_sequence(mine)
    common = 0
    for a, b in zip(stored, mine):
        if a != b:
            break
        common += 1
    if common == len(stored):
        return "continues", ""
    if common == len(mine):
        return "older", ""
    return "diverged", mine[common]


def _pinning(finish, *, actor: str):
    """`finish` preceded by pinning the conversations older than the retention period, in
    the import's last transaction (the answer it renders lists them as pinned)."""

    def pin_then_finish(result):
        for c in result.older_than_retention:
            conversation_store.set_pinned(conversation_id=c["id"], pinned=True, actor=actor)
            result.pinned.append(c["id"])
        if finish is not None:
            finish(result)

    return pin_then_finish


def _linking(finish, *, namespace: str, key: str, actor: str):
    """`finish` preceded by linking the subagents that came before this session, in the
    same transaction (nothing to link for a subagent's own transcript)."""
    if subagents.parse_key(key) is not None:
        return finish

    def link_then_finish(result):
        result.linked = subagents.link_waiting(namespace=namespace, session=key, actor=actor)
        if finish is not None:
            finish(result)

    return link_then_finish


def _unchanged(text: Text, source: ImportSource) -> bool:
    """The file is exactly what was imported before (read without decoding all of it)."""
    if not source.consumed_chars:
        return False
    for _line in text.lines(prefix_chars=source.consumed_chars):
        pass
    return text.chars == source.consumed_chars and text.prefix_sha256 == source.consumed_hash


def _found_source(format: str, namespace: str, key: str) -> ImportSource | None:
    """The source already imported under this identity, if its conversation is there. One
    whose import crashed is cleaned away; one being imported or deleted right now is an error."""
    source = ImportSource.objects.filter(format=format, namespace=namespace, source_key=key[:300]).first()
    if source is None or Conversation.objects.live().filter(pk=source.conversation_id).exists():
        return source
    staged = store.stale_stage(source.conversation_id)
    if staged is None and Conversation.objects.live().filter(pk=source.conversation_id).exists():
        return source  # its import published it between the two looks
    if staged is None:
        raise InvalidInput("this source's conversation is being deleted; import it again when the deletion has "
                           "finished", field="source")
    if not staged:
        raise ImportInProgress("this source is being imported by another request right now; try again when it "
                               "has finished", field="source")
    store.discard_abandoned(source.conversation_id)
    return None


def _source_key_of(text: str, format: str) -> str:
    """The identity of a whole file: its session id (as the databases hold it), or its hash."""
    key = _session_of(text, format)
    return storable(key) if key is not None else "sha256:" + _hash(text)


def _session_of(text: str, format: str) -> str | None:
    if format == "claude-code":
        for ln in read_jsonl(split_lines(text)):
            obj = ln.obj
            if isinstance(obj, dict) and obj.get("type") in claude_code.LINKED and isinstance(obj.get("sessionId"), str):
                if obj.get("isSidechain") is True and isinstance(obj.get("agentId"), str):
                    return f"{obj['sessionId']}/subagents/agent-{obj['agentId']}"  # a subagent's own file
                return obj["sessionId"]
    if format == "codex":
        for ln in read_jsonl(split_lines(text)):
            kind, payload = codex._record(ln.obj)
            if kind == "session_meta" and isinstance(payload, dict) and isinstance(payload.get("id"), str):
                return payload["id"]
    return None


def _import_text(text: str, *, format: str, namespace: str, subject: str, actor: str, path, dry_run: bool,
                 finish=None, key: str | None = None):
    if key is None:
        key = _source_key_of(text, format) if format in ("claude-code", "codex") else None
    consumed = (len(text), _hash(text))
    if format == "memoryui":
        plan = parse(text, format=format, subject=subject)
        return _apply_new(plan, namespace=namespace, actor=actor, consumed=None, dry_run=dry_run, finish=finish)
    source = _found_source(format, namespace, key or "sha256:" + _hash(text))
    if source is None:
        plan = _parse_new(text, format=format, subject=subject, namespace=namespace)
        if key:
            plan.source_key = key
        return _apply_new(plan, namespace=namespace, actor=actor, consumed=consumed, dry_run=dry_run,
                          finish=finish)
    if format == "claude-code" and not dry_run:
        return _import_more_in_slices(text, source, namespace=namespace, subject=subject, actor=actor,
                                      finish=_linking(finish, namespace=namespace, key=source.source_key,
                                                      actor=actor))
    # Seen before: what was added since is appended in one transaction (rolled back in a dry run).
    try:
        with transaction.atomic():
            result = _import_more(text, source, format=format, namespace=namespace, subject=subject, actor=actor)
            if format == "claude-code" and subagents.parse_key(source.source_key) is None:
                result.linked = subagents.link_waiting(namespace=namespace, session=source.source_key, actor=actor,
                                                       dry_run=dry_run)
            if dry_run:
                raise _DryRun()
            if finish is not None and not result.unchanged:
                finish(result)
    except _DryRun:
        result.dry_run = True
    return result


def _import_more(text: str, source: ImportSource, *, format: str, namespace: str, subject: str,
                 actor: str) -> ImportResult:
    source = _locked_source(format, namespace, source.source_key)
    if source is None or not Conversation.objects.live().filter(pk=source.conversation_id).exists():
        raise InvalidInput("this source's conversation was deleted meanwhile; import it again", field="source")
    # Seen before: only what has been added since.
    result = ImportResult(format=format, source_key=source.source_key, namespace=namespace,
                          conversation_id=str(source.conversation_id))
    grown = source.consumed_chars and len(text) >= source.consumed_chars and \
        _hash(text[: source.consumed_chars]) == source.consumed_hash
    if format not in ("claude-code", "codex", "journal") or (grown and len(text) == source.consumed_chars):
        result.unchanged = True
        return result
    start = source.consumed_chars if grown else 0
    first_line = text[:start].count("\n")
    lines = [ln for ln in read_jsonl(split_lines(text[start:]))]
    for ln in lines:
        ln.number += first_line
    if not grown:
        result.problems.append(Problem(None, "the file is not the one imported before with lines added; lines whose "
                                             "uuid is already stored are skipped"))
    plan = _continue(source, lines, format=format, subject=subject, dedup=not grown)
    if not plan.entries:
        result.unchanged = True
        return result
    return _apply(plan, source, namespace=namespace, actor=actor, consumed=(len(text), _hash(text)), result=result)


# Lines of a grown session file appended per transaction at first; then sized by how long
# each transaction took, as the writer sizes its chunks.
SLICE_LINES = 500


def _line_ends(text: str, start: int) -> list[int]:
    """Where each line (blank ones too) of text[start:] ends, after its newline."""
    ends, pos = [], start
    while pos < len(text):
        end = text.find("\n", pos)
        pos = len(text) if end == -1 else end + 1
        ends.append(pos)
    return ends


def _import_more_in_slices(text: str, source: ImportSource, *, namespace: str, subject: str,
                           actor: str, finish=None) -> ImportResult:
    """A grown Claude Code session: its new lines a slice per transaction, as the SessionStore
    door appends batches. Each transaction also records how much of the file the source
    now holds (length and hash of that prefix), so an import that stops halfway leaves a
    consistent prefix, and the next import continues after it."""
    format = "claude-code"
    result = ImportResult(format=format, source_key=source.source_key, namespace=namespace,
                          conversation_id=str(source.conversation_id))
    grown = bool(source.consumed_chars) and len(text) >= source.consumed_chars and \
        _hash(text[: source.consumed_chars]) == source.consumed_hash
    if grown and len(text) == source.consumed_chars:
        result.unchanged = True
        return result
    start = source.consumed_chars if grown else 0
    first_line = text[:start].count("\n")
    ends = _line_ends(text, start)
    lines = list(read_jsonl(split_lines(text[start:])))
    line_ends = [ends[ln.number - 1] for ln in lines]
    for ln in lines:
        ln.number += first_line
    if not grown:
        result.problems.append(Problem(None, "the file is not the one imported before with lines added; lines whose "
                                             "uuid is already stored are skipped"))
    hasher = hashlib.sha256(text[:start].encode("utf-8", "surrogatepass"))
    held, done_at, i, size = source.consumed_chars, start, 0, SLICE_LINES
    infos: dict[str, dict] = {}
    while i < len(lines):
        piece = lines[i:i + size]
        i += len(piece)
        end = len(text) if i >= len(lines) else line_ends[i - 1]
        hasher.update(text[done_at:end].encode("utf-8", "surrogatepass"))
        done_at = end
        # A file that is not the one imported before is recorded as consumed only at the end.
        consumed = (end, hasher.hexdigest()) if grown or i >= len(lines) else None
        started = time.monotonic()
        with transaction.atomic():
            src = _locked_source(format, namespace, source.source_key)
            if src is None or not Conversation.objects.live().filter(pk=src.conversation_id).exists():
                raise InvalidInput("this source's conversation was deleted meanwhile; import it again", field="source")
            if grown and src.consumed_chars != held:
                raise Conflict("another import of this file ran meanwhile; import it again", field="source",
                               code="conflict")
            plan = _continue(src, piece, format=format, subject=subject, dedup=not grown)
            if plan.entries:
                part = _apply(plan, src, namespace=namespace, actor=actor, consumed=consumed)
            else:
                part = ImportResult(format=format, source_key=src.source_key, problems=plan.all_problems())
                if consumed:
                    store.save_source(source=src, entries=src.entries, state=src.state, consumed_chars=consumed[0],
                                      consumed_hash=consumed[1])
            _merge(result, part, infos)
            result.transactions += 1
            if i >= len(lines):  # the last slice: the answer is given inside its transaction
                result.unchanged = not result.entries_added
                if finish is not None and not result.unchanged:
                    finish(result)
        held = consumed[0] if consumed else held
        seconds = time.monotonic() - started
        result.longest_transaction = max(result.longest_transaction, seconds)
        if seconds > TARGET_SECONDS:
            size = max(min(20, SLICE_LINES), int(size * TARGET_SECONDS / seconds))  # never above SLICE_LINES
        elif seconds < TARGET_SECONDS / 3:
            size = min(SLICE_LINES * 4, int(size * 1.5))
    result.unchanged = not result.entries_added
    return result


def _merge(result: ImportResult, part: ImportResult, infos: dict) -> None:
    """Add what one slice wrote to the whole import's result."""
    result.problems.extend(part.problems)
    result.failed.extend(part.failed)
    result.entries_added += part.entries_added
    for kind in ("created", "appended"):
        for info in getattr(part, kind):
            kept = infos.get(info["id"])
            if kept is None:
                infos[info["id"]] = dict(info)
                getattr(result, kind).append(infos[info["id"]])
            else:
                kept["messages"] += info["messages"]
                kept["checkpoints"] += info["checkpoints"]


def _parse_new(text: str, *, format: str, subject: str, namespace: str) -> Plan:
    if format != "codex":
        return parse(text, format=format, subject=subject)
    lines = list(read_jsonl(split_lines(text)))
    meta = next((p for t, p in (codex._record(ln.obj) for ln in lines if ln.obj is not None)
                 if t == "session_meta" and isinstance(p, dict)), {})
    parent_sid, relation = codex.lineage(meta)
    replayed, parent_id, parent_position = 0, None, None
    if parent_sid:
        parent = Conversation.objects.live().filter(namespace=namespace, external_id=parent_sid).first()
        psource = ImportSource.objects.filter(format="codex", namespace=namespace, source_key=parent_sid).first()
        if parent and psource:
            replayed, parent_position = _replayed(lines, psource)
            parent_id = str(parent.pk)
    plan = codex.parse_lines(lines, text, subject=subject, replayed=replayed, parent_id=parent_id,
                             parent_position=parent_position)
    if parent_sid and not parent_id:
        plan.problems.append(Problem(None, f"forked from Codex session {parent_sid[:80]}, which is not imported "
                                           "(import it first to record the lineage)"))
    return plan


def _replayed(lines, psource: ImportSource) -> tuple[int, int | None]:
    """How many leading response items of a child rollout are its parent's, and the
    parent's last position among them."""
    child = codex.response_payloads(lines)
    count, position = 0, None
    rows = SourceEntry.objects.filter(source_id=psource.pk).order_by("seq").values_list("raw", "position").iterator()
    for raw, pos in rows:
        try:
            kind, payload = codex._record(json.loads(raw))
        except ValueError:
            continue
        if kind != "response_item":
            continue
        if count < len(child) and child[count] == payload:
            count += 1
            position = pos if pos >= 0 else position
        else:
            break
    return count, position


def _existing_plans(source: ImportSource, plan: Plan) -> dict:
    """The conversations the stream already placed entries in, as plans to continue."""
    ids = dict(source.state.get("convs", {"main": str(source.conversation_id)}))
    live = dict(Conversation.objects.live().filter(pk__in=list(ids.values())).values_list("pk", "next_position"))
    for key, cid in ids.items():
        n = live.get(uuid.UUID(cid))
        if n is None:
            continue
        plan.conversations[key] = ConvPlan(key=key, existing_id=cid, base=n)
    return ids


def _stored_uuid(value: str) -> str:
    """An entry's uuid as its column holds it (store._entry_text)."""
    return storable(value)[:200]


def _lookup(source: ImportSource, ids: dict):
    by_id = {v: k for k, v in ids.items()}

    def lookup(uuids: set[str]) -> dict:
        out = {}
        asked: dict[str, list[str]] = {}  # as stored → as the entries name it
        for u in uuids:
            asked.setdefault(_stored_uuid(u), []).append(u)
        keys = list(asked)
        for i in range(0, len(keys), 500):
            chunk = keys[i:i + 500]
            rows = SourceEntry.objects.filter(source_id=source.pk, uuid__in=chunk).values_list(
                "uuid", "conversation_id", "position", "group")
            for u, cid, pos, group in rows:
                key = by_id.get(str(cid))
                if key is not None:
                    for named in asked.get(u, ()):
                        out[named] = claude_code.Known(key, pos, group)
            # Has each one a real child already (a second one is a rewind)?
            for (p,) in SourceEntry.objects.filter(source_id=source.pk, parent_uuid__in=chunk, real=True).values_list(
                    "parent_uuid").distinct():
                for named in asked.get(p, ()):
                    if named in out:
                        out[named].has_real_child = True
        return out

    return lookup


def _continue(source: ImportSource, lines, *, format: str, subject: str, dedup: bool) -> Plan:
    plan = Plan(format=format, source_key=source.source_key)
    ids = _existing_plans(source, plan)
    if "main" not in plan.conversations:
        raise NotFound("the conversation this source was imported into no longer exists", field="source")
    if dedup:
        uuids = [_stored_uuid(ln.obj["uuid"]) for ln in lines
                 if isinstance(ln.obj, dict) and isinstance(ln.obj.get("uuid"), str)]
        stored = set(SourceEntry.objects.filter(source_id=source.pk, uuid__in=uuids).values_list("uuid", flat=True))
        lines = [ln for ln in lines if isinstance(ln.obj, dict) and isinstance(ln.obj.get("uuid"), str)
                 and _stored_uuid(ln.obj["uuid"]) not in stored]
    if format == "claude-code":
        claude_code.feed_lines(plan, lines, state=source.state.get("placer"), lookup=_lookup(source, ids),
                               first_seq=source.entries, whole=False)
    else:
        sub = codex.parse_lines(lines, "", subject=subject) if format == "codex" else None
        if format == "journal":
            from conversations.formats import journal
            sub = journal.parse("\n".join(ln.text for ln in lines), subject=subject)
            for entry, ln in zip(sub.entries, lines):
                entry.line = ln.number
        main = plan.conversations["main"]
        offset = main.base
        for row in sub.conversations["main"].rows:
            main.rows.append(row)
        for fold in sub.conversations["main"].folds:
            fold.position += offset
            main.folds.append(fold)
        for entry in sub.entries:
            entry.seq += source.entries
            entry.position = entry.position + offset if entry.position >= 0 else offset - 1
            plan.entries.append(entry)
        plan.problems.extend(sub.problems)
        plan.state = dict(source.state.get("placer", {}))
    plan.state = {"placer": plan.state, "convs": ids}
    return plan


# ---- applying a plan ------------------------------------------------------------------


def _apply(plan: Plan, source: ImportSource | None, *, namespace: str, actor: str, consumed=None,
           result: ImportResult | None = None) -> ImportResult:
    result = result or ImportResult(format=plan.format, source_key=plan.source_key, namespace=namespace)
    result.problems.extend(plan.all_problems())
    ids: dict[str, str] = dict((plan.state or {}).get("convs", {})) if source else {}
    failed: set[str] = set()
    for conv in list(plan.conversations.values()):
        if any(p.hard for p in conv.problems):
            failed.add(conv.key)
            result.failed.append({"key": conv.key, "title": conv.title,
                                  "reason": "; ".join(str(p) for p in conv.problems if p.hard)})
            continue
        if conv.parent_key and (conv.parent_key in failed or conv.parent_key not in ids):
            failed.add(conv.key)
            result.failed.append({"key": conv.key, "title": conv.title, "reason": "its parent was not imported"})
            continue
        try:
            with transaction.atomic():
                info = _write_conversation(conv, plan, ids, namespace=namespace, actor=actor)
        except StoreError as exc:
            failed.add(conv.key)
            result.failed.append({"key": conv.key, "title": conv.title, "reason": exc.message})
            continue
        if info is None:
            continue
        ids[conv.key] = info["id"]
        (result.present if info.get("already_present") else result.appended if conv.existing_id
         else result.created).append(info)
    main_id = ids.get("main") or (next(iter(ids.values())) if ids else None)
    result.conversation_id = main_id
    if plan.format == "memoryui":
        return result
    if main_id is None:
        return result
    if source is None:
        source, created = store.get_or_create_source(format=plan.format, namespace=namespace,
                                                     source_key=plan.source_key, conversation_id=main_id)
        if not created:  # a concurrent import of the same source won the race
            raise ImportInProgress("this source is being imported by another request; try again", field="source")
    # Every original is kept, also those of a conversation that failed (on the stream's first one).
    entries = plan.entries
    result.entries_added = store.add_entries(source=source, entries=entries, conversation_ids=ids)
    placer = plan.state.get("placer", {}) if "convs" in (plan.state or {}) else (plan.state or {})
    state = {"placer": placer, "convs": ids}
    store.save_source(source=source, entries=source.entries + len(entries), state=state,
                      consumed_chars=consumed[0] if consumed else None, consumed_hash=consumed[1] if consumed else None)
    return result


def _apply_new(plan: Plan, *, namespace: str, actor: str, consumed, dry_run: bool, finish=None) -> ImportResult:
    """Write a plan whose conversations are all new, staged (writer.py): one conversation
    after another, each in chunks; a conversation that meets a hard error is discarded
    (nothing of it is kept) and the others are written; all become visible together."""
    result = ImportResult(format=plan.format, source_key=plan.source_key, namespace=namespace, dry_run=dry_run)
    result.problems.extend(plan.all_problems())
    writer = Writer(plan=plan, namespace=namespace, actor=actor, dry_run=dry_run)
    failed: set[str] = set()

    def fail(conv, reason):
        failed.add(conv.key)
        result.failed.append({"key": conv.key, "title": conv.title, "reason": reason})

    try:
        for conv in list(plan.conversations.values()):
            if any(p.hard for p in conv.problems):
                fail(conv, "; ".join(str(p) for p in conv.problems if p.hard))
                continue
            if conv.parent_key and (conv.parent_key in failed or conv.parent_key not in writer.ids):
                fail(conv, "its parent was not imported")
                continue
            if plan.format == "memoryui" and conv.id and Conversation.objects.filter(pk=conv.id).exists() and \
                    (dry_run or not store.discard_abandoned(conv.id)):
                if store.stale_stage(conv.id) is False:
                    # The same export imported by two requests at once: this one writes nothing of it.
                    raise ImportInProgress(f"conversation {conv.id} of this file is being imported by another "
                                           "request right now; try again when it has finished", field="source")
                result.present.append({"id": conv.id, "key": conv.key, "title": conv.title, "messages": 0,
                                       "checkpoints": 0, "relation": conv.relation, "parent_id": conv.parent_id,
                                       "already_present": True})
                continue
            try:
                _write_new_conversation(writer, conv)
            except StoreError as exc:
                writer.discard([conv.key])
                fail(conv, exc.message)
        written = [c for c in plan.conversations.values() if c.key in writer.ids]
        main_id = writer.ids.get("main") or (writer.ids[written[0].key] if written else None)
        source_fields = None
        if plan.format != "memoryui" and main_id is not None:
            writer.reserve_source(format=plan.format, source_key=plan.source_key)
            # Every original is kept, also those of a conversation that failed (on the stream's first one).
            for entry in plan.entries:
                writer.add_entry(entry)
                if writer.full():
                    writer.flush()
            source_fields = {"entries": len(plan.entries), "state": {"placer": plan.state, "convs": dict(writer.ids)}}
            if consumed:
                source_fields.update(consumed_chars=consumed[0], consumed_hash=consumed[1])
            result.entries_added = len(plan.entries)
        writer.flush()
        result.created.extend(writer.info(c) for c in plan.conversations.values() if c.key in writer.ids)
        result.conversation_id = main_id
        if result.present and not result.created and not result.failed:  # all of it is here already
            result.unchanged = True
            result.conversation_id = result.present[0]["id"]
        result.transactions, result.longest_transaction = writer.transactions, writer.longest
        writer.publish(source_fields=source_fields,
                       before_commit=(lambda: finish(result)) if finish is not None and writer.staged else None)
    except BaseException:
        writer.discard()
        raise
    return result


def _write_new_conversation(writer: Writer, conv: ConvPlan) -> None:
    writer.open(conv)
    rows, folds = conv.rows, conv.folds
    conv.rows, conv.folds = [], []
    i = 0
    while i < len(rows):
        size = writer.rows_per_chunk()
        conv.rows = rows[i:i + size]
        i += size
        writer.take(conv)
        if writer.full():
            writer.flush()
    conv.folds = folds
    writer.take(conv)
    writer.flush()


def _write_conversation(conv: ConvPlan, plan: Plan, ids: dict, *, namespace: str, actor: str) -> dict | None:
    first_at = next((r.at for r in conv.rows if r.at is not None), None)
    last_at = max((r.at for r in conv.rows if r.at is not None), default=None)
    parent_id = ids.get(conv.parent_key) if conv.parent_key else conv.parent_id
    if conv.existing_id:
        if not conv.rows and not conv.folds:
            return None
        cid = conv.existing_id
    elif plan.format == "memoryui":
        if conv.id and Conversation.objects.filter(pk=conv.id).exists():
            return {"id": conv.id, "key": conv.key, "title": conv.title, "messages": 0, "checkpoints": 0,
                    "relation": conv.relation, "parent_id": conv.parent_id, "already_present": True}
        c = store.create_imported_conversation(
            id=conv.id, title=conv.title, subject=conv.subject, meta=conv.meta, namespace=conv.namespace or "",
            external_id=conv.external_id, parent_id=conv.parent_id, parent_relation=conv.relation,
            forked_from_position=conv.parent_position, created_at=conv.created_at,
            last_activity_at=conv.last_activity_at, pinned=conv.pinned)
        cid = str(c.pk)
    elif conv.copy_prefix and parent_id is not None and conv.parent_position is not None:
        c = conversation_store.fork_conversation(conversation_id=parent_id, position=conv.parent_position,
                                                 title=conv.title or None)
        fields = {"meta": store._check_meta(storable({**c.meta, **conv.meta}))}
        if first_at is not None:  # the branch began with its first own row, as the transcript has it
            fields.update(created_at=first_at, last_activity_at=last_at or first_at)
        Conversation.objects.filter(pk=c.pk).update(**fields)
        cid = str(c.pk)
    else:
        external_id = plan.source_key[:200] if conv.key == "main" and not plan.source_key.startswith("sha256:") \
            else conv.external_id
        if external_id and Conversation.objects.filter(namespace=namespace, external_id=external_id).exists():
            raise InvalidInput(f"namespace {namespace!r} already has a conversation with external id "
                               f"{external_id[:80]!r} that was not imported from this source", field="external_id")
        c = store.create_imported_conversation(
            title=conv.title, subject=conv.subject, meta=conv.meta, namespace=namespace if conv.key == "main" else "",
            external_id=external_id if conv.key == "main" else None, parent_id=parent_id,
            parent_relation=conv.relation if parent_id else "", forked_from_position=conv.parent_position,
            created_at=first_at, last_activity_at=last_at or first_at)
        cid = str(c.pk)
    end = store.append_imported(conversation_id=cid, rows=conv.rows, expected_position=conv.base)
    for fold in conv.folds:
        store.checkpoint_imported(conversation_id=cid, position=fold.position, summary=fold.summary,
                                  created_at=fold.at, exact=fold.exact,
                                  created_by=fold.created_by if plan.format == "memoryui" else
                                  (fold.created_by or plan.format))
    if plan.format == "memoryui" and conv.last_activity_at:
        Conversation.objects.filter(pk=cid).update(last_activity_at=conv.last_activity_at)
    store.record_import(actor=actor, conversation_id=cid, detail={
        "format": plan.format, "messages": len(conv.rows), "checkpoints": len(conv.folds),
        "appended": bool(conv.existing_id), "next_position": end})
    own = conv.last_activity_at if plan.format == "memoryui" and conv.last_activity_at else last_at
    return {"id": cid, "key": conv.key, "title": conv.title, "messages": len(conv.rows),
            "checkpoints": len(conv.folds), "relation": conv.relation, "parent_id": parent_id,
            "parent_position": conv.parent_position, "last_activity_at": own.isoformat() if own else None}


# ---- entries, one batch at a time (the SessionStore door) --------------------------------


def append_entries(*, format: str, namespace: str, external_id: str, entries: list, subject: str = "",
                   actor: str = "system", title: str = "", expected_entries: int | None = None,
                   summary: dict | None = None, finish=None) -> ImportResult:
    """Append a batch of format-native entries to the stream `external_id` in `namespace`.

    For Claude Code an external id `SESSION/SUBPATH` is a subagent transcript, kept as
    a child conversation (relation "subagent") of the session `SESSION`. Entries whose
    uuid is already stored are skipped, so a retried batch writes nothing twice.

    `expected_entries`: the number of entries the caller believes are stored; another
    count is a Conflict (`entries_conflict`) and nothing is written. `summary`: the
    Claude Agent SDK's summary of a main session folded over this batch, kept verbatim
    in the same transaction (conversations.frameworks); it is kept only while it can
    describe every stored entry (the stream began with this door, or has one already).
    `finish(result)`: as for `import_text`, inside the batch's transaction."""
    if format != "claude-code":
        raise InvalidInput("entries can be appended for format claude-code; import whole files of "
                           f"{', '.join(f for f in FORMATS if f != 'claude-code')}", field="format")
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise InvalidInput("entries must be a list of JSON objects", field="entries")
    namespace = (namespace or "").strip()
    external_id = (external_id or "").strip()
    if not external_id:
        raise InvalidInput("external_id must not be blank", field="external_id")
    if len(external_id) > 200 or len(namespace) > 200:
        raise InvalidInput("namespace and external_id are at most 200 characters", field="external_id")
    try:
        with transaction.atomic():
            result = _append_entries(format=format, namespace=namespace, external_id=external_id, entries=entries,
                                     subject=subject, actor=actor, title=title, expected_entries=expected_entries,
                                     summary=summary)
            if finish is not None:
                finish(result)
            return result
    except IntegrityError:
        # Two first batches of one session at once: one of them created it; the other retries.
        raise ImportInProgress("another request is writing this session right now; send the batch again",
                               field="external_id") from None


def _append_entries(*, format, namespace, external_id, entries, subject, actor, title, expected_entries,
                    summary) -> ImportResult:
    result = ImportResult(format=format, source_key=external_id, namespace=namespace)
    session, _, subpath = external_id.partition("/")
    if summary is not None and subpath:
        raise InvalidInput("a summary is kept for a main session, not for a subagent transcript", field="summary")
    source = _locked_source(format, namespace, external_id)
    if source is not None and not Conversation.objects.live().filter(pk=source.conversation_id).exists():
        source = None
    stored_before = source.entries if source is not None else 0
    _expect_entries(expected_entries, stored_before)
    if source is None:
        conversation = _stream_conversation(namespace=namespace, external_id=external_id, session=session,
                                            subpath=subpath, subject=subject, title=title, entries=entries)
        # Another writer's first batch may have created the stream meanwhile (the store's
        # create-or-get waited for its commit): this batch continues it.
        source = _locked_source(format, namespace, external_id)
        if source is not None and source.conversation_id == conversation.pk:
            stored_before = source.entries
            _expect_entries(expected_entries, stored_before)
        else:
            source, _ = store.get_or_create_source(format=format, namespace=namespace, source_key=external_id,
                                                   conversation_id=conversation.pk)
            state = {"placer": {"subagent_stream": bool(subpath)}, "convs": {"main": str(conversation.pk)}}
            store.save_source(source=source, entries=source.entries, state=state)
    result.conversation_id = str(source.conversation_id)
    result.stream = _stream_state(source, summary_saved=False)
    if not entries:
        result.unchanged = True
        return result
    # Retries and overlapping batches: entries whose uuid is stored already are skipped.
    uuids = [_stored_uuid(e["uuid"]) for e in entries if isinstance(e.get("uuid"), str)]
    stored = set(SourceEntry.objects.filter(source_id=source.pk, uuid__in=uuids).values_list("uuid", flat=True))
    fresh, seen = [], set()
    for e in entries:
        u = _stored_uuid(e["uuid"]) if isinstance(e.get("uuid"), str) else None
        if u is not None and (u in stored or u in seen):
            continue
        if u is not None:
            seen.add(u)
        fresh.append(e)
    if not fresh:
        result.unchanged = True
        return result
    from conversations.formats.base import Line

    lines = [Line(number=source.entries + i + 1, text=dumps(e), obj=e) for i, e in enumerate(fresh)]
    plan = Plan(format=format, source_key=external_id)
    ids = _existing_plans(source, plan)
    claude_code.feed_lines(plan, lines, state=source.state.get("placer"), lookup=_lookup(source, ids),
                           first_seq=source.entries, whole=False, subagent_stream=bool(subpath))
    plan.state = {"placer": plan.state, "convs": ids}
    result = _apply(plan, source, namespace=namespace, actor=actor, result=result)
    if not subpath:
        result.linked = subagents.link_waiting(namespace=namespace, session=external_id, actor=actor)
    _name_stream(source, plan, fresh, subpath=subpath)
    saved = False
    if summary is not None:
        from conversations.frameworks import store as frameworks_store
        from conversations.frameworks.models import SessionSummary

        # A summary folded from this door's batches alone cannot describe entries that
        # another door stored before: then none is kept, and the SDK reads the session.
        if stored_before == 0 or SessionSummary.objects.filter(source_id=source.pk).exists():
            frameworks_store.save_summary(source=source, data=summary, at=source.updated_at)
            saved = True
    result.stream = _stream_state(source, summary_saved=saved)
    return result


def _expect_entries(expected: int | None, stored: int) -> None:
    if expected is not None and expected != stored:
        raise Conflict(f"the session has {stored} entries stored, the batch expected {expected}: "
                       "another writer appended meanwhile; read the session's state and send the batch again",
                       code="entries_conflict", field="expected_entries")


def _placeholder_title(session: str, subpath: str) -> str:
    if subpath:
        return f"Subagent {subpath.rsplit('/', 1)[-1].removeprefix('agent-')}"
    return f"Claude Code session {session[:8]}"


def _name_stream(source: ImportSource, plan: Plan, entries: list, *, subpath: str) -> None:
    """A stream's conversation starts with a placeholder title; its first prompt names it,
    and a title entry (`custom-title`, `ai-title`) renames it."""
    title = plan.conversations["main"].title.strip() if "main" in plan.conversations else ""
    titled = any(e.get("type") in ("custom-title", "ai-title") for e in entries)
    session = source.source_key.partition("/")[0]
    placeholder = _placeholder_title(session, subpath)
    # A subagent's sidecar (.meta.json, sent as agent_metadata) says what it was for.
    about = next((e for e in reversed(entries) if e.get("type") == "agent_metadata"), None) if subpath else None
    if about and isinstance(about.get("description"), str) and about["description"].strip():
        kind = f" ({about['agentType']})" if isinstance(about.get("agentType"), str) and about["agentType"] else ""
        title, titled = f"{placeholder}{kind}: {about['description'].strip()}", True
    if not title:
        return
    current = Conversation.objects.filter(pk=source.conversation_id).values_list("title", flat=True).first()
    if current is None or (current != placeholder and not titled):
        return
    if subpath and not titled and not title.startswith("Subagent "):
        title = f"{placeholder}: {title}"
    if title != current:
        store.retitle(conversation_id=source.conversation_id, title=title)


def _stream_state(source: ImportSource, *, summary_saved: bool) -> dict:
    return {"key": source.source_key, "entries": source.entries, "updated_ms": _ms(source.updated_at),
            "summary_saved": summary_saved}


def _ms(at) -> int:
    return int(at.timestamp() * 1000)


def _locked_source(format, namespace, key) -> ImportSource | None:
    qs = ImportSource.objects.filter(format=format, namespace=namespace, source_key=key[:300])
    if connection.vendor != "sqlite":  # SQLite: the IMMEDIATE transaction already holds the write lock
        qs = qs.select_for_update()
    return qs.first()


def _stream_conversation(*, namespace, external_id, session, subpath, subject, title, entries=()) -> Conversation:
    existing = Conversation.objects.live().filter(namespace=namespace, external_id=external_id).first()
    if existing is not None:
        return existing
    hidden = Conversation.objects.filter(namespace=namespace, external_id=external_id).first()
    if hidden is not None:
        staged = store.stale_stage(hidden.pk)
        if staged is None and not Conversation.objects.filter(pk=hidden.pk, deleting=True).exists():
            # Its file's import published it between the two looks: the batch must see that source.
            raise ImportInProgress("that session's file was imported just now; send the batch again",
                                   field="external_id")
        if staged is False:
            raise ImportInProgress("that session's file is being imported right now; send the batch again when it "
                                   "has finished", field="external_id")
        raise InvalidInput("that session is being deleted", field="external_id")
    # A subagent under the call that spawned it; one whose session is not here yet waits for
    # it, unlinked (the session's first batch links it: subagents.py), the same on every door.
    spawn = None
    if subpath:
        key = subagents.parse_key(external_id)
        agent = key.agent if key else subpath.rsplit("/", 1)[-1].removeprefix("agent-")
        spawn = subagents.spawn_point(namespace=namespace, session=session, agent=agent,
                                      prompt=subagents.first_prompt(entries))
    # The store's create-or-get, as the API door: two first batches at once get one conversation.
    conversation, _ = conversation_store.get_or_create_conversation(
        title=" ".join(storable(title or _placeholder_title(session, subpath)).split()), subject=storable(subject),
        namespace=namespace, external_id=external_id,
        parent_id=spawn.conversation_id if spawn else None, parent_relation="subagent" if spawn else "",
        forked_from_position=spawn.position if spawn else None,
        meta={"claude_code": {"session_id": session, **({"subpath": subpath} if subpath else {})}})
    return conversation


def load_entries(*, format: str, namespace: str, external_id: str) -> tuple[str, list] | None:
    """The entries of a stream, in the order appended, parsed (deep-equal to what came in)."""
    source = ImportSource.objects.filter(format=format, namespace=(namespace or "").strip(),
                                         source_key=(external_id or "").strip()).first()
    if source is None or not Conversation.objects.live().filter(pk=source.conversation_id).exists():
        return None
    raws = SourceEntry.objects.filter(source_id=source.pk).order_by("seq").values_list("raw", flat=True)
    return str(source.conversation_id), [json.loads(raw) for raw in raws.iterator(chunk_size=2000)]


def import_path(path: str, **kw) -> ImportResult:
    """Import a file, mapped into memory rather than read into it."""
    text = Text.open(path)
    try:
        return import_text(text, path=path, **kw)
    finally:
        text.close()


def conversation_originals(conversation_id, format: str):
    """(source, raw entries in order) of the stream that starts in this conversation, if it
    came in as `format`."""
    source = ImportSource.objects.filter(conversation_id=conversation_id, format=format).order_by("pk").first()
    if source is None:
        return None, []
    raws = SourceEntry.objects.filter(source_id=source.pk).order_by("seq").values_list("raw", "position")
    return source, raws


def messages_exist(conversation_id) -> bool:
    return Message.objects.filter(conversation_id=conversation_id).exists()
