"""What every format module shares: the plan a parse produces, and reading lines.

A parser never touches the database. It reads lines (or one JSON document) and
returns a `Plan`: the conversations to create or continue, the rows to append
to each (already validated and encoded by `conversations.message_schema`, so the store
writes exactly what the plan says and positions are known in advance), the
checkpoints ("folds"), the original entries kept beside the rows, and the
problems found, each with its line number and reason.

The importer (`conversations.imports.importer`) applies a plan through the
store. Nothing here knows about HTTP or the ORM.
"""

import hashlib
import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime

from .. import params
from ..errors import InvalidMessage, StoreError
from ..message_schema import encode_message


class FormatError(StoreError):
    """The input is not this format at all (or no format fits it)."""

    code = "unknown_format"
    status = 422


@dataclass
class Problem:
    line: int | None
    reason: str
    # A hard problem stops its conversation from being imported; a soft one is reported.
    hard: bool = False

    def as_dict(self) -> dict:
        return {"line": self.line, "reason": self.reason, "hard": self.hard}

    def __str__(self) -> str:
        where = f"line {self.line}: " if self.line is not None else ""
        return f"{where}{self.reason}"


@dataclass(slots=True)
class Row:
    """One message, encoded once: what the store will insert at the next position."""

    kind: str
    text: str
    at: datetime | None
    entry: int | None = None  # seq of the original entry it came from

    @property
    def message(self) -> dict:
        return json.loads(self.text)


@dataclass
class Fold:
    """A checkpoint: `summary` stands in for positions 0..position."""

    position: int
    summary: str
    at: datetime | None = None
    created_by: str = ""
    # memoryui's own export: the fold stays where it was, even inside a call block (a
    # compaction of another format moves off one: conversations/calls.py).
    exact: bool = False


@dataclass(slots=True)
class Entry:
    """An original object of the format, kept byte for byte beside the rows."""

    seq: int
    line: int | None
    raw: str
    conv: str = "main"  # key of the conversation it was placed in
    position: int = -1  # the last position of that conversation once it was placed
    uuid: str | None = None
    parent_uuid: str | None = None
    group: str | None = None  # e.g. an API response id shared by several entries
    real: bool = False  # a turn of its own (a rewind is a second real child)


@dataclass
class ConvPlan:
    """A conversation to create (or continue) and what to append to it."""

    key: str
    title: str = ""
    subject: str = ""
    meta: dict = field(default_factory=dict)
    # Continue this stored conversation (incremental import) instead of creating one.
    existing_id: str | None = None
    # For the memoryui format: reproduce these exactly.
    id: str | None = None
    created_at: datetime | None = None
    last_activity_at: datetime | None = None
    external_id: str | None = None
    namespace: str | None = None
    pinned: bool = False
    expected_count: int | None = None
    parent_key: str | None = None  # another ConvPlan of the same plan
    parent_id: str | None = None  # a stored conversation
    parent_position: int | None = None
    relation: str = ""  # "fork" (copies rows 0..parent_position) or "subagent"
    copy_prefix: bool = False
    base: int = 0  # rows that exist before `rows` (stored, or copied from the parent)
    rows: list[Row] = field(default_factory=list)
    folds: list[Fold] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)

    @property
    def next_position(self) -> int:
        return self.base + len(self.rows)

    @property
    def last_position(self) -> int:
        return self.next_position - 1


@dataclass
class Plan:
    format: str
    source_key: str = ""  # session id, or a content hash
    conversations: dict[str, ConvPlan] = field(default_factory=dict)
    entries: list[Entry] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    state: dict = field(default_factory=dict)  # what an incremental import resumes from

    def conversation(self, key: str) -> ConvPlan:
        return self.conversations[key]

    def add_main(self, *, subject: str, **fields) -> ConvPlan:
        """The one conversation of a file that holds one ("main"), added to the plan."""
        conv = ConvPlan(key="main", subject=subject, **fields)
        self.conversations["main"] = conv
        return conv

    @property
    def rows(self) -> int:
        return sum(len(c.rows) for c in self.conversations.values())

    @property
    def folds(self) -> int:
        return sum(len(c.folds) for c in self.conversations.values())

    def all_problems(self) -> list[Problem]:
        out = list(self.problems)
        for c in self.conversations.values():
            out.extend(c.problems)
        return sorted(out, key=lambda p: (p.line is None, p.line or 0))

    def summary(self) -> dict:
        return {
            "format": self.format,
            "source": self.source_key,
            "conversations": [
                {"key": c.key, "title": c.title, "messages": len(c.rows), "checkpoints": len(c.folds),
                 "relation": c.relation, "parent": c.parent_key or c.parent_id, "parent_position": c.parent_position}
                for c in self.conversations.values()
            ],
            "messages": self.rows,
            "checkpoints": self.folds,
            "entries": len(self.entries),
            "problems": [p.as_dict() for p in self.all_problems()],
        }


# ---- reading ------------------------------------------------------------------------


@dataclass
class Line:
    number: int  # 1-based
    text: str
    obj: object = None
    error: str = ""


# A \uD800-\uDFFF escape: how JSON text carries half a surrogate pair (or, paired, a
# character beyond the BMP). A cheap test before the exact one.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


class UnpairedSurrogate(FormatError):
    """A transcript value holding half a surrogate pair: not Unicode, so no database can
    store it as text and no answer can be encoded with it. The whole import is refused
    before anything is written (a door that stored it would fail on its own answer)."""

    code = "invalid_input"


def loads(text):
    """Strict JSON (the one reader the API's bodies go through as well), refusing a value
    that holds an unpaired surrogate (UnpairedSurrogate, naming where it is)."""
    obj = params.strict_json(text)
    probe = text if isinstance(text, str) else bytes(text).decode("latin-1")
    if "\\u" in probe and _SURROGATE_ESCAPE.search(probe):
        try:
            params.check_tree(obj, allow_nul=True)
        except StoreError as exc:
            raise UnpairedSurrogate(f"{exc.field or 'a value'} holds an unpaired surrogate (a lone \\ud800-\\udfff "
                                    "escape), which is not valid Unicode; fix or remove it and import again",
                                    field="content") from None
    return obj


def on_line(exc: UnpairedSurrogate, number: int) -> UnpairedSurrogate:
    """The same refusal, saying which line of the file it is on."""
    return UnpairedSurrogate(f"line {number}: {exc.message}", field=exc.field)


def decode_text(data) -> str:
    if isinstance(data, str):
        return data
    try:
        return bytes(data).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FormatError(f"the file is not UTF-8 text (byte {exc.start} cannot be decoded)", field="file") from None


def split_lines(text: str) -> Iterator[tuple[int, str, bool]]:
    """(line number, text, is_last) for each non-blank line; `is_last` marks a last line
    without a newline after it (possibly torn: the writer stopped in the middle)."""
    start, number, length = 0, 0, len(text)
    while start < length:
        end = text.find("\n", start)
        number += 1
        if end == -1:
            line, start, last = text[start:], length, True
        else:
            line, start, last = text[start:end], end + 1, False
        line = line.rstrip("\r")
        if line.strip():
            yield number, line, last


def read_jsonl(lines: Iterable[tuple[int, str, bool]], *, keep_text: bool = True) -> Iterator[Line]:
    """Parse each line as JSON; a line that is not JSON comes back with `error` set.
    With keep_text=False each Line's `text` is "" (a reader that keeps only what it
    parsed does not hold the file's text twice)."""
    for number, text, last in lines:
        kept = text if keep_text else ""
        try:
            obj = loads(text)
        except UnpairedSurrogate as exc:
            raise on_line(exc, number) from None
        except (ValueError, RecursionError) as exc:
            reason = f"not JSON: {exc}"
            if last:
                reason = f"torn last line (the file ends in the middle of a JSON object): {exc}"
            yield Line(number, kept, None, reason)
            continue
        yield Line(number, kept, obj)


def parse_document_or_lines(data, parse_document, *, subject: str = "") -> Plan:
    """One JSON document, or else JSON Lines: the lines that are JSON, as a list, go to
    `parse_document(items, text, subject=…)` and each line that is not is a problem."""
    text = decode_text(data)
    try:
        doc = loads(text)
    except ValueError:
        lines = list(read_jsonl(split_lines(text)))
        plan = parse_document([ln.obj for ln in lines if not ln.error], text, subject=subject)
        plan.problems.extend(Problem(ln.number, ln.error) for ln in lines if ln.error)
        return plan
    return parse_document(doc, text, subject=subject)


def content_hash(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def parse_time(value) -> datetime | None:
    """An ISO 8601 time (or epoch seconds/milliseconds) as an aware datetime; None if unusable."""
    try:
        if isinstance(value, bool):
            return None
        if isinstance(value, (int, float)):
            seconds = value / 1000 if value > 1e11 else value
            return datetime.fromtimestamp(seconds, tz=UTC)
        if isinstance(value, str) and value:
            at = datetime.fromisoformat(value.strip())
            # Refused here (None) when it overflows on the way to UTC, rather than in the driver.
            return params.to_utc(at if at.tzinfo else at.replace(tzinfo=UTC))
    except (ValueError, OverflowError, OSError):
        return None
    return None


def first_text(content, limit: int = 80) -> str:
    """A short title from message content."""
    if isinstance(content, str):
        text = content
    elif isinstance(content, list):
        text = " ".join(b.get("text", "") for b in content if isinstance(b, dict) and isinstance(b.get("text"), str))
    else:
        text = ""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def content_blocks(parts: list, *, text_types=("text",)) -> list[dict]:
    """Content parts as memoryui blocks: a part of one of `text_types` becomes a text
    block (its text made storable; dropped when blank), a part of any other type stays
    as it is, and a part with no type is dropped."""
    blocks = []
    for part in parts:
        if not isinstance(part, dict) or not isinstance(part.get("type"), str) or not part["type"].strip():
            continue
        if part["type"] in text_types:
            text = clean_text(part.get("text"))
            if text and text.strip():
                blocks.append({"type": "text", "text": text})
        else:
            blocks.append(part)
    return blocks


def clean_text(value) -> str | None:
    """A string the databases can store, or None (NUL and lone surrogates are not storable)."""
    if not isinstance(value, str):
        return None
    if "\x00" in value:
        value = value.replace("\x00", "\ufffd")
    if value.isascii():  # a flag of the string: no lone surrogate, nothing to encode
        return value
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        value = value.encode("utf-8", "replace").decode("utf-8")
    return value


def storable(value):
    """A transcript's value as both databases can hold it outside a message row (titles, meta,
    external ids, source keys, original entries): PostgreSQL's text and jsonb refuse NUL, and
    no database stores half a surrogate pair, so those characters are replaced (U+FFFD, "?").
    Message rows need none of this: their JSON escapes them. Deep for dicts and lists."""
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, dict):
        return {storable(k): storable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [storable(v) for v in value]
    return value


def make_row(message: dict, at, entry: int | None, problems: list, line: int | None) -> Row | None:
    """Validate and encode one message; a message the schema refuses is reported and skipped."""
    try:
        try:
            kind, text = encode_message(message)
        except InvalidMessage:
            # A transcript is a record of what happened: a tool that read a binary file
            # returned NUL bytes. The original entry keeps them (escaped); the message row
            # gets U+FFFD in their place, as titles and meta do, since the API refuses a
            # message holding NUL. Anything else wrong is reported below as before.
            cleaned = storable(message)
            if cleaned == message:
                raise
            kind, text = encode_message(cleaned)
    except InvalidMessage as exc:
        problems.append(Problem(line, f"a message was skipped: {exc.message}"))
        return None
    except StoreError as exc:  # too large
        problems.append(Problem(line, f"a message was skipped: {exc.message}"))
        return None
    return Row(kind, text, at, entry)


def merge_row(row: Row, message: dict) -> Row | None:
    """`row` again holding `message` (a reply grown by another block or item of the same
    model response), same time and entry; None when the schema refuses it (too large)."""
    try:
        kind, text = encode_message(message)
    except StoreError:
        return None
    return Row(kind, text, row.at, row.entry)


def reply_message(parts: list, calls: list, meta: dict) -> dict:
    """An assistant message from a reply's content parts and tool calls (one text part
    is plain content)."""
    out = {"kind": "assistant", "meta": meta}
    if parts:
        out["content"] = parts[0]["text"] if len(parts) == 1 and parts[0].get("type") == "text" else parts
    if calls:
        out["tool_calls"] = calls
    return out


def dumps(value) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


# ---- request bodies: a message array, alone or inside its request's envelope -------------


def messages_and_envelope(data, expected: str) -> tuple[list, dict | None]:
    """A request body's messages and the rest of it (None for a bare array); `expected`
    says, in the refusal, what the format wanted."""
    if isinstance(data, list):
        return data, None
    if isinstance(data, dict) and isinstance(data.get("messages"), list):
        return data["messages"], {k: v for k, v in data.items() if k != "messages"}
    raise FormatError(f"expected {expected}", field="file")


def render_messages_document(originals: list[str]) -> str | None:
    """The request body again from its kept originals: an `{"envelope": …}` original
    first, when there is one, then the messages. None for a response body (`{"response": …}`):
    it is no request, so an export renders the conversation instead."""
    messages, envelope = [], None
    for raw in originals:
        obj = json.loads(raw)
        if isinstance(obj, dict) and set(obj) == {"response"} and not messages:
            return None
        if isinstance(obj, dict) and set(obj) == {"envelope"} and envelope is None and not messages:
            envelope = obj["envelope"]
            continue
        messages.append(obj)
    if envelope is None:
        return json.dumps(messages, ensure_ascii=False)
    return json.dumps({**envelope, "messages": messages}, ensure_ascii=False)
