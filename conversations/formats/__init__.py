"""Transcript formats: a module per format, pure functions, no database.

    plan = parse(data, format="auto")     # → base.Plan (rows, checkpoints, children, entries, problems)

`detect` tells the format by content; when nothing fits, the FormatError names
every format tried. The importer (conversations.imports) writes a plan through
the store; the export module renders conversations back into these formats.
"""

from . import (
    aider,
    anthropic,
    claude_code,
    cline,
    codex,
    gemini,
    journal,
    memoryui,
    openai_chat,
    openai_responses,
    opencode,
)
from .base import FormatError, Plan, decode_text, loads, read_jsonl, split_lines

FORMATS = ("claude-code", "codex", "openai-chat", "openai-responses", "anthropic", "journal", "memoryui", "gemini",
           "aider", "opencode", "cline")
CHOICES = ("auto",) + FORMATS
# Formats whose originals are one JSON document rather than lines.
DOCUMENT_FORMATS = ("openai-chat", "openai-responses", "anthropic")
EXPORT_FORMATS = ("openai-chat", "anthropic", "claude-code", "memoryui")

# Sessions of one agent each, identified by their own session id (not their content), which
# grow between imports: importing one again appends what is new (importer.py).
SESSION_FORMATS = ("gemini", "aider", "opencode", "cline")
MODULES = {
    "claude-code": claude_code, "codex": codex, "openai-chat": openai_chat, "openai-responses": openai_responses,
    "anthropic": anthropic, "journal": journal, "memoryui": memoryui, "gemini": gemini, "aider": aider,
    "opencode": opencode, "cline": cline,
}

_LINE_DETECTORS = (
    ("memoryui", memoryui.detect),
    ("codex", codex.detect),
    ("claude-code", claude_code.detect),
    ("gemini", gemini.detect),
    ("journal", journal.detect),
)
_DOC_DETECTORS = (
    ("gemini", gemini.detect_document),
    ("opencode", opencode.detect_document),
    ("cline", cline.detect_document),
    ("anthropic", anthropic.detect_document),
    ("openai-responses", openai_responses.detect_document),
    ("openai-chat", openai_chat.detect_document),
)


def check_format(name) -> str:
    if name not in CHOICES:
        raise FormatError(f"unknown format {str(name)[:40]!r}; expected one of {', '.join(CHOICES)}", field="format")
    return name


def detect(data) -> str:
    """The format of `data` (text or bytes), by content."""
    text = decode_text(data)
    stripped = text.lstrip("\ufeff \t\r\n")
    if not stripped:
        raise FormatError("the file is empty", field="file")
    if aider.detect_text(stripped):
        return "aider"
    if stripped[0] == "[" or (stripped[0] == "{" and "\n{" not in stripped.rstrip()):
        name = _detect_document(stripped)
        if name is not None:
            return name
    head = []
    for number, line, last in split_lines(stripped):
        head.append((number, line, last))
        if len(head) >= 200:
            break
    lines = list(read_jsonl(head))
    if not any(ln.obj is not None for ln in lines):
        raise FormatError("no line of the file is JSON: tried " + ", ".join(FORMATS), field="file")
    for name, test in _LINE_DETECTORS:
        if test(lines):
            return name
    # A JSONL file of chat messages or Responses items, one per line.
    objs = [ln.obj for ln in lines if ln.obj is not None]
    for name, test in _DOC_DETECTORS[1:]:
        if test(objs):
            return name
    raise _nothing_fits("JSON lines")


def _detect_document(stripped: str) -> str | None:
    """The format of text that may be one JSON document; None when it does not parse as one."""
    try:
        doc = loads(stripped)
    except (ValueError, RecursionError):
        return None
    if doc is None:
        return None
    for name, test in _DOC_DETECTORS:
        if test(doc):
            return name
    if isinstance(doc, dict):  # one line of a JSONL format
        lines = list(read_jsonl(split_lines(stripped)))
        for name, test in _LINE_DETECTORS:
            if test(lines):
                return name
    raise _nothing_fits("a JSON document")


def _nothing_fits(what: str) -> FormatError:
    return FormatError(
        f"could not tell the format of this file ({what}): tried {', '.join(FORMATS)} and none fits; "
        "pass the format explicitly if it is one of them", field="format")


def parse(data, *, format: str = "auto", subject: str = "") -> Plan:
    """Parse a whole file (text or bytes) in one go; for previews, dry runs and tests.
    The importer streams large Claude Code files through the same placer."""
    format = check_format(format)
    if format == "auto":
        format = detect(data)
    return MODULES[format].parse(data, subject=subject)
