"""The API answers a stored message with the bytes the store wrote, not a re-encoding of them."""

import json

import pytest

from conversations.models import Message

pytestmark = pytest.mark.django_db

# What a re-encoding could change: escapes, key order inside objects, float spellings
# (1.0, -0.0, the largest and smallest doubles, exponents), integers past 64 bits.
TRICKY = {
    "z_first": "last key first",
    "unicode": "é \u00e9 \u2028 \u2029 \U0001f600 \"quoted\" back\\slash \t tab </script>",
    "floats": [1.0, -0.0, 0.1, 1e16, 1.7976931348623157e308, 5e-324, 2.5e-7, 123456789.123456789],
    "ints": [0, -1, 2**63, 12345678901234567890123],
    "nested": {"y": [1.0, {"b": 2, "a": 1}], "x": {"deeper": {"z": None, "a": True}}},
    "empty": [{}, [], ""],
}

MESSAGES = [
    {"kind": "user", "content": "Ünïcödé \u00e9\U0001f600 \\u00e9 literally", "meta": TRICKY},
    {"kind": "assistant", "content": "",
     "tool_calls": [{"id": "c1", "name": "lookup", "arguments": {"b": 1.0, "a": [1e-7, {"k": "é"}], "n": 2**70}}]},
    {"kind": "tool", "tool_call_id": "c1", "content": "{\"raw\": 1.0}", "meta": {"β": 1.5e300, "α": -0.0}},
]


def _stored(conversation_id) -> list[str]:
    return list(Message.objects.filter(conversation_id=conversation_id).order_by("position")
                .values_list("content", flat=True))


def _answered_raw(body: bytes, stored: str) -> bool:
    # The renderer writes the envelope with json's separators; the message itself is spliced in.
    return f'"message": {stored}, '.encode() in body


def test_read_answers_carry_the_stored_bytes_of_every_message(writer):
    cid = writer.post("/conversations", {"title": "raw"}).json()["id"]
    answer = writer.post(f"/conversations/{cid}/messages/batch", {"messages": MESSAGES})
    assert answer.status_code == 201, answer.content
    stored = _stored(cid)
    assert len(stored) == 3
    # Re-encoding the parsed text would not give these bytes back: the check can fail.
    assert all(json.dumps(json.loads(s), ensure_ascii=False) != s for s in stored)
    for path in (f"/conversations/{cid}/messages", f"/conversations/{cid}/active"):
        body = writer.get(path).content
        for text in stored:
            assert _answered_raw(body, text), (path, text)
    # One per page, through the cursor, too.
    page = writer.get(f"/conversations/{cid}/messages", {"limit": 1}).json()
    seen = 0
    while True:
        seen += 1
        if page["next"] is None:
            break
        raw = writer.get(f"/conversations/{cid}/messages", {"cursor": page["next"], "limit": 1})
        assert _answered_raw(raw.content, stored[seen]), stored[seen]
        page = raw.json()
    assert seen == 3


def test_the_stored_message_decodes_to_what_was_sent(writer):
    cid = writer.post("/conversations", {}).json()["id"]
    writer.post(f"/conversations/{cid}/messages", MESSAGES[0])
    item = writer.get(f"/conversations/{cid}/messages").json()["items"][0]
    assert item["message"]["meta"] == TRICKY
    assert list(item["message"]["meta"]) == list(TRICKY)  # key order kept
    assert item["message"]["content"] == MESSAGES[0]["content"]
