"""Turning stored messages into what a row of the audit pages shows.

Everything returned here is plain text; templates escape it as usual. Nothing
is marked safe: message content is untrusted model output.
"""

import json

from django import template

from ..schema import TextBlock

register = template.Library()

# Content longer than this is collapsed behind an expander.
LONG_CHARS = 1200
LONG_LINES = 18
PREVIEW_CHARS = 280


def _pretty(value) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False)


def _pretty_text(text: str) -> tuple[str, bool]:
    """JSON text pretty-printed (and flagged as JSON), other text as it is."""
    stripped = text.strip()
    if stripped[:1] in ("{", "["):
        try:
            return _pretty(json.loads(stripped)), True
        except ValueError:
            pass
    return text, False


def _text_part(text: str, *, mono: bool = False) -> dict:
    long = len(text) > LONG_CHARS or text.count("\n") >= LONG_LINES
    preview = ""
    if long:
        first_lines = "\n".join(text.splitlines()[:4])
        preview = first_lines[:PREVIEW_CHARS].rstrip() + "…"
    return {"type": "text", "text": text, "long": long, "preview": preview, "mono": mono, "chars": len(text)}


def _content_parts(content) -> list[dict]:
    if content is None:
        return []
    if isinstance(content, str):
        return [_text_part(content)]
    parts = []
    for block in content:
        if isinstance(block, TextBlock):
            parts.append(_text_part(block.text))
        else:
            data = block.model_dump(mode="json")
            parts.append({"type": "block", "block_type": block.type, "json": _pretty(data)})
    return parts


@register.filter
def display(item) -> dict:
    """The parts of one StoredMessage row, ready for `partials/message_body.html`."""
    if not item.ok:
        return {"broken": True, "error": item.error, "raw": _text_part(item.raw, mono=True)}
    model = item.message
    out = {"broken": False, "parts": [], "tool_calls": [], "tool_result": None, "meta": None}
    if hasattr(model, "text"):
        out["parts"] = [_text_part(model.text)]
    elif model.kind == "tool":
        content = model.content
        if isinstance(content, str):
            text, is_json = _pretty_text(content)
            parts = [_text_part(text, mono=is_json)]
        else:
            parts = _content_parts(content)
        out["tool_result"] = {
            "name": model.name or "",
            "call_id": model.tool_call_id,
            "is_error": bool(model.is_error),
        }
        out["parts"] = parts
    else:
        out["parts"] = _content_parts(model.content)
    for call in getattr(model, "tool_calls", None) or []:
        if isinstance(call.arguments, str):
            args, _ = _pretty_text(call.arguments)
        else:
            args = _pretty(call.arguments)
        out["tool_calls"].append({"name": call.name, "id": call.id, "arguments": _text_part(args, mono=True)})
    if model.meta:
        meta = model.meta
        summary = []
        if isinstance(meta.get("model"), str):
            summary.append(meta["model"])
        usage = meta.get("usage")
        if isinstance(usage, dict):
            tokens = [f"{k.replace('_tokens', '')} {v}" for k, v in usage.items() if isinstance(v, int)]
            if tokens:
                summary.append(" · ".join(tokens) + " tokens")
        out["meta"] = {"summary": " · ".join(summary), "json": _pretty(meta)}
    return out


@register.filter
def handoff_display(checkpoint) -> dict:
    return {"broken": False, "parts": [_text_part(checkpoint.summary)], "tool_calls": [], "tool_result": None,
            "meta": None}
