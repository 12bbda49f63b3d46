"""Turning stored messages into what a row of the audit pages shows.

Everything returned here is plain text; templates escape it as usual. Nothing
is marked safe: message content is untrusted model output.
"""

import functools
import json
from decimal import Decimal

from django import template
from django.apps import apps

from .. import prices, richtext
from ..message_schema import TextBlock

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


def _text_part(text: str, *, mono: bool = False, html=None) -> dict:
    """One block of text. `html`: its safe rendering (Markdown, highlighted code), if any."""
    long = len(text) > LONG_CHARS or text.count("\n") >= LONG_LINES
    preview = ""
    if long:
        first_lines = "\n".join(text.splitlines()[:4])
        preview = first_lines[:PREVIEW_CHARS].rstrip() + "…"
    return {"type": "text", "text": text, "long": long, "preview": preview, "mono": mono, "chars": len(text),
            "html": html}


def _prose(text: str) -> list[dict]:
    """Text a person or a model wrote: Markdown, with the harness's wrappers cut out as meta."""
    parts = []
    for tag, inner in richtext.split_wrappers(text):
        if tag == "text":
            parts.append(_text_part(inner, html=richtext.markdown(inner)))
        else:
            parts.append({"type": "harness", "tag": tag, "text": inner})
    return parts


def _code_part(text: str, lang: str = "json") -> dict:
    return _text_part(text, mono=True, html=richtext.code(text, lang))


def one_line(text: str, limit: int = 160) -> str:
    line = " ".join(text.split())
    return line[:limit].rstrip() + "…" if len(line) > limit else line


def _content_parts(content) -> list[dict]:
    if content is None:
        return []
    if isinstance(content, str):
        return _prose(content)
    parts = []
    for block in content:
        if isinstance(block, TextBlock):
            parts.extend(_prose(block.text))
        else:
            data = _pretty(block.model_dump(mode="json"))
            parts.append({"type": "block", "block_type": block.type, "json": data, "html": richtext.code(data, "json")})
    return parts


@register.filter
def display(item) -> dict:
    """The parts of one StoredMessage row, ready for `partials/message_body.html`."""
    if not item.ok:
        return {"broken": True, "error": item.error, "raw": _text_part(item.raw, mono=True)}
    model = item.message
    out = {"broken": False, "parts": [], "tool_calls": [], "tool_result": None, "meta": None}
    if hasattr(model, "text"):
        out["parts"] = _prose(model.text)
    elif model.kind == "tool":
        content = model.content
        if isinstance(content, str):
            html, is_json = richtext.json_or_text(content)
            text = _pretty_text(content)[0] if is_json else content
            parts = [_text_part(text, mono=True, html=html)]
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
        out["tool_calls"].append({"name": call.name, "id": call.id, "arguments": _code_part(args),
                                  "path": _path_of(call.arguments)})
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
        pretty = _pretty(meta)
        # Not highlighted: it sits closed on every row, and its spans would double a page's size.
        out["meta"] = {"summary": " · ".join(summary), "json": pretty}
        out["usage"] = _usage_figures(meta)
    texts = [p["text"] for p in out["parts"] if p.get("type") == "text"]
    out["preview"] = one_line(" ".join(texts) or " ".join(c["name"] for c in out["tool_calls"])
                              or " ".join(p.get("text", "") for p in out["parts"]))
    # A user turn that is nothing but the harness's wrappers: the harness talking, not a person.
    out["harness_only"] = bool(out["parts"]) and all(p.get("type") == "harness" for p in out["parts"])
    return out


PATH_KEYS = ("file_path", "path", "filename", "file")


def _path_of(arguments) -> str:
    """The file a call names in its arguments (read_file, Read, cat …): its result is that file."""
    if isinstance(arguments, dict):
        for key in PATH_KEYS:
            if isinstance(arguments.get(key), str):
                return arguments[key]
    return ""


@register.filter
def result_display(item, path) -> dict:
    """`display` of a tool result shown under its call: a file the call read is highlighted
    by the file's language (JSON output is highlighted as JSON either way)."""
    out = display(item)
    content = getattr(item.message, "content", None) if item.ok else None
    is_json = bool(out["parts"]) and out["parts"][0].get("text", "").lstrip().startswith(("{", "["))
    if path and isinstance(content, str) and not is_json:
        html = richtext.code_for_path(content, path)
        if html is not None:
            out["parts"] = [_text_part(content, mono=True, html=html)]
    return out


def _usage_figures(meta) -> dict | None:
    """Model, tokens, cache, latency and cost of one reply, for its head line."""
    usage = prices.usage_of(meta)
    if usage is None:
        return None
    cost = usage.cost
    return {"model": usage.model, "input": usage.input, "output": usage.output, "cache_read": usage.cache_read,
            "cache_write": usage.cache_write, "latency_ms": usage.latency_ms,
            "latency": (f"{usage.latency_ms / 1000:.1f} s" if usage.latency_ms and usage.latency_ms >= 1000
                        else f"{usage.latency_ms:.0f} ms" if usage.latency_ms is not None else ""),
            "cost": prices.money(cost) if cost is not None else ""}


@register.filter
def handoff_display(checkpoint) -> dict:
    return {"broken": False, "parts": [_text_part(checkpoint.summary, html=richtext.markdown(checkpoint.summary))],
            "tool_calls": [], "tool_result": None, "meta": None, "preview": one_line(checkpoint.summary)}


@register.filter
def get(mapping, key):
    """mapping[key], or None: a template's dictionary lookup by a variable key."""
    try:
        return mapping.get(key) if mapping else None
    except (AttributeError, TypeError):
        return None


def turns(items) -> dict:
    """Which tool results on a page belong to a reply on the same page.

    Answers {"results": {reply position: {call id: result row}}, "nested": {result
    position: reply position}}: the reply shows each result under its call, and the
    result's own row stays in its place as a one-line pointer (positions never move).
    """
    results, nested, open_calls = {}, {}, {}
    for item in items:
        if not getattr(item, "ok", False) or not hasattr(item, "position"):
            continue
        model = item.message
        if item.kind == "assistant":
            for call in getattr(model, "tool_calls", None) or []:
                open_calls[call.id] = item.position
        elif item.kind == "tool":
            reply = open_calls.pop(model.tool_call_id, None)
            if reply is not None:
                results.setdefault(reply, {})[model.tool_call_id] = item
                nested[item.position] = reply
    return {"results": results, "nested": nested}


@register.filter
def count_label(name: str) -> str:
    """A receipt's count by what it counts ("task state events"), not its table
    (`ledger_taskstateevent`); names that are not tables are said in words."""
    return _COUNT_LABELS.get(name) or _table_labels().get(name) or str(name).replace("_", " ")


_COUNT_LABELS = {"conversation_ids_not_found": "conversation ids not found", "fact_events": "fact history events",
                 "access_log": "fact access-log rows", "uploads": "uploads waiting for an import",
                 "imports_sourceentry": "transcript entries", "imports_importsource": "import sources",
                 "imports_importstage": "imports in progress", "frameworks_sessionsummary": "session summaries",
                 "access_conversationaccess": "access-log rows", "conversations_idempotencykey": "stored answers",
                 "langgraph_langgraphcheckpoint": "LangGraph checkpoints",
                 "langgraph_langgraphwrite": "LangGraph writes", "langgraph_langchainhistory": "LangChain histories"}


@functools.cache
def _table_labels() -> dict:
    return {model._meta.db_table: str(model._meta.verbose_name_plural) for model in apps.get_models()}


@register.filter
def dollars(micros) -> str:
    """Millionths of a dollar (conversations/usage_totals.py) as the pages write money."""
    return prices.money(Decimal(int(micros or 0)) / 1_000_000)


@register.filter
def grouped(number) -> str:
    """A count with thousands separated (35,850)."""
    try:
        return f"{int(number):,}"
    except (TypeError, ValueError):
        return str(number)
