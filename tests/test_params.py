"""conversations.params: the one place integers, dates, cursors and text are parsed."""

import argparse
import uuid
from datetime import UTC, datetime, timedelta, timezone

import pytest

from conversations import params
from conversations.errors import InvalidInput

UTC = UTC


@pytest.mark.parametrize("raw, value", [("0", 0), ("42", 42), (" 7 ", 7), ("-1", -1), ("007", 7), (5, 5)])
def test_it_reads_ascii_digits(raw, value):
    assert params.parse_int(raw, minimum=-1) == value


@pytest.mark.parametrize("raw", ["²", "٣", "1_000", "+5", "5.0", "1e3", "0x10", "", " ", "\x00", "1\x00",
                                 "9" * 31, "-" + "9" * 40, True, None, 1.0, "١٢"])
def test_it_refuses_anything_else(raw):
    with pytest.raises(ValueError):
        params.parse_int(raw, minimum=-10**40, maximum=10**40)


def test_it_keeps_to_the_bounds_and_says_them():
    with pytest.raises(ValueError, match="between 1 and 10"):
        params.parse_int("11", minimum=1, maximum=10)
    with pytest.raises(ValueError, match="between 0 and"):
        params.parse_int(str(2**63), minimum=0)
    assert params.parse_int(str(2**63 - 1)) == 2**63 - 1


@pytest.mark.parametrize("raw, expected", [
    ("2026-01-31", datetime(2026, 1, 31, tzinfo=UTC)),
    ("2026-01-31T12:00", datetime(2026, 1, 31, 12, tzinfo=UTC)),
    ("2026-01-31 12:00:05.5", datetime(2026, 1, 31, 12, 0, 5, 500000, tzinfo=UTC)),
    ("2026-01-31T12:00:00Z", datetime(2026, 1, 31, 12, tzinfo=UTC)),
    ("2026-01-31T12:00:00+05:30", datetime(2026, 1, 31, 6, 30, tzinfo=UTC)),
    ("0001-01-01T00:00:00Z", datetime(1, 1, 1, tzinfo=UTC)),
    ("9999-12-31T23:59:59.999999Z", datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)),
    ("0001-01-01T23:59:00+23:59", datetime(1, 1, 1, 0, 0, tzinfo=UTC)),
])
def test_it_reads_moments_into_utc(raw, expected):
    value = params.parse_instant(raw)
    assert value == expected and value.tzinfo is UTC


def test_a_bare_date_can_stand_for_its_last_instant():
    assert params.parse_instant("9999-12-31", end_of_day=True) == datetime.max.replace(tzinfo=UTC)


@pytest.mark.parametrize("raw", [
    "0001-01-01T00:00:00+23:59", "9999-12-31T23:59:59-23:59", "0001-01-01T00:00:00+00:01",
    "10000-01-01", "2026-02-30", "2026-13-01", "2026-01-01T24:00", "2026-01-01T12:00:00+24:00",
    "٢٠٢٦-01-01", "2026-W01-1", "20260101", "yesterday", "", "2026-01-01T12:00:00+05:30" + "0" * 40,
    "2026-01-01\x00", None, 20260101,
])
def test_it_refuses_moments_that_are_not_or_that_overflow(raw):
    with pytest.raises(ValueError):
        params.parse_instant(raw)


def test_an_api_moment_needs_its_time_zone():
    with pytest.raises(ValueError, match="time zone"):
        params.parse_instant("2026-01-31T12:00", require_tz=True)
    with pytest.raises(ValueError, match="time zone"):
        params.parse_instant("2026-01-31", require_tz=True)


def test_day_arithmetic_stops_at_the_end_of_the_calendar():
    assert params.day_after(params.parse_day("9999-12-31")) is None
    assert params.day_after(params.parse_day("2026-01-31")) == datetime(2026, 2, 1, tzinfo=UTC)
    assert params.plus_days(datetime(9999, 12, 31, tzinfo=UTC), 1) is None


@pytest.mark.parametrize("key", [uuid.uuid4(), 17])
def test_a_cursor_comes_back_as_it_went_out(key):
    at = datetime(2026, 1, 31, 12, 0, 0, 123456, tzinfo=timezone(timedelta(hours=2)))
    cursor = params.encode_cursor("listing", at, key)
    moment, got = params.decode_cursor(cursor, "listing", datetime, type(key))
    assert moment == at and moment.tzinfo is UTC and got == key


# One fixed key: the parameters must be the same in every process that collects them (pytest-xdist).
_KEY = uuid.UUID("5b1e0c8a-3f7d-4c2e-9a61-0d4f8e2b7c19").hex


def _forge(payload: str) -> str:
    import base64

    return base64.urlsafe_b64encode(payload.encode()).decode().rstrip("=")


@pytest.mark.parametrize("cursor", [
    "", "!!!", "a" * 2000, _forge("[]"), _forge('["listing"]'), _forge("{}"), _forge("null"),
    _forge(f'["listing", "9999-12-31T23:59:59-23:59", "{_KEY}"]'),
    _forge(f'["listing", "0001-01-01T00:00:00+23:59", "{_KEY}"]'),
    _forge(f'["listing", "2026-01-01T00:00:00", "{_KEY}"]'),
    _forge(f'["other", "2026-01-01T00:00:00+00:00", "{_KEY}"]'),
    _forge('["listing", "2026-01-01T00:00:00+00:00", "not-a-uuid"]'),
    _forge(f'["listing", 5, "{_KEY}"]'),
    _forge('["listing", "2026-01-01T00:00:00+00:00", 5]'),
    _forge("[" * 5000),
    "\x00", "\ud800",
])
def test_a_forged_or_foreign_cursor_is_refused(cursor):
    with pytest.raises(ValueError):
        params.decode_cursor(cursor, "listing", datetime, uuid.UUID)


def test_an_integer_keyed_cursor_refuses_other_digits():
    with pytest.raises(ValueError):
        params.decode_cursor(_forge('["audit", "2026-01-01T00:00:00+00:00", "٣"]'), "audit", datetime, int)
    with pytest.raises(ValueError):
        params.decode_cursor(_forge('["search", "1", "-2"]'), "search", int, int)
    assert params.decode_cursor(params.encode_cursor("search", 1, 2), "search", int, int) == (1, 2)


@pytest.mark.parametrize("value", ["a\x00b", "half \ud800 pair", "\udfff"])
def test_text_no_database_can_store_is_refused_naming_the_field(value):
    with pytest.raises(InvalidInput) as exc:
        params.check_text(value, "title")
    assert exc.value.field == "title"


def test_nul_may_be_allowed_where_it_is_stored_escaped():
    params.check_text("a\x00b", "content", allow_nul=True)
    with pytest.raises(InvalidInput):
        params.check_text("\ud800", "content", allow_nul=True)


def test_a_tree_names_the_path_to_the_bad_string():
    with pytest.raises(InvalidInput) as exc:
        params.check_tree({"meta": {"list": ["ok", "bad\ud800"]}})
    assert exc.value.field == "meta.list.1"
    with pytest.raises(InvalidInput) as exc:
        params.check_tree({"k\x00": 1})
    assert "NUL" in exc.value.message


def test_query_helpers_answer_400_naming_the_parameter():
    with pytest.raises(params.BadParameter) as exc:
        params.int_param({"before": "²"}, "before")
    assert exc.value.status == 400 and exc.value.field == "before"
    assert params.int_param({}, "before", default=3) == 3
    with pytest.raises(params.BadParameter):
        params.text_param({"q": "x\x00"}, "q")
    with pytest.raises(params.BadParameter):
        params.text_param({"s": "x" * 301}, "s", max_length=300)
    assert params.text_param({"q": "  a   b "}, "q", collapse=True) == "a b"
    assert params.text_param({"q": "x" * 400}, "q", max_length=300, cut=True) == "x" * 300
    with pytest.raises(params.BadParameter) as exc:
        params.cursor_param({"cursor": "junk"}, "cursor", "listing", datetime, uuid.UUID)
    assert exc.value.code == "invalid_cursor"


def test_form_helpers_answer_422_naming_the_field():
    with pytest.raises(InvalidInput) as exc:
        params.int_field("٣", "importance", minimum=1, maximum=10)
    assert exc.value.status == 422 and exc.value.field == "importance"
    with pytest.raises(InvalidInput) as exc:
        params.instant_field("9999-12-31T23:59:59-23:59", "invalid_at")
    assert exc.value.field == "invalid_at"


def test_commands_read_integers_by_the_same_rule():
    convert = params.int_argument(minimum=1, maximum=10)
    assert convert("7") == 7
    for bad in ("٣", "²", "0", "11", "1_0"):
        with pytest.raises(argparse.ArgumentTypeError):
            convert(bad)
