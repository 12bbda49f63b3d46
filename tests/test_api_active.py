"""GET /api/v1/conversations/{id}/active: what the model receives next turn."""

import uuid

import pytest

from conversations import store
from tests.api_support import error_of

pytestmark = pytest.mark.django_db


def _active(api, c, **params):
    response = api.get(f"/conversations/{c.pk}/active", params)
    assert response.status_code == 200, response.content
    return response.json()


def test_without_a_checkpoint_it_is_every_message(reader, convo):
    body = _active(reader, convo)
    assert body["checkpoint"] is None and body["handoff"] is None
    assert [i["position"] for i in body["items"]] == [0, 1, 2, 3]
    assert body["next_position"] == 4 and body["next"] is None


def test_with_a_checkpoint_it_is_the_handoff_then_the_rows_after_the_fold(reader, convo):
    cp = store.checkpoint_at(conversation_id=convo.pk, position=1, summary="Customer wants a refund.")
    body = _active(reader, convo)
    assert body["checkpoint"]["position"] == 1
    assert body["checkpoint"]["summary"] == "Customer wants a refund."
    assert body["checkpoint"]["created_at"].startswith(cp.created_at.strftime("%Y-%m-%dT%H:%M"))
    assert body["handoff"] == {"kind": "system", "content": "Customer wants a refund.",
                               "meta": {"checkpoint": {"position": 1}}}
    assert [i["position"] for i in body["items"]] == [2, 3]


def test_it_follows_the_latest_checkpoint(reader, convo):
    store.checkpoint_at(conversation_id=convo.pk, position=1, summary="one")
    store.checkpoint_at(conversation_id=convo.pk, position=3, summary="all")
    body = _active(reader, convo)
    assert body["handoff"]["content"] == "all" and body["items"] == []


def test_the_messages_are_ready_to_send(reader, convo):
    # What a harness does: handoff (if any), then each item's message.
    store.checkpoint_at(conversation_id=convo.pk, position=0, summary="sys prompt folded")
    body = _active(reader, convo)
    prompt = ([body["handoff"]] if body["handoff"] else []) + [i["message"] for i in body["items"]]
    assert [m["kind"] for m in prompt] == ["system", "user", "assistant", "tool"]
    assert prompt[2]["tool_calls"][0]["arguments"] == {"order": 7}


def test_it_pages_a_long_active_view(reader, convo):
    body = _active(reader, convo, limit=3)
    assert [i["position"] for i in body["items"]] == [0, 1, 2] and body["next"]
    assert f"cursor={body['next']}" in body["next_url"]
    rest = _active(reader, convo, limit=3, cursor=body["next"])
    assert [i["position"] for i in rest["items"]] == [3]


def test_paging_never_reaches_behind_the_fold(reader, convo):
    store.checkpoint_at(conversation_id=convo.pk, position=1, summary="s")
    assert [i["position"] for i in _active(reader, convo, after=0)["items"]] == [2, 3]


@pytest.mark.parametrize("params", [{"limit": 0}, {"limit": 5000}, {"after": -5}, {"after": "one"}])
def test_it_refuses_bad_parameters_with_422(reader, convo, params):
    response = reader.get(f"/conversations/{convo.pk}/active", params)
    assert response.status_code == 422
    assert error_of(response)["code"] == "invalid_input"


def test_an_unknown_or_malformed_conversation_is_404(reader):
    assert reader.get(f"/conversations/{uuid.uuid4()}/active").status_code == 404
    assert reader.get("/conversations/42/active").status_code == 404
