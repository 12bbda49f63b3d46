"""Exports into the formats agents write: openai-chat, anthropic, claude-code, memoryui.

- `openai-chat` and `anthropic`: the active view (what the model receives next
  turn), handoff summary first, as a message array / a request body ready to send
  again. A conversation imported from that format and never folded or continued
  comes back as its original document.
- `claude-code`: the full record as a session transcript. An imported session
  gives back its original lines, byte for byte, then new entries for the rows
  appended since, chained to the last one.
- `memoryui`: the full record with checkpoints and lineage; importing it
  reproduces the conversation exactly.

Everything is read in keyset batches and written as it comes (the request bodies
of openai-chat and anthropic are built per message), so memory stays flat.
"""

import json

from conversations.formats import anthropic, claude_code, gemini_api, memoryui, openai_chat, openai_responses
from conversations.models import Checkpoint, Message
from conversations.reads import decode_row, list_active

from .models import ImportSource, SourceEntry

BATCH = 2000

_DOC_RENDER = {
    "openai-chat": openai_chat.render_document,
    "anthropic": anthropic.render_document,
    "openai-responses": openai_responses.render_document,
}


def _rows(conversation, after: int = -1):
    """Stored rows after `after`, decoded, in keyset batches (a snapshot up to the
    conversation's length when the export started)."""
    last = conversation.next_position - 1
    while after < last:
        batch = list(Message.objects.page(conversation.pk, after=after, until=last, limit=BATCH).values_list(
            "position", "kind", "created_at", "content"))
        if not batch:
            return
        for position, kind, created_at, raw in batch:
            yield decode_row(conversation.pk, position, kind, created_at, raw)
        after = batch[-1][0]


def _active(conversation):
    """(handoff summary or None, iterator of (kind, message dict)) for the active view."""
    view = list_active(conversation.pk, limit=1)
    checkpoint = view.checkpoint
    fold = checkpoint.message_position if checkpoint else -1

    def rows():
        for item in _rows(conversation, fold):
            if item.ok:
                yield item.kind, json.loads(item.raw)

    return (checkpoint.summary if checkpoint else None), rows()


def _source(conversation, format: str):
    return ImportSource.objects.filter(conversation_id=conversation.pk, format=format).order_by("pk").first()


def _raws(source):
    qs = SourceEntry.objects.filter(source_id=source.pk).order_by("seq").values_list("raw", "position")
    return qs.iterator(chunk_size=BATCH)


def _untouched_document(conversation, format: str):
    """The original document when the conversation is exactly what was imported from it."""
    source = _source(conversation, format)
    if source is None or Checkpoint.objects.of(conversation.pk).exists():
        return None
    last = SourceEntry.objects.filter(source_id=source.pk).order_by("-seq").values_list("position", flat=True).first()
    if last is None or last != conversation.next_position - 1:
        return None
    return _DOC_RENDER[format]([raw for raw, _ in _raws(source)])  # None: a response body, no request


def chunks(conversation, fmt: str):
    if fmt == "memoryui":
        checkpoints = Checkpoint.objects.of(conversation.pk).order_by("message_position", "id")
        yield from memoryui.render(conversation, _rows(conversation), list(checkpoints))
        return
    if fmt in ("openai-chat", "anthropic"):
        original = _untouched_document(conversation, fmt)
        if original is not None:
            yield original + "\n"
            return
        handoff, rows = _active(conversation)
        if fmt == "openai-chat":
            yield from openai_chat.render(rows, handoff)
        else:
            model = conversation.meta.get("model") if isinstance(conversation.meta.get("model"), str) else None
            yield from anthropic.render(rows, handoff, model=model)
        return
    if fmt == "gemini":
        handoff, rows = _active(conversation)
        yield from gemini_api.render(rows, handoff)
        return
    if fmt == "claude-code":
        source = _source(conversation, "claude-code")
        originals, covered, session_id = [], -1, None
        if source is not None:
            originals = (raw for raw, _ in _raws(source))
            covered = SourceEntry.objects.filter(source_id=source.pk, conversation_id=conversation.pk).order_by(
                "-seq").values_list("position", flat=True).first()
            covered = -1 if covered is None else covered
            session_id = source.source_key.split("/", 1)[0]
        checkpoints = list(Checkpoint.objects.of(conversation.pk).order_by("message_position", "id"))
        rows = ((item.position, item.kind, item.created_at, json.loads(item.raw))
                for item in _rows(conversation, covered) if item.ok)
        cwd = (conversation.meta.get("claude_code") or {}).get("cwd", "") if isinstance(
            conversation.meta.get("claude_code"), dict) else ""
        yield from claude_code.render(rows, checkpoints=checkpoints, originals=originals, session_id=session_id,
                                      covered=covered, cwd=cwd or "", seed=str(conversation.pk))
        return
    raise ValueError(fmt)
