"""What callers send, parsed in one place: integers, dates, cursors and text.

Every door — the pages, the JSON API, the management commands — reads its
parameters through these functions, so a rule fixed here is fixed everywhere.
The rules:

- An integer is ASCII digits with an optional minus, at most 30 of them, inside
  the bounds the caller gives. `"²".isdigit()` is true and `int("٣")` is 3;
  neither is a number a person typed into an id field.
- A date or a date and time is ISO 8601 in ASCII, and comes back timezone-aware
  in UTC. A value that leaves the representable range when shifted to UTC
  (`0001-01-01T00:00:00+23:59`, `9999-12-31T23:59:59-23:59`) is refused here
  with a clear message, not later in the database driver with a 500.
- A cursor is opaque: base64url of `[listing, value, …]` (instants, integers,
  UUIDs). A cursor of another listing, a forged one, one whose instant
  overflows: all refused.
- Text the databases cannot store is refused: NUL anywhere it would land in a
  text column (PostgreSQL refuses it) and unpaired surrogates (not UTF-8).
- An identifier (namespace, external id) is NFC, and refused when it holds control
  or invisible characters: two ids that print the same are the same id, or refused.

The pure parsers raise `ValueError` with a sentence that reads after the field's
name; the `*_param` helpers (query strings: 400, `BadParameter`) and the
`*_field` helpers (form and body fields: 422, `InvalidInput`) name the field.
"""

import argparse
import base64
import json
import math
import re
import unicodedata
import uuid
from datetime import UTC, date, datetime, time, timedelta

from .errors import InvalidInput

UTC = UTC
# Ids and positions are BIGINT: a larger number cannot exist and must not reach a driver.
MAX_BIGINT = 2**63 - 1
# The largest position any door takes (a query bound, a fork or fold position): the column's own
# maximum, so every stored row can be named; the reads only compare with it, never add to it.
MAX_POSITION = MAX_BIGINT
# More digits than any bound needs; int() on a long digit string is slow (and refused past 4,300).
MAX_DIGITS = 30
CURSOR_MAX = 1000
# The longest ISO 8601 instant: 2026-01-31T12:00:00.123456+05:30 is 32 characters.
INSTANT_MAX = 40

_INT = re.compile(rf"-?[0-9]{{1,{MAX_DIGITS}}}", re.ASCII)
_LONG_INT = re.compile(r"-?[0-9]+", re.ASCII)
_DAY = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}", re.ASCII)
# Extended ISO 8601 only (no week dates, no basic format): date, T or space, time,
# optional fraction, optional Z or ±HH:MM.
_INSTANT = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}(?:[T ][0-9]{2}:[0-9]{2}(?::[0-9]{2}(?:\.[0-9]{1,6})?)?"
    r"(?:Z|z|[+-][0-9]{2}:?[0-9]{2})?)?",
    re.ASCII,
)


class BadParameter(InvalidInput):
    """A query-string value that is not what the page or endpoint takes."""

    code = "invalid_parameter"
    status = 400


# ---- integers ----------------------------------------------------------------------


def _reject_constant(name):
    raise ValueError(f"{name} is not valid JSON")


def _finite_float(text: str) -> float:
    # 1e400 parses as infinity, which PostgreSQL's jsonb and strict JSON readers refuse.
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"number {text[:40]} is out of range")
    return value


# json.loads(text, parse_constant=…, parse_float=…) builds a decoder on every call and
# skips whitespace around the document with two regex matches; a JSONL line is nearly
# always one object with none, which the one decoder reads directly (the importer reads
# every line twice: a tenth of its parsing time was this).
_DECODER = json.JSONDecoder(parse_constant=_reject_constant, parse_float=_finite_float)


def strict_json(text):
    """Strict JSON (str or bytes): no NaN/Infinity, no numbers that overflow to infinity.
    Raises ValueError (or RecursionError for absurd nesting)."""
    if type(text) is bytes and text[:1] == b"{" and text[-1:] == b"}":
        # A request body. Braces at both ends rule out UTF-16 and UTF-32, so this is the
        # decoding json.loads would pick; bytes it would read with 'surrogatepass' go to it.
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError:
            pass
    if type(text) is str and text[:1] == "{" and text[-1:] == "}":
        try:
            obj, end = _DECODER.raw_decode(text)
        except ValueError:
            pass  # reported by the full decode below, with its usual message
        else:
            if end == len(text):
                return obj
    return json.loads(text, parse_constant=_reject_constant, parse_float=_finite_float)


def parse_int(raw, *, minimum: int = 0, maximum: int = MAX_BIGINT) -> int:
    """An integer from ASCII digits (or an int, not a bool) within [minimum, maximum]."""
    if isinstance(raw, bool):
        raise ValueError("must be a whole number, not true or false")
    if isinstance(raw, int):
        value = raw
    elif isinstance(raw, str):
        text = raw.strip(" \t")
        if not _INT.fullmatch(text):
            if _LONG_INT.fullmatch(text):
                raise ValueError(f"must be between {minimum} and {maximum}")
            raise ValueError(f"must be a whole number written with the digits 0-9, not {text[:40]!r}")
        value = int(text)
    else:
        raise ValueError("must be a whole number")
    if not minimum <= value <= maximum:
        raise ValueError(f"must be between {minimum} and {maximum}")
    return value


# ---- dates and instants ------------------------------------------------------------


def parse_day(raw: str) -> date:
    """A calendar date written YYYY-MM-DD."""
    text = raw.strip() if isinstance(raw, str) else ""
    if not _DAY.fullmatch(text):
        raise ValueError("must be a date like 2026-01-31")
    try:
        return date.fromisoformat(text)
    except ValueError:
        raise ValueError(f"{text!r} is not a day of the calendar") from None


def to_utc(value: datetime) -> datetime:
    """An aware datetime shifted to UTC; ValueError when that leaves years 1–9999."""
    try:
        return value.astimezone(UTC)
    except (OverflowError, ValueError):
        raise ValueError("is out of range: shifted to UTC it falls outside the years 1 to 9999") from None


def iso(value: datetime | None, *, timespec: str = "auto") -> str | None:
    """A moment as every JSON answer and export writes it: ISO 8601 in UTC with a `Z`."""
    return value.isoformat(timespec=timespec).replace("+00:00", "Z") if value else None


def parse_instant(raw, *, require_tz: bool = False, end_of_day: bool = False) -> datetime:
    """A moment, timezone-aware in UTC.

    Accepts `2026-01-31` (its first instant, or its last with `end_of_day`),
    `2026-01-31T12:00`, `2026-01-31 12:00:05.5`, with `Z` or `±HH:MM`. A value
    without an offset is read as UTC unless `require_tz`.
    """
    if isinstance(raw, datetime):
        value = raw
    else:
        if not isinstance(raw, str):
            raise ValueError("must be a date and time written as ISO 8601 text")
        text = raw.strip()
        if len(text) > INSTANT_MAX or not _INSTANT.fullmatch(text):
            raise ValueError("must be a date (2026-01-31) or a date and time (2026-01-31T12:00:00Z)")
        if len(text) == 10:
            if require_tz:
                raise ValueError("needs a time and a time zone (e.g. 2026-01-31T12:00:00Z)")
            day = parse_day(text)
            return datetime.combine(day, time.max if end_of_day else time.min, tzinfo=UTC)
        try:
            value = datetime.fromisoformat(text.replace("z", "Z"))
        except ValueError:
            raise ValueError(f"{text!r} is not a moment of the calendar") from None
    if value.tzinfo is None or value.utcoffset() is None:
        if require_tz:
            raise ValueError("needs a time zone (e.g. 2026-01-31T12:00:00Z)")
        return value.replace(tzinfo=UTC)
    return to_utc(value)


def day_start(day: date) -> datetime:
    return datetime.combine(day, time.min, tzinfo=UTC)


def day_after(day: date) -> datetime | None:
    """The first instant after `day` (an exclusive upper bound), or None past 9999-12-31."""
    try:
        return day_start(day + timedelta(days=1))
    except OverflowError:
        return None


def plus_days(moment: datetime, days: int) -> datetime | None:
    """`moment` plus `days`, or None when that is past the representable range."""
    try:
        return moment + timedelta(days=days)
    except OverflowError:
        return None


# ---- cursors -----------------------------------------------------------------------


def _cursor_item(value) -> str:
    if isinstance(value, datetime):
        return to_utc(value).isoformat()
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return uuid.UUID(str(value)).hex


def encode_cursor(listing: str, *values) -> str:
    """An opaque keyset cursor: where the previous page of `listing` ended.
    `values` are instants (datetime), integers or UUIDs."""
    raw = json.dumps([listing, *(_cursor_item(v) for v in values)], separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def _cursor_value(text, kind):
    if not isinstance(text, str):
        raise ValueError("not text")
    if kind is datetime:
        return parse_instant(text, require_tz=True)
    if kind is int:
        return parse_int(text, minimum=0)
    return uuid.UUID(hex=text)


def decode_cursor(value: str, listing: str, *kinds) -> tuple:
    """The values of a cursor of `listing`, one per kind given (datetime, int or uuid.UUID)."""
    try:
        if not isinstance(value, str) or not value or len(value) > CURSOR_MAX:
            raise ValueError("length")
        padded = value + "=" * (-len(value) % 4)
        items = json.loads(base64.urlsafe_b64decode(padded.encode("ascii")))
        if not isinstance(items, list) or len(items) != len(kinds) + 1 or items[0] != listing:
            raise ValueError("cursor of another listing")
        return tuple(_cursor_value(text, kind) for text, kind in zip(items[1:], kinds, strict=True))
    except (ValueError, TypeError, UnicodeError, AttributeError, OverflowError, RecursionError):
        raise ValueError("is not a cursor this listing gave out; pass the previous page's value unchanged") from None


# ---- text --------------------------------------------------------------------------


def check_text(value: str, field: str | None, *, allow_nul: bool = False) -> None:
    """Refuse what no database can store as text: unpaired surrogates; NUL unless allowed."""
    if not allow_nul and "\x00" in value:
        raise InvalidInput(f"{field or 'text'} must not contain NUL characters", field=field)
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInput(f"{field or 'text'} holds an unpaired surrogate, which is not valid Unicode",
                           field=field) from None


def check_query_text(value: str | None, field: str) -> None:
    """check_text on a query parameter that may be absent (ninja has parsed it already)."""
    if value is not None:
        check_text(value, field)


def check_tree(data, *, allow_nul: bool = False, where: str = "") -> None:
    """check_text on every string (keys included) of a decoded JSON value, naming the dotted path."""
    stack = [(data, where)]
    while stack:
        value, path = stack.pop()
        if isinstance(value, dict):
            for k, item in value.items():
                stack.append((k, path))
                stack.append((item, f"{path}.{k}" if path else str(k)))
        elif isinstance(value, list):
            stack.extend((item, f"{path}.{i}" if path else str(i)) for i, item in enumerate(value))
        elif isinstance(value, str):
            check_text(value, path or None, allow_nul=allow_nul)


# ---- identifiers --------------------------------------------------------------------

# Default-ignorable characters outside category Cf (which holds the zero-width ones, the
# BOM, the soft hyphen and every bidi control): the combining grapheme joiner and the
# Hangul fillers, all drawn as nothing.
_INVISIBLE = frozenset("\u034f\u115f\u1160\u17b4\u17b5\u3164\uffa0")


def _invisible(ch: str) -> bool:
    return ch in _INVISIBLE or unicodedata.category(ch) in ("Cc", "Cf")


def identifier(raw, field: str, *, max_length: int, required: bool = False) -> str:
    """A name callers look things up by (a namespace, an external id, a session key), as
    it is stored and as it is looked up: stripped and in Unicode NFC, as subjects are
    compared, so "Zoë" typed with a combining diaeresis names the same conversation as
    "Zoë" composed. Refused (422 naming the field): NUL, unpaired surrogates, control
    characters and invisible ones (zero-width, BOM, soft hyphen, bidi embeddings,
    overrides, isolates and marks), with which two ids that print the same differ."""
    if raw is None:
        raw = ""
    if not isinstance(raw, str):
        raise InvalidInput(f"{field} must be a string", field=field)
    check_text(raw, field)
    value = unicodedata.normalize("NFC", raw.strip())
    bad = next((ch for ch in value if _invisible(ch)), None)
    if bad is not None:
        name = unicodedata.name(bad, "a control character")
        raise InvalidInput(f"{field} holds U+{ord(bad):04X} ({name}), which is invisible; "
                           "send the id without it", field=field)
    if required and not value:
        raise InvalidInput(f"{field} must not be blank", field=field)
    if len(value) > max_length:
        raise InvalidInput(f"{field} is {len(value)} characters; at most {max_length}", field=field)
    return value


def identifier_forms(value: str) -> list[str]:
    """The spellings a stored identifier of `value` (already `identifier()`) may have: rows
    written before ids were normalised keep the form they came in (rows are not rewritten),
    so a look-up matches NFC and NFD alike."""
    decomposed = unicodedata.normalize("NFD", value)
    return [value] if decomposed == value else [value, decomposed]


# ---- request helpers: query strings (400) -------------------------------------------


def _raw(params, name: str) -> str:
    value = params.get(name, "")
    return value if isinstance(value, str) else ""


def int_param(params, name: str, *, default=None, minimum: int = 0, maximum: int = MAX_BIGINT):
    raw = _raw(params, name).strip()
    if raw == "":
        return default
    try:
        return parse_int(raw, minimum=minimum, maximum=maximum)
    except ValueError as exc:
        raise BadParameter(f"{name} {exc}", field=name) from None


def text_param(params, name: str, *, max_length: int = 300, cut: bool = False, collapse: bool = False) -> str:
    """Stripped text ('' when absent); NUL and surrogates refused; longer than
    max_length refused, or cut there with `cut` (a search box)."""
    raw = _raw(params, name)
    try:
        check_text(raw, name)
    except InvalidInput as exc:
        raise BadParameter(exc.message, field=name) from None
    text = " ".join(raw.split()) if collapse else raw.strip()
    if len(text) > max_length and not cut:
        raise BadParameter(f"{name} is {len(text)} characters; at most {max_length}", field=name)
    return text[:max_length]


def day_param(params, name: str):
    raw = _raw(params, name).strip()
    if raw == "":
        return None
    try:
        return parse_day(raw)
    except ValueError as exc:
        raise BadParameter(f"{name} {exc}", field=name) from None


def cursor_param(params, name: str, listing: str, *kinds):
    raw = _raw(params, name).strip()
    if raw == "":
        return None
    try:
        return decode_cursor(raw, listing, *kinds)
    except ValueError as exc:
        raise BadParameter(f"{name} {exc}", field=name, code="invalid_cursor") from None


# ---- request helpers: form and body fields (422) ------------------------------------


def int_field(raw, field: str, *, minimum: int = 0, maximum: int = MAX_BIGINT) -> int:
    try:
        return parse_int(raw, minimum=minimum, maximum=maximum)
    except ValueError as exc:
        raise InvalidInput(f"{field} {exc}", field=field) from None


def instant_field(raw, field: str, *, require_tz: bool = False, end_of_day: bool = False) -> datetime:
    try:
        return parse_instant(raw, require_tz=require_tz, end_of_day=end_of_day)
    except ValueError as exc:
        raise InvalidInput(f"{field} {exc}", field=field) from None


def text_field(raw, field: str) -> str:
    """A form field's text, refused when it holds what no database can store."""
    value = raw if isinstance(raw, str) else ""
    check_text(value, field)
    return value


# ---- command-line options --------------------------------------------------------


def int_argument(*, minimum: int = 0, maximum: int = MAX_BIGINT):
    """An argparse `type=` for a command's integer option, by the same rule as every other door."""

    def convert(raw: str) -> int:
        try:
            return parse_int(raw, minimum=minimum, maximum=maximum)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    convert.__name__ = "integer"
    return convert
