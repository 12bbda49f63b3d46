"""The body of `POST /api/v1/imports`, read without holding it whole.

The body comes spooled (conversations/bodies.py). Two shapes:

- JSON, `{"content": "<the file's text>", "format": …, …}`: read a piece at a time.
  Every field but `content` is small and parsed as any body is (strict JSON); the
  `content` string is decoded straight into a private file (0600, in the uploads
  folder, removed after the import), escapes and surrogate pairs included, as strictly
  as the JSON decoder would (a raw control character or a lone surrogate is refused),
  so a transcript of hundreds of megabytes never becomes one Python string;
- anything else (`text/plain`, `application/x-ndjson`, `text/markdown`,
  `application/zip`, `application/octet-stream`, a SQLite database): the body is the
  file itself, and its options come in the query string (`format`, `namespace`,
  `subject`, `dry_run`, `allow_empty`, `pin_older_than_retention`).
"""

import codecs
import os
import re
import tempfile
from dataclasses import dataclass, field

from conversations import params
from conversations.errors import BadRequest, InvalidInput

from . import uploads

READ = 256 * 1024
RAW_TYPES = ("text/plain", "text/markdown", "application/x-ndjson", "application/jsonl", "application/json-lines",
             "application/zip", "application/x-zip-compressed", "application/octet-stream", "application/x-sqlite3",
             "application/vnd.sqlite3")
_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
_STRING_STOP = re.compile(r'["\\\x00-\x1f]')
_VALUE_STOP = re.compile(r'["{}\[\],:]')
_QUOTE_OR_ESCAPE = re.compile(r'["\\]')
_SPACE = " \t\r\n"


def _invalid(reason: str) -> BadRequest:
    return BadRequest(f"the request body is not valid JSON: {reason}", field="body", code="invalid_json")


@dataclass
class ImportBody:
    fields: dict = field(default_factory=dict)
    content: str | None = None  # the path of the decoded `content`, when the body has one

    def close(self) -> None:
        if self.content is not None:
            try:
                os.unlink(self.content)
            except FileNotFoundError:
                pass
            self.content = None


class _Text:
    """The body's text, decoded as UTF-8 a block at a time."""

    def __init__(self, file):
        self.file = file
        self.decoder = codecs.getincrementaldecoder("utf-8")("strict")
        self.buf = ""
        self.pos = 0
        self.eof = False

    def fill(self) -> bool:
        if self.eof:
            return False
        block = self.file.read(READ)
        try:
            text = self.decoder.decode(block, final=not block)
        except UnicodeDecodeError as exc:
            raise _invalid(f"it is not UTF-8 ({exc.reason})") from None
        self.buf = self.buf[self.pos:] + text
        self.pos = 0
        self.eof = not block
        return True

    def peek(self) -> str:
        while True:
            while self.pos < len(self.buf) and self.buf[self.pos] in _SPACE:
                self.pos += 1
            if self.pos < len(self.buf):
                return self.buf[self.pos]
            if not self.fill():
                return ""

    def expect(self, char: str) -> None:
        if self.peek() != char:
            found = self.peek()
            raise _invalid(f"expected {char!r}, found {found!r}" if found else f"expected {char!r} at the end")
        self.pos += 1

    def take(self, n: int) -> str:
        while len(self.buf) - self.pos < n:
            if not self.fill():
                raise _invalid("the body ends in the middle of a string")
        out = self.buf[self.pos:self.pos + n]
        self.pos += n
        return out

    def raw_value(self) -> str:
        """The text of one JSON value (parsed by the caller)."""
        depth, chunks = 0, []
        self.peek()
        start = self.pos
        while True:
            found = _VALUE_STOP.search(self.buf, self.pos)
            if found is None:
                chunks.append(self.buf[start:])
                self.pos = len(self.buf)
                if not self.fill():
                    return "".join(chunks)
                start = 0
                continue
            char, self.pos = found.group(), found.end()
            if char == '"':
                self._skip_string(chunks, start)
                start = self.pos
                if depth == 0:
                    return "".join(chunks)
            elif char in "{[":
                depth += 1
            elif char in "}]":
                if depth == 0:
                    self.pos -= 1
                    chunks.append(self.buf[start:self.pos])
                    return "".join(chunks)
                depth -= 1
                if depth == 0:
                    chunks.append(self.buf[start:self.pos])
                    return "".join(chunks)
            elif char in ",:" and depth == 0:
                self.pos -= 1
                chunks.append(self.buf[start:self.pos])
                return "".join(chunks)

    def _skip_string(self, chunks: list, start: int) -> None:
        """Past the string whose opening quote was just read (its text stays for the value)."""
        while True:
            found = _QUOTE_OR_ESCAPE.search(self.buf, self.pos)
            if found is None:
                chunks.append(self.buf[start:])
                self.pos = len(self.buf)
                if not self.fill():
                    raise _invalid("the body ends in the middle of a string")
                start = 0
                continue
            if found.group() == "\\":
                self.pos = found.end()
                chunks.append(self.buf[start:self.pos])
                chunks.append(self.take(1))
                start = self.pos
                continue
            self.pos = found.end()
            chunks.append(self.buf[start:self.pos])
            # `start` is past what is copied: the caller restarts at self.pos
            return

    def string_to(self, out) -> None:
        """Decode the string whose opening quote was just read into the text file `out`."""
        high = None  # the high half of a surrogate pair, waiting for its low half
        while True:
            found = _STRING_STOP.search(self.buf, self.pos)
            end = found.start() if found else len(self.buf)
            if end > self.pos:
                _no_half(high)
                out.write(self.buf[self.pos:end])
            self.pos = end
            if found is None:
                if not self.fill():
                    raise _invalid("the body ends in the middle of the content string")
                continue
            char = found.group()
            self.pos = found.end()
            if char == '"':
                _no_half(high)
                return
            if char != "\\":
                raise _invalid(f"a control character (U+{ord(char):04X}) inside the content string must be escaped")
            high = self._escape(out, high)

    def _escape(self, out, high):
        """One escape after its backslash, written to `out`; returns the high surrogate still waiting."""
        escape = self.take(1)
        if escape in _ESCAPES:
            _no_half(high)
            out.write(_ESCAPES[escape])
            return None
        if escape != "u":
            raise _invalid(f"invalid escape \\{escape} in the content string")
        digits = self.take(4)
        try:
            unit = int(digits, 16)
        except ValueError:
            raise _invalid(f"invalid escape \\u{digits} in the content string") from None
        if 0xD800 <= unit <= 0xDBFF:
            _no_half(high)
            return unit
        if 0xDC00 <= unit <= 0xDFFF:
            if high is None:
                _no_half(unit)
            out.write(chr(0x10000 + ((high - 0xD800) << 10) + (unit - 0xDC00)))
            return None
        _no_half(high)
        out.write(chr(unit))
        return None


def _no_half(unit) -> None:
    if unit is not None:
        raise InvalidInput("content holds an unpaired surrogate (a lone \\ud800-\\udfff escape), which is not "
                           "valid Unicode; fix or remove it and import again", field="content")


def read_json_body(spooled) -> ImportBody:
    """A JSON import body: its small fields parsed, its `content` decoded into a private file."""
    text = _Text(spooled.file)
    spooled.file.seek(0)
    body = ImportBody()
    try:
        if text.peek() == "":
            raise BadRequest("the request body is empty; send a JSON object", field="body", code="invalid_json")
        if text.peek() != "{":
            value = _parse(text.raw_value())
            raise InvalidInput(f"the request body must be a JSON object, not {type(value).__name__}", field="body")
        text.expect("{")
        if text.peek() == "}":
            text.pos += 1
        else:
            while True:
                if text.peek() != '"':
                    raise _invalid("expected a field name")
                key = _parse(text.raw_value())
                if key in body.fields or (key == "content" and body.content is not None):
                    raise _invalid(f"the field {key!r} is given twice")
                text.expect(":")
                if key == "content" and text.peek() == '"':
                    text.pos += 1
                    body.content = _content_file(text)
                else:
                    body.fields[key] = _parse(text.raw_value())
                if text.peek() == ",":
                    text.pos += 1
                    continue
                text.expect("}")
                break
        if text.peek() != "":
            raise _invalid("something follows the object")
        params.check_tree(body.fields, allow_nul=True)
    except BaseException:
        body.close()
        raise
    return body


def _parse(raw: str):
    try:
        return params.strict_json(raw)
    except (ValueError, RecursionError) as exc:
        raise _invalid(str(exc)) from None


def _content_file(text: _Text) -> str:
    fd, path = tempfile.mkstemp(prefix="import-", suffix=".content", dir=uploads.folder())
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as out:
            text.string_to(out)
    except BaseException:
        os.unlink(path)
        raise
    return path


# ---- raw bodies -------------------------------------------------------------------------------

_TRUE, _FALSE = ("true", "1", "yes"), ("false", "0", "no", "")
QUERY_FIELDS = ("format", "namespace", "subject", "dry_run", "allow_empty", "pin_older_than_retention")


def query_options(query) -> dict:
    """A raw import's options from its query string, typed as a JSON body's would be."""
    unknown = sorted(set(query) - set(QUERY_FIELDS))
    if unknown:
        raise InvalidInput(f"unknown query parameter {unknown[0]!r}", field=unknown[0])
    out = {}
    for name in QUERY_FIELDS:
        if name not in query:
            continue
        value = query.get(name)
        if name in ("dry_run", "allow_empty", "pin_older_than_retention"):
            if value.lower() not in _TRUE + _FALSE:
                raise InvalidInput(f"{name} must be true or false", field=name)
            out[name] = value.lower() in _TRUE
        else:
            out[name] = value
    return out


def spool_to_file(blocks) -> str:
    """Bytes (a zip member, a database) written to a private file for a reader that wants a path."""
    fd, path = tempfile.mkstemp(prefix="import-", suffix=".part", dir=uploads.folder())
    try:
        with os.fdopen(fd, "wb") as out:
            for block in blocks:
                out.write(block)
    except BaseException:
        os.unlink(path)
        raise
    return path
