"""Streamed exports of one conversation: JSON, JSONL and Markdown.

Used by the pages (`views.export`) and the API (`GET /api/v1/conversations/{id}/export`),
so nothing here knows about HTTP. Messages are read in keyset batches by position and
written out as they come: a million-message conversation exports in the memory of one
batch. The export is a snapshot of the rows that existed when it started (positions
below the `next_position` read up front), so an agent appending meanwhile cannot make
the file inconsistent with its own header. The conversation's task state, actions and
workspace snapshots (conversations/ledger) come with it: in the JSON header, as JSONL
lines marked `record`, and as a closing Markdown section.
"""

import itertools
import json
from collections.abc import Iterator
from dataclasses import dataclass

from . import markdown as md
from . import plugins
from .conversation_json import conversation_fields, lineage
from .errors import InvalidInput
from .message_schema import TextBlock
from .models import Checkpoint, Conversation, Message
from .reads import decode_row
from .streams import buffered

BATCH = 2000

FORMATS = {
    "json": ("application/json; charset=utf-8", "json"),
    "jsonl": ("application/x-ndjson; charset=utf-8", "jsonl"),
    "markdown": ("text/markdown; charset=utf-8", "md"),
}
# The formats agents write (conversations/imports/exports.py): the active view as an
# OpenAI or Anthropic request, the full record as a Claude Code or memoryui transcript.
AGENT_FORMATS = {
    "openai-chat": ("application/json; charset=utf-8", "openai-chat.json"),
    "anthropic": ("application/json; charset=utf-8", "anthropic.json"),
    "gemini": ("application/json; charset=utf-8", "gemini.json"),
    "claude-code": ("application/x-ndjson; charset=utf-8", "claude-code.jsonl"),
    "memoryui": ("application/x-ndjson; charset=utf-8", "memoryui.jsonl"),
}
FORMATS.update(AGENT_FORMATS)


def _proof_fields(salt, commitment, chain_hash) -> dict:
    """A row's place in its hash chain (conversations/chain.py), as hex, for offline verification."""
    def hex_of(value):
        return bytes(value).hex() if value is not None else ""

    return {"salt": hex_of(salt) or None, "commitment": hex_of(commitment), "chain_hash": hex_of(chain_hash)}


@dataclass
class ExportStream:
    chunks: Iterator[str]
    content_type: str
    filename: str


def export_stream(conversation_id, fmt: str) -> ExportStream:
    """An export of one conversation; raises NotFound or InvalidInput(field="format") at once,
    before anything is streamed, so callers can still answer with a clean 4xx."""
    if fmt not in FORMATS:
        raise InvalidInput(
            f"unknown export format {str(fmt)[:40]!r}; expected one of {', '.join(FORMATS)}", field="format"
        )
    conversation = Conversation.objects.get_live(conversation_id)
    content_type, ext = FORMATS[fmt]
    if fmt in AGENT_FORMATS:
        agent_exporter = plugins.agent_exporter.one()
        if agent_exporter is None:
            raise InvalidInput(f"the {fmt} export is not installed on this server", field="format")
        chunks = agent_exporter(conversation, fmt)
        # The first chunk now: a view with nothing to send is a clean 409 before anything streams.
        first = next(chunks, "")
        return ExportStream(chunks=buffered(itertools.chain([first], chunks)), content_type=content_type,
                            filename=f"conversation-{conversation.pk}.{ext}")
    writer = {"json": _json_chunks, "jsonl": jsonl_chunks, "markdown": markdown_chunks}[fmt]
    # Signed before anything streams, over the same snapshot the rows are read from.
    signer = plugins.export_head_signer.one()
    head = signer.sign(conversation) if signer else None
    return ExportStream(
        chunks=buffered(writer(conversation, head)),
        content_type=content_type,
        filename=f"conversation-{conversation.pk}.{ext}",
    )


def _rows(conversation: Conversation):
    """A StoredMessage for every row, in keyset batches."""
    for item, _ in _rows_with_proof(conversation):
        yield item


def _rows_with_proof(conversation: Conversation):
    """(StoredMessage, the row's place in its chain) for every row, in keyset batches."""
    last = conversation.next_position - 1
    after = -1
    while after < last:
        batch = list(
            Message.objects.page(conversation.pk, after=after, until=last, limit=BATCH).values_list(
                "position", "kind", "created_at", "content", "salt", "commitment", "chain_hash"
            )
        )
        if not batch:
            return
        for position, kind, created_at, raw, salt, commitment, chain_hash in batch:
            yield (decode_row(conversation.pk, position, kind, created_at, raw),
                   _proof_fields(salt, commitment, chain_hash))
        after = batch[-1][0]


# What every export says of its conversation (JSON, JSONL, Markdown's header, proof bundles).
EXPORTED = ("id", "title", "subject", "meta", "created_at", "last_activity_at", "pinned", "message_count",
            "parent_id", "forked_from_position", "parent_missing", "lineage")


def conversation_dict(conversation: Conversation) -> dict:
    return conversation_fields(conversation, EXPORTED)


def checkpoints_of(conversation: Conversation) -> list[Checkpoint]:
    return list(Checkpoint.objects.of(conversation.pk).order_by("message_position", "id"))


def checkpoint_dict(cp: Checkpoint) -> dict:
    return {
        "id": cp.pk,
        "message_position": cp.message_position,
        "summary": cp.summary,
        "created_at": cp.created_at.isoformat(),
        "created_by": cp.created_by,
        **_proof_fields(cp.salt, cp.commitment, cp.chain_hash),
    }


def _message_dict(item, proof: dict | None = None) -> dict:
    out = {"position": item.position, "kind": item.kind, "created_at": item.created_at.isoformat()}
    if item.ok:
        out["message"] = item.as_json()
    else:
        out["message"] = None
        out["raw"] = item.raw
        out["broken"] = True
    if proof is not None:
        # The stored text byte for byte, and the row's chain values: `memoryui-verify` recomputes
        # the commitment from them (conversations/chain.py).
        out["stored"] = item.raw
        out.update(proof)
    return out


def _dumps(value) -> str:
    return json.dumps(value, ensure_ascii=False)


def _json_chunks(conversation: Conversation, head: dict | None) -> Iterator[str]:
    header = {
        "conversation": conversation_dict(conversation),
        "checkpoints": [checkpoint_dict(cp) for cp in checkpoints_of(conversation)],
    }
    # the ledger's: task_state, task_state_events, actions, workspace_snapshots
    for section in plugins.export_sections.registered():
        header.update(section.header(conversation.pk))
    if head is not None:
        header["signed_head"] = head
    # The header is written whole and the messages array is opened by hand, so
    # the file is one JSON document without holding the messages in memory.
    yield _dumps(header)[:-1] + ', "messages": ['
    first = True
    for item, proof in _rows_with_proof(conversation):
        yield ("\n" if first else ",\n") + _dumps(_message_dict(item, proof))
        first = False
    yield "\n]}\n"


def jsonl_chunks(conversation: Conversation, head: dict | None) -> Iterator[str]:
    for item, proof in _rows_with_proof(conversation):
        yield _dumps(_message_dict(item, proof)) + "\n"
    for cp in checkpoints_of(conversation):
        yield _dumps({"record": "checkpoint", **checkpoint_dict(cp)}) + "\n"
    for section in plugins.export_sections.registered():
        yield from section.jsonl(conversation.pk)
    if head is not None:
        yield _dumps({"record": "signed_head", **head}) + "\n"


def _content_blocks(model) -> str:
    """Text content as a quote; non-text blocks named, not dumped."""
    content = getattr(model, "content", None)
    if content is None:
        return ""
    if isinstance(content, str):
        return md.quote(content)
    out = []
    for block in content:
        if isinstance(block, TextBlock):
            out.append(md.quote(block.text))
        else:
            out.append(f"*\\[{md.escape_line(block.type)} block\\]*\n")
    return "\n".join(out)


def _markdown_message(item) -> str:
    head = f"### #{item.position} · {md.escape_line(item.kind)} · {item.created_at.isoformat()}\n\n"
    if not item.ok:
        return head + "**Broken row: it no longer decodes.** Stored text:\n\n" + md.fence(item.raw) + "\n"
    model = item.message
    parts = []
    if hasattr(model, "text"):
        parts.append(md.quote(model.text))
    if model.kind == "tool":
        flag = " — **error**" if model.is_error else ""
        parts.append(f"Result of {md.code(model.name or '?')} (call {md.code(model.tool_call_id)}){flag}:\n")
        content = model.content
        if isinstance(content, str):
            parts.append(md.fence(_pretty_if_json(content)))
        else:
            parts.append(_content_blocks(model))
    else:
        body = _content_blocks(model)
        if body:
            parts.append(body)
    for call in getattr(model, "tool_calls", None) or []:
        args = call.arguments if isinstance(call.arguments, str) else json.dumps(call.arguments, indent=2,
                                                                                  ensure_ascii=False)
        parts.append(f"Tool call {md.code(call.name)} (id {md.code(call.id)}):\n\n" + md.fence(args, "json"))
    return head + "\n".join(parts) + "\n"


def _pretty_if_json(text: str) -> str:
    try:
        return json.dumps(json.loads(text), indent=2, ensure_ascii=False)
    except ValueError:
        return text


def markdown_chunks(conversation: Conversation, head: dict | None) -> Iterator[str]:
    checkpoints = checkpoints_of(conversation)
    latest = max(checkpoints, key=lambda cp: (cp.message_position, cp.pk)) if checkpoints else None
    by_position: dict[int, list[Checkpoint]] = {}
    for cp in checkpoints:
        by_position.setdefault(cp.message_position, []).append(cp)

    yield f"# {md.escape_line(conversation.title or 'Untitled conversation')}\n\n"
    yield f"- Conversation: `{conversation.pk}`\n"
    if conversation.subject:
        yield f"- Subject: {md.code(conversation.subject)}\n"
    yield f"- Messages: {conversation.next_position}\n"
    yield (f"- Created: {conversation.created_at.isoformat()}; "
           f"last activity: {conversation.last_activity_at.isoformat()}\n")
    ancestors = lineage(conversation)
    if conversation.parent_id:
        chain = " → ".join(f"{md.escape_line(a['title'] or a['id'])} (`{a['id']}`)" for a in ancestors)
        pruned = "parent pruned; " if conversation.parent_missing else ""
        yield (f"- Forked at position {conversation.forked_from_position} from `{conversation.parent_id}`"
               f" ({pruned}lineage: {chain or 'unavailable'})\n")
    if latest is not None:
        yield (f"- Fold: the latest checkpoint stands for positions 0–{latest.message_position}; "
               "the model receives its summary, then the messages after it.\n")
    if len(checkpoints) > 1:
        earlier = ", ".join(str(cp.message_position) for cp in checkpoints if cp is not latest)
        yield f"- Earlier checkpoints at positions: {earlier}\n"
    yield "\n---\n\n"
    for item in _rows(conversation):
        yield _markdown_message(item)
        for cp in by_position.get(item.position, ()):
            if cp is latest:
                yield (f"---\n\n## ▼ Fold: checkpoint at position {cp.message_position}\n\n"
                       f"Everything above is folded into this summary (created {cp.created_at.isoformat()}"
                       f"{' by ' + md.escape_line(cp.created_by) if cp.created_by else ''}); the model sees it, "
                       "then the messages below.\n\n" + md.quote(cp.summary) + "\n---\n\n")
            else:
                yield (f"*Earlier checkpoint at position {cp.message_position} (superseded by a later fold):*\n\n"
                       + md.quote(cp.summary) + "\n")
    for section in plugins.export_sections.registered():
        yield from section.markdown(conversation.pk)
    signer = plugins.export_head_signer.one()
    if head is not None and signer is not None:
        yield signer.markdown(head)
