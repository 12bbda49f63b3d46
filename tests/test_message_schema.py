import json

import pytest
from django.test import override_settings
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from conversations.errors import InvalidMessage, MessageTooLarge
from conversations.message_schema import (
    _ENCODER,
    JOURNAL_KINDS,
    KINDS,
    _canonical,
    _canonical_by_dump,
    decode_message,
    encode_message,
    message_adapter,
    message_text,
)


@pytest.mark.parametrize("kind", JOURNAL_KINDS)
def test_it_accepts_every_journal_kind(kind):
    assert encode_message({"kind": kind, "text": "woke up"}) == (
        kind, json.dumps({"kind": kind, "text": "woke up"}, separators=(",", ":")))


def test_it_accepts_the_chat_kinds_with_their_shapes():
    assert encode_message({"kind": "user", "content": "hi"})[0] == "user"
    assert encode_message({"kind": "system", "content": "be kind"})[0] == "system"
    assert encode_message({"kind": "user", "content": [{"type": "text", "text": "look"},
                                                        {"type": "image", "url": "x.png"}]})[0] == "user"
    kind, text = encode_message({
        "kind": "assistant",
        "tool_calls": [{"id": "c1", "name": "refund", "arguments": {"amount": 12.5}}],
    })
    assert kind == "assistant"
    assert json.loads(text)["tool_calls"][0]["arguments"] == {"amount": 12.5}
    kind, text = encode_message({"kind": "tool", "tool_call_id": "c1", "name": "refund", "content": "ok",
                                 "is_error": False})
    assert json.loads(text)["is_error"] is False


def test_it_keeps_meta():
    _, text = encode_message({"kind": "note", "text": "x", "meta": {"model": "m", "usage": {"in": 3}}})
    assert json.loads(text)["meta"] == {"model": "m", "usage": {"in": 3}}


def test_the_encoding_is_canonical_whatever_the_input_order():
    a = encode_message({"text": "hello", "kind": "note"})
    b = encode_message('{"kind": "note",   "text": "hello"}')
    assert a == b


@pytest.mark.parametrize(
    "bad, field, words",
    [
        ({"kind": "shout", "text": "x"}, "kind", "unknown kind 'shout'"),
        ({"text": "x"}, "kind", "missing 'kind'"),
        ({"kind": "user"}, "content", "content"),
        ({"kind": "user", "content": "   "}, "content", "must not be blank"),
        ({"kind": "note", "text": ""}, "text", "must not be blank"),
        ({"kind": "note", "text": 5}, "text", "text"),
        ({"kind": "note", "text": "x", "colour": "red"}, "colour", "unknown field 'colour'"),
        ({"kind": "assistant"}, None, "needs content or tool_calls"),
        ({"kind": "assistant", "content": "  "}, None, "must not be blank"),
        ({"kind": "tool", "content": "ok"}, "tool_call_id", "tool_call_id"),
        ({"kind": "user", "content": []}, "content", "empty list"),
        ({"kind": "user", "content": [{"type": "text", "text": " "}]}, "content", "blank"),
        ({"kind": "note", "text": "x", "meta": "not an object"}, "meta", "meta"),
    ],
)
def test_it_rejects_bad_messages_naming_the_problem(bad, field, words):
    with pytest.raises(InvalidMessage) as exc:
        encode_message(bad)
    assert words in exc.value.message
    if field:
        assert exc.value.field is not None and exc.value.field.startswith(field)


@pytest.mark.parametrize("bad", ["{not json", "[1, 2]", "42", b"\xff\xfe", None])
def test_it_rejects_what_is_not_a_json_object(bad):
    with pytest.raises(InvalidMessage):
        encode_message(bad)


@override_settings(MEMORYUI_MAX_MESSAGE_BYTES=100)
def test_it_rejects_a_message_over_the_size_limit():
    encode_message({"kind": "note", "text": "x" * 50})
    with pytest.raises(MessageTooLarge) as exc:
        encode_message({"kind": "note", "text": "x" * 200})
    assert "limit is 100 bytes" in exc.value.message


def test_the_size_limit_defaults_to_one_mebibyte():
    encode_message({"kind": "note", "text": "x" * (1024 * 1024 - 100)})
    with pytest.raises(MessageTooLarge):
        encode_message({"kind": "note", "text": "x" * (1024 * 1024)})


def test_it_decodes_what_it_encoded_and_reports_what_it_cannot():
    _, text = encode_message({"kind": "said", "text": "done"})
    assert message_text(decode_message(text)) == "done"
    with pytest.raises(InvalidMessage):
        decode_message('{"kind": "retired-kind", "text": "x"}')


def test_every_kind_is_listed_once():
    assert len(KINDS) == len(set(KINDS)) == 10


# ---- the direct encoding is the serializer's -------------------------------------------------


_text = st.text(min_size=1).filter(lambda t: t.strip())
_json = st.recursive(
    st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)
_meta = st.none() | st.dictionaries(st.text(max_size=6), _json, max_size=4)
_other_block = st.builds(lambda t, extra: {"type": t, **extra},
                         st.sampled_from(["image", "document", "tool_reference", "x"]),
                         st.dictionaries(st.sampled_from(["source", "url", "cache_control", "b", "title"]), _json,
                                         max_size=3))
_content = _text | st.lists(st.builds(lambda t: {"type": "text", "text": t}, _text) | _other_block, min_size=1,
                            max_size=4)
_call = st.builds(lambda i, n, a: {"id": i, "name": n, **({} if a is None else {"arguments": a})}, _text, _text,
                  st.none() | _text | st.dictionaries(st.text(max_size=5), _json, max_size=3))


def _with_meta(message, meta):
    return message if meta is None else {**message, "meta": meta}


_messages = st.one_of(
    st.builds(lambda k, c, m: _with_meta({"kind": k, "content": c}, m), st.sampled_from(["user", "system"]),
              _content, _meta),
    st.builds(lambda c, calls, m: _with_meta({"kind": "assistant", "content": c, "tool_calls": calls}, m),
              _content, st.lists(_call, min_size=1, max_size=3), _meta),
    st.builds(lambda c, m: _with_meta({"kind": "assistant", "content": c}, m), _content, _meta),
    st.builds(lambda i, n, c, e, m: _with_meta({"kind": "tool", "tool_call_id": i, "name": n, "content": c,
                                                "is_error": e}, m),
              _text, st.none() | st.text(), _content, st.none() | st.booleans(), _meta),
    st.builds(lambda k, t, m: _with_meta({"kind": k, "text": t}, m), st.sampled_from(JOURNAL_KINDS), _text, _meta),
)


@hsettings(max_examples=300, deadline=None)
@given(_messages)
def test_the_direct_encoding_is_the_same_text_as_the_serializers(message):
    model = message_adapter.validate_python(message)
    direct, dumped = _canonical(model), _canonical_by_dump(model)
    assert list(direct) == list(dumped)
    try:
        expected = _ENCODER.encode(dumped)
    except (ValueError, TypeError):
        return
    assert _ENCODER.encode(direct) == expected
