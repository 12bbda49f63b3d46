"""The entries door as a session store reaches it: conditional batches with their summary,
paged loads, listing with mtimes and summaries, and deleting a session through the
deletion path (conversations/imports/api.py, entry_streams.py)."""

import pytest

from conversations.frameworks.models import SessionSummary
from conversations.imports import entry_appends
from conversations.models import Conversation
from conversations.retention.models import DeletionReceipt
from tests.api_support import Api, error_of, make_key

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("answer_shapes")]


@pytest.fixture
def api(client):
    return Api(client, make_key(["read", "write", "admin"]))


def entry(n, **kw):
    return {"type": "user", "uuid": f"u{n}", "message": {"role": "user", "content": f"prompt {n}"}, **kw}


def append(api, external_id, entries, **kw):
    return api.post("/imports", {"namespace": "proj", "external_id": external_id, "entries": entries, **kw})


def test_a_batch_continues_only_from_the_count_it_expects_and_keeps_its_summary(api):
    first = append(api, "s1", [entry(1)], expected_entries=0, summary={"first_prompt": "prompt 1"})
    assert first.status_code == 200
    stream = first.json()["stream"]
    assert stream["entries"] == 1 and stream["summary_saved"] is True and stream["updated_ms"] > 1e12

    stale = append(api, "s1", [entry(2)], expected_entries=0, summary={"first_prompt": "other"})
    assert stale.status_code == 409
    assert error_of(stale)["code"] == "entries_conflict" and error_of(stale)["field"] == "expected_entries"
    assert SessionSummary.objects.get().data == {"first_prompt": "prompt 1"}  # nothing of it was written

    assert append(api, "s1", [entry(2)], expected_entries=1, summary={"n": 2}).status_code == 200
    (item,) = api.get("/imports/sources", {"namespace": "proj", "key": "s1"}).json()["items"]
    assert item["entries"] == 2 and item["summary"] == {"data": {"n": 2}, "mtime": item["updated_ms"]}


def test_a_summary_is_refused_for_a_subagent_and_for_bad_shapes(api):
    answer = append(api, "s1/subagents/agent-1", [entry(1)], summary={"x": 1})
    assert answer.status_code == 422 and error_of(answer)["field"] == "summary"
    for bad in ({"summary": [1]}, {"expected_entries": -1}, {"expected_entries": "1"}, {"expected_entries": True}):
        answer = append(api, "s2", [entry(1)], **bad)
        assert answer.status_code == 422 and error_of(answer)["field"] == next(iter(bad))
    whole = api.post("/imports", {"content": '{"kind": "note", "text": "x"}\n', "summary": {}})
    assert whole.status_code == 422 and error_of(whole)["field"] == "summary"
    assert not Conversation.objects.exists()


def test_no_summary_is_kept_for_a_session_another_door_began(api):
    entry_appends.append_entries(format="claude-code", namespace="proj", external_id="s1", entries=[entry(1)])
    answer = append(api, "s1", [entry(2)], expected_entries=1, summary={"first_prompt": "prompt 2"})
    assert answer.status_code == 200 and answer.json()["stream"]["summary_saved"] is False
    assert not SessionSummary.objects.exists()


def test_entries_load_a_page_at_a_time_in_order(api):
    append(api, "s1", [entry(i) for i in range(5)])
    first = api.get("/imports/entries", {"namespace": "proj", "external_id": "s1", "limit": 2}).json()
    assert [e["uuid"] for e in first["items"]] == ["u0", "u1"] and first["next"] is not None
    rest = api.get("/imports/entries", {"namespace": "proj", "external_id": "s1", "cursor": first["next"]}).json()
    assert [e["uuid"] for e in rest["items"]] == ["u2", "u3", "u4"] and rest["next"] is None
    # `after` still picks where the first page starts.
    tail = api.get("/imports/entries", {"namespace": "proj", "external_id": "s1", "after": 2}).json()
    assert [e["uuid"] for e in tail["items"]] == ["u3", "u4"]
    assert api.get("/imports/entries", {"namespace": "proj", "external_id": "nope"}).status_code == 404


def test_sources_list_sessions_apart_from_their_subagent_transcripts(api):
    append(api, "s1", [entry(1)])
    append(api, "s1/subagents/agent-1", [entry(2, isSidechain=True)])
    append(api, "s2", [entry(3)])
    sessions = api.get("/imports/sources", {"namespace": "proj", "sessions": "true"}).json()["items"]
    assert sorted(i["key"] for i in sessions) == ["s1", "s2"]
    subs = api.get("/imports/sources", {"namespace": "proj", "prefix": "s1/"}).json()["items"]
    assert [i["key"] for i in subs] == ["s1/subagents/agent-1"]
    nothing = api.get("/imports/sources", {"namespace": "other", "sessions": "true"}).json()
    assert nothing == {"items": [], "next": None, "next_url": None}


def test_deleting_a_session_deletes_its_subagents_through_the_deletion_path(api, client):
    append(api, "s1", [entry(1)], summary={"first_prompt": "prompt 1"})
    append(api, "s1/subagents/agent-1", [entry(2, isSidechain=True)])
    append(api, "s2", [entry(3)])
    reader = Api(client, make_key(["read", "write"], name="no-admin"))
    assert reader.delete("/imports/entries?namespace=proj&external_id=s1").status_code == 403

    answer = api.delete("/imports/entries?namespace=proj&external_id=s1")
    assert answer.status_code == 200, answer.content
    receipt = answer.json()
    assert receipt["kind"] == "session" and receipt["counts"]["conversations"] == 2
    assert receipt["receipt_url"].endswith(f"/api/v1/receipts/{receipt['receipt_id']}")
    assert DeletionReceipt.objects.filter(pk=receipt["receipt_id"]).exists()
    assert list(Conversation.objects.values_list("external_id", flat=True)) == ["s2"]
    assert not SessionSummary.objects.exists()  # owned by the session's conversation: deleted with it
    assert api.delete("/imports/entries?namespace=proj&external_id=s1").status_code == 404


def test_deleting_one_subagent_transcript_keeps_its_session(api):
    append(api, "s1", [entry(1)])
    append(api, "s1/subagents/agent-1", [entry(2, isSidechain=True)])
    append(api, "s1/subagents/agent-2", [entry(3, isSidechain=True)])
    answer = api.delete("/imports/entries?namespace=proj&external_id=s1/subagents/agent-1")
    assert answer.status_code == 200 and answer.json()["counts"]["conversations"] == 1
    assert sorted(Conversation.objects.values_list("external_id", flat=True)) == ["s1", "s1/subagents/agent-2"]


def test_a_session_while_maintenance_runs_answers_409(api):
    from conversations.retention.lease import maintenance

    append(api, "s1", [entry(1)])
    with maintenance(kind="prune", actor="user:janitor"):
        answer = api.delete("/imports/entries?namespace=proj&external_id=s1")
    assert answer.status_code == 409 and error_of(answer)["code"] == "maintenance_running"
    assert Conversation.objects.filter(external_id="s1").exists()


# ---- sessions of Responses items (the OpenAI Agents SDK's Session) ----------------------------


def test_items_append_only_from_the_count_they_expect_and_bad_items_are_refused(api):
    first = api.post("/imports", {"format": "openai-responses", "namespace": "agents", "external_id": "s1",
                                  "entries": [{"role": "user", "content": "hi"}], "expected_entries": 0})
    assert first.status_code == 200 and first.json()["stream"]["entries"] == 1
    stale = api.post("/imports", {"format": "openai-responses", "namespace": "agents", "external_id": "s1",
                                  "entries": [{"role": "user", "content": "again"}], "expected_entries": 0})
    assert stale.status_code == 409 and error_of(stale)["code"] == "entries_conflict"
    for body, field in (({"entries": ["text"]}, "entries"), ({"entries": [{}], "external_id": "a#b"}, "session_id"),
                        ({"entries": [{}], "summary": {}}, "summary")):
        answer = api.post("/imports", {"format": "openai-responses", "namespace": "agents", "external_id": "s2",
                                       **body})
        assert answer.status_code == 422 and error_of(answer)["field"] == field, answer.content
    assert api.post("/imports/sessions/pop", {"namespace": "agents", "session_id": "s1",
                                              "expected_entries": 5}).status_code == 409
    assert api.post("/imports/sessions/pop", {"namespace": "agents", "session_id": "s1", "x": 1}).status_code == 422
    assert list(Conversation.objects.values_list("external_id", flat=True)) == ["s1"]


def test_entries_come_back_as_the_bytes_that_were_stored(api):
    # A transcript file's lines are kept exactly as written (spacing, number spellings, key
    # order, escapes) and loaded back byte for byte, not parsed and encoded again.
    session = "7d3c1b2a-0f4e-4c5d-9e8f-1a2b3c4d5e6f"
    lines = [
        '{"type": "user", "uuid": "a1", "sessionId": "SESSION", "timestamp": "2026-05-01T10:00:00.000Z", '
        '"message": {"role": "user", "content": "caf\\u00e9 costs 1.50"}, "cost": 1.50, "big": 1e2}',
        '{"uuid":"a2","type":"assistant","parentUuid":"a1","sessionId":"SESSION","timestamp":"2026-05-01T10:00:01.000Z",'
        '"message":{"role":"assistant","content":[{"type":"text","text":"Ok \\ud83d\\ude00"}]},"n":-0.0}',
    ]
    lines = [line.replace("SESSION", session) for line in lines]
    answer = api.post("/imports", {"format": "claude-code", "namespace": "proj", "content": "\n".join(lines) + "\n"})
    assert answer.status_code in (200, 201), answer.content
    loaded = api.get("/imports/entries", {"namespace": "proj", "external_id": session})
    assert loaded.status_code == 200
    text = loaded.content.decode()
    assert '"items": [' + ", ".join(lines) + "]" in text, text[:600]
    assert [e["uuid"] for e in loaded.json()["items"]] == ["a1", "a2"]
