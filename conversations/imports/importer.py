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
- A file that makes no message and no checkpoint (only metadata, usage or title
  lines) creates nothing and says so (`ImportResult.empty`, a problem naming the way
  to keep it anyway); `allow_empty` keeps it as an empty conversation. A memoryui
  export names its conversations itself, so an empty one in it is imported as it is.
- A dry run does all of it and rolls back.
"""

import hashlib
import json
import re
import time
from pathlib import Path

from django.db import transaction

from conversations import params
from conversations import store as conversation_store
from conversations.errors import Conflict, ImportInProgress, InvalidInput
from conversations.formats import SESSION_FORMATS, aider, check_format, claude_code, codex, detect, parse
from conversations.formats.base import (
    FormatError,
    Plan,
    Problem,
    loads,
    read_jsonl,
    split_lines,
    storable,
)
from conversations.models import Conversation
from conversations.store import EXTERNAL_ID_MAX, NAMESPACE_MAX

from . import new_session, session_files, store, subagents, textfile
from .apply import apply_new_plan, apply_plan
from .continuation import continue_plan, locked_source, stored_uuid
from .models import ImportSource, SourceEntry
from .result import ImportResult, merged
from .textfile import Text
from .writer import TARGET_SECONDS


class _DryRun(Exception):
    pass


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
    """A project key as a namespace: itself, or when longer than a namespace may be (Claude
    Code directory names of long paths are) its first NAMESPACE_MAX - 17 characters, a hyphen
    and 16 hex digits of a hash of the whole: NAMESPACE_MAX again. The client's SessionStore
    (memoryui_client.integrations.claude.namespace_for) uses the same rule, with the
    NAMESPACE_MAX tools/client_rules.py copies from the server's."""
    if len(project_key) <= NAMESPACE_MAX:
        return project_key
    digest = hashlib.sha256(project_key.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return project_key[:NAMESPACE_MAX - 1 - len(digest)] + "-" + digest


# ---- whole files -------------------------------------------------------------------------


EMPTY = ("the file holds no message and no checkpoint (only metadata); nothing was imported. Import it with "
         "allow_empty (--allow-empty, or the page's \"keep empty\" box) to keep it as an empty conversation")


def empty_result(plan_or_problems, *, format: str, key: str, namespace: str, dry_run: bool) -> ImportResult:
    """The answer for a file that makes no row: its problems, and that nothing was created."""
    problems = plan_or_problems.all_problems() if isinstance(plan_or_problems, Plan) else list(plan_or_problems)
    return ImportResult(format=format, source_key=key, namespace=namespace, dry_run=dry_run, empty=True,
                        problems=problems + [Problem(None, EMPTY)])


def _detected(text: Text) -> str:
    """The format of a file given as auto: from its first lines, or from the whole of it."""
    try:
        return detect(text.head())
    except FormatError:
        if len(text) <= textfile.HEAD:
            raise
        return detect(text.whole())  # e.g. a large pretty-printed JSON document


def import_text(data, *, format: str = "auto", namespace: str | None = None, subject: str = "", actor: str = "system",
                dry_run: bool = False, path: str | None = None, progress=None, finish=None,
                pin_older_than_retention: bool = False, allow_empty: bool = False,
                sidecar: dict | None = None) -> ImportResult:
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
    transaction, so an archive is never pruned once its period from receipt runs out.

    `allow_empty`: a file that makes no message is created as an empty conversation
    instead of being reported and left out (module docstring). `sidecar`: a Claude Code
    subagent's .meta.json, read with its transcript (it names the call that spawned it)."""
    format = check_format(format)
    if pin_older_than_retention and not dry_run:
        finish = _pinning(finish, actor=actor)
    text = data if isinstance(data, Text) else Text(data)
    format = _detected(text) if format == "auto" else format
    # A namespace the caller gives is an identifier (NFC, nothing invisible: 422 otherwise).
    namespace = (params.identifier(namespace, "namespace", max_length=NAMESPACE_MAX) if namespace is not None
                 else default_namespace(format, path).strip()[:NAMESPACE_MAX])
    subject = (subject or "").strip()
    kw = dict(format=format, namespace=namespace, subject=subject, actor=actor, path=path, dry_run=dry_run,
              finish=finish, allow_empty=allow_empty)
    if format in SESSION_FORMATS:
        return _import_sessions(text.whole(), **kw)
    if format == "claude-code":
        key = subagent_key(new_session.session_key(text), path)
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
                    meta={"distinct_from": distinct} if distinct else None, allow_empty=allow_empty,
                    sidecar=sidecar)
                if result.empty:
                    result.problems.append(Problem(None, EMPTY))
                    return result
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
            distinct["external_id"] = key[:EXTERNAL_ID_MAX]
        else:
            raise InvalidInput("this file reuses a session id that several other files already use; give it a "
                               "namespace of its own", field="namespace")
    return _import_text(text.whole(), **kw)


_AGENT_FILE = re.compile(r"(?:^|/)subagents/(?:.+/)?agent-([^/]+)\.jsonl$")


def subagent_key(key: str | None, path: str | None) -> str | None:
    """A subagent's file whose lines do not say they are a sidechain (newer versions, the Agent
    tool) is still its session's subagent: its path says so (<session>/subagents/…/agent-ID.jsonl)."""
    if key is None or not path or subagents.parse_key(key) is not None:
        return key
    found = _AGENT_FILE.search(path.replace("\\", "/"))
    return storable(f"{key}/subagents/agent-{found.group(1)}") if found else key


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
            mine.append(stored_uuid(obj["uuid"]))
    mine = _uuid_sequence(mine)
    common = 0
    for a, b in zip(stored, mine, strict=False):
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
            if (isinstance(obj, dict) and obj.get("type") in claude_code.LINKED
                    and isinstance(obj.get("sessionId"), str)):
                if obj.get("isSidechain") is True and isinstance(obj.get("agentId"), str):
                    return f"{obj['sessionId']}/subagents/agent-{obj['agentId']}"  # a subagent's own file
                return obj["sessionId"]
    if format == "codex":
        for ln in read_jsonl(split_lines(text)):
            kind, payload = codex.typed_record(ln.obj)
            if kind == "session_meta" and isinstance(payload, dict) and isinstance(payload.get("id"), str):
                return payload["id"]
    return None


def _import_sessions(text: str, *, format: str, namespace: str, subject: str, actor: str, path, dry_run: bool,
                     finish=None, allow_empty: bool = False) -> ImportResult:
    """A session file of another agent (session_files.py); an Aider history is a session file
    per session it holds, each imported on its own. The answer of several is rendered
    (`finish`) in a transaction of its own after the last."""
    pieces = aider.sessions(text) if format == "aider" else [(1, text)]
    if not pieces:
        pieces = [(1, text)]

    def empty(plan):
        return empty_result(plan, format=format, key=plan.source_key, namespace=namespace, dry_run=dry_run)

    one = len(pieces) == 1
    results = [session_files.import_session_file(
        piece, format=format, namespace=namespace, subject=subject, actor=actor, dry_run=dry_run,
        finish=finish if one else None, allow_empty=allow_empty, path=path, first_line=first_line,
        empty_result=empty) for first_line, piece in pieces]
    if one:
        return results[0]
    result = merged(results)
    if finish is not None and not dry_run and not result.unchanged and not result.empty:
        with transaction.atomic():
            finish(result)
    return result


def _import_text(text: str, *, format: str, namespace: str, subject: str, actor: str, path, dry_run: bool,
                 finish=None, key: str | None = None, allow_empty: bool = False):
    if key is None:
        key = _source_key_of(text, format) if format in ("claude-code", "codex") else None
    consumed = (len(text), _hash(text))
    if format == "memoryui":
        plan = parse(text, format=format, subject=subject)
        return apply_new_plan(plan, namespace=namespace, actor=actor, consumed=None, dry_run=dry_run, finish=finish)
    source = _found_source(format, namespace, key or "sha256:" + _hash(text))
    if source is None:
        plan = _parse_new(text, format=format, subject=subject, namespace=namespace)
        if key:
            plan.source_key = key
        if not allow_empty and not plan.rows and not plan.folds:
            return empty_result(plan, format=format, key=plan.source_key, namespace=namespace, dry_run=dry_run)
        return apply_new_plan(plan, namespace=namespace, actor=actor, consumed=consumed, dry_run=dry_run,
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
    source = locked_source(format, namespace, source.source_key)
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
    plan = continue_plan(source, lines, format=format, subject=subject, dedup=not grown)
    if not plan.entries:
        result.unchanged = True
        return result
    return apply_plan(plan, source, namespace=namespace, actor=actor, consumed=(len(text), _hash(text)), result=result)


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
            src = locked_source(format, namespace, source.source_key)
            if src is None or not Conversation.objects.live().filter(pk=src.conversation_id).exists():
                raise InvalidInput("this source's conversation was deleted meanwhile; import it again", field="source")
            if grown and src.consumed_chars != held:
                raise Conflict("another import of this file ran meanwhile; import it again", field="source",
                               code="conflict")
            plan = continue_plan(src, piece, format=format, subject=subject, dedup=not grown)
            if plan.entries:
                part = apply_plan(plan, src, namespace=namespace, actor=actor, consumed=consumed)
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
    meta = next((p for t, p in (codex.typed_record(ln.obj) for ln in lines if ln.obj is not None)
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
            kind, payload = codex.typed_record(json.loads(raw))
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


def import_path(path: str, **kw) -> ImportResult:
    """Import a file, mapped into memory rather than read into it."""
    text = Text.open(path)
    try:
        return import_text(text, path=path, **kw)
    finally:
        text.close()
