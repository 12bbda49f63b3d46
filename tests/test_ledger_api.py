"""The ledger's API: task state with versions, the actions ledger, workspace snapshots, the export."""

import csv
import io
import json

import pytest

from conversations import api_keys, store
from conversations.ledger.models import Action, TaskStateEvent, WorkspaceSnapshot
from conversations.project_store import create_project
from tests.api_support import Api, error_of, login_as, make_key

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("answer_shapes")]

KEY = "refund:T-40219:SU-88421:oak-shelf:11800"
COMMIT = "9f2c4e1b7a0d3c5e8f6a2b4d1c3e5f7a9b0c2d4e"


def state_path(c):
    return f"/conversations/{c.pk}/state"


def actions_path(c):
    return f"/conversations/{c.pk}/actions"


def refund_body(**extra):
    return {"idempotency_key": KEY, "name": "issue_refund", "arguments": {"order": "SU-88421", "amount_cents": 11800},
            "result": {"refund_id": "RF-77120"}, **extra}


# -- task state -----------------------------------------------------------------------


def test_it_reads_an_unset_state_as_version_zero(reader, convo):
    r = reader.get(state_path(convo))
    assert r.status_code == 200
    assert r.json() == {"conversation_id": str(convo.pk), "version": 0, "state": {}, "position": None,
                        "updated_at": None, "updated_by": None}


def test_it_puts_a_state_and_reads_it_back_with_its_version(writer, convo):
    r = writer.put(state_path(convo), {"state": {"order": "SU-88421"}, "expected_version": 0})
    assert r.status_code == 200, r.content
    body = r.json()
    assert body["version"] == 1 and body["changed"] is True and body["position"] == 3
    assert body["changes"] == [{"op": "add", "path": "/order", "new": "SU-88421"}]
    assert body["updated_by"] == "key:writer"
    r = writer.put(state_path(convo), {"state": {"order": "SU-88421", "decision": "refund"}, "expected_version": 1})
    assert r.json()["version"] == 2
    got = writer.get(state_path(convo)).json()
    assert got["version"] == 2 and got["state"] == {"order": "SU-88421", "decision": "refund"}


def test_a_stale_version_is_a_409_version_conflict(writer, convo):
    writer.put(state_path(convo), {"state": {"a": 1}, "expected_version": 0})
    r = writer.put(state_path(convo), {"state": {"a": 2}, "expected_version": 0})
    assert r.status_code == 409
    error = error_of(r)
    assert error["code"] == "version_conflict" and error["field"] == "expected_version"
    assert writer.get(state_path(convo)).json()["state"] == {"a": 1}


@pytest.mark.parametrize("body, field", [
    ({"state": [1], "expected_version": 0}, "state"),
    ({"state": {"a": 1}}, "expected_version"),
    ({"state": {"a": 1}, "expected_version": "0"}, "expected_version"),
    ({"state": {"a": 1}, "expected_version": -1}, "expected_version"),
    ({"state": {"a": 1}, "expected_version": 0, "extra": 1}, "extra"),
])
def test_a_bad_state_body_is_a_422_naming_the_field(writer, convo, body, field):
    r = writer.put(state_path(convo), body)
    assert r.status_code == 422, r.content
    assert error_of(r)["field"] == field
    assert not TaskStateEvent.objects.exists()


def test_the_history_lists_every_version_with_what_changed(writer, convo):
    for version, state in enumerate(({"a": 1}, {"a": 2}, {"a": 2, "b": 3})):
        writer.put(state_path(convo), {"state": state, "expected_version": version})
    r = writer.get(state_path(convo) + "/history", {"limit": 2})
    page = r.json()
    assert [i["version"] for i in page["items"]] == [1, 2] and page["next"]
    assert [i["version"] for i in writer.get(state_path(convo) + "/history", {"cursor": page["next"]}).json()[
        "items"]] == [3]
    assert page["items"][1]["changes"] == [{"op": "replace", "path": "/a", "old": 1, "new": 2}]
    rest = writer.get(state_path(convo) + "/history", {"after": 2}).json()
    assert [i["version"] for i in rest["items"]] == [3] and rest["next"] is None


def test_reading_needs_read_and_writing_needs_write(client, convo):
    reader = Api(client, make_key(["read"], name="r"))
    assert reader.put(state_path(convo), {"state": {}, "expected_version": 0}).status_code == 403
    assert reader.post(actions_path(convo), refund_body()).status_code == 403
    facts_only = Api(client, make_key(["facts:read"], name="f"))
    assert facts_only.get(state_path(convo)).status_code == 403
    assert facts_only.get("/actions", {"idempotency_key": KEY}).status_code == 403
    assert facts_only.get("/actions/export").status_code == 403
    assert Api(client, None).get(state_path(convo)).status_code == 401


def test_an_auditor_session_may_read_state_and_actions(client, convo):
    store_writer = Api(client, make_key(["write", "read"], name="w"))
    store_writer.post(actions_path(convo), refund_body())
    login_as(client, "auditor")
    session = Api(client, None)
    assert session.get(state_path(convo)).status_code == 200
    assert session.get(actions_path(convo)).json()["items"][0]["idempotency_key"] == KEY


def test_a_missing_conversation_is_a_404(writer):
    missing = "3f1c2a9e-8d4b-4c61-9a57-0b7e6f2d1c88"
    assert writer.get(f"/conversations/{missing}/state").status_code == 404
    assert writer.put(f"/conversations/{missing}/state", {"state": {}, "expected_version": 0}).status_code == 404
    assert writer.post(f"/conversations/{missing}/actions", refund_body()).status_code == 404
    assert writer.get("/conversations/not-an-id/snapshots").status_code == 404


# -- actions --------------------------------------------------------------------------


def test_the_first_refund_is_201_performed_and_the_retry_200_already_performed(writer, convo):
    first = writer.post(actions_path(convo), refund_body())
    assert first.status_code == 201, first.content
    body = first.json()
    assert body["status"] == "performed"
    assert body["action"] == body["attempt"]
    assert body["action"]["idempotency_key"] == KEY and body["action"]["position"] == 3
    assert body["action"]["result"] == {"refund_id": "RF-77120"}

    retry = writer.post(actions_path(convo), refund_body(result={"status": "already_performed"}))
    assert retry.status_code == 200
    again = retry.json()
    assert again["status"] == "already_performed"
    assert again["action"] == body["action"]
    assert again["attempt"]["status"] == "already_performed"
    assert again["attempt"]["original_id"] == body["action"]["id"]
    assert again["attempt"]["result"] == {"status": "already_performed"}
    assert Action.objects.count() == 2


def test_a_failed_action_answers_201_failed_and_a_later_success_is_performed(writer, convo):
    failed = writer.post(actions_path(convo), refund_body(status="failed", result={"error": "timeout"}))
    assert failed.status_code == 201 and failed.json()["status"] == "failed"
    done = writer.post(actions_path(convo), refund_body())
    assert done.status_code == 201 and done.json()["status"] == "performed"
    assert done.json()["action"]["original_id"] == failed.json()["action"]["id"]


@pytest.mark.parametrize("body, field", [
    ({"name": "issue_refund"}, "idempotency_key"),
    ({"idempotency_key": "", "name": "n"}, "idempotency_key"),
    ({"idempotency_key": "k" * 256, "name": "n"}, "idempotency_key"),
    ({"idempotency_key": "k"}, "name"),
    ({"idempotency_key": "k", "name": "n", "status": "already_performed"}, "status"),
    ({"idempotency_key": 5, "name": "n"}, "idempotency_key"),
])
def test_a_bad_action_is_a_422_naming_the_field(writer, convo, body, field):
    r = writer.post(actions_path(convo), body)
    assert r.status_code == 422, r.content
    assert error_of(r)["field"] == field
    assert not Action.objects.exists()


def test_bad_bodies_get_the_apis_clear_4xx(writer, convo):
    assert writer.post(actions_path(convo), raw="{not json").status_code == 400
    form = "application/x-www-form-urlencoded"
    assert writer.post(actions_path(convo), raw="a=b", content_type=form).status_code == 415
    assert writer.put(state_path(convo), raw='{"state": {"a": NaN}, "expected_version": 0}').status_code == 400


def test_lookup_answers_already_done_across_conversations(writer, convo):
    assert writer.get("/actions", {"idempotency_key": KEY}).json()["performed"] is False
    writer.post(actions_path(convo), refund_body())
    resumed = store.create_conversation(title="resumed")
    writer.post(actions_path(resumed), refund_body())
    r = writer.get("/actions", {"idempotency_key": KEY})
    assert r.status_code == 200
    found = r.json()
    assert found["performed"] is True and found["namespace"] == ""
    assert found["action"]["conversation_id"] == str(convo.pk)
    assert [e["status"] for e in found["entries"]] == ["performed", "already_performed"]
    by_conversation = writer.get("/actions", {"idempotency_key": KEY, "conversation_id": str(resumed.pk)}).json()
    assert by_conversation["performed"] is True
    assert writer.get("/actions", {"idempotency_key": KEY, "namespace": "elsewhere"}).json()["performed"] is False


def test_a_business_key_is_its_projects_own(client, writer, convo):
    """Two projects' agents refunding the same order key each perform it once, and neither's
    lookup, retry or export finds the other's entry."""
    other = create_project(slug="other")
    theirs = Api(client, api_keys.create_api_key(name="other-agent", scopes=["read", "write"], project=other)[1])
    assert writer.post(actions_path(convo), refund_body()).status_code == 201
    made = theirs.post("/conversations", {"title": "theirs"}).json()
    answer = theirs.post(f"/conversations/{made['id']}/actions", refund_body())
    assert answer.status_code == 201 and answer.json()["status"] == "performed"
    assert Action.everywhere.filter(idempotency_key=KEY, status="performed").count() == 2
    found = theirs.get("/actions", {"idempotency_key": KEY}).json()
    assert found["action"]["conversation_id"] == made["id"] and len(found["entries"]) == 1
    assert writer.get("/actions", {"idempotency_key": KEY}).json()["action"]["conversation_id"] == str(convo.pk)
    exported = b"".join(theirs.get("/actions/export", {"format": "csv"}).streaming_content).decode()
    assert made["id"] in exported and str(convo.pk) not in exported


def test_lookup_refuses_a_namespace_that_contradicts_the_conversation(writer, convo):
    r = writer.get("/actions", {"idempotency_key": KEY, "namespace": "x", "conversation_id": str(convo.pk)})
    assert r.status_code == 422 and error_of(r)["field"] == "namespace"
    assert writer.get("/actions").status_code == 422


def test_the_lookup_is_one_indexed_query(writer, convo, django_assert_max_num_queries):
    from django.db import connection

    writer.post(actions_path(convo), refund_body())
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute("EXPLAIN QUERY PLAN SELECT * FROM ledger_action WHERE project_id = 1 AND namespace = '' AND "
                           "idempotency_key = %s ORDER BY id LIMIT 100", [KEY])
            plan = " ".join(str(row) for row in cursor.fetchall())
            assert "ledger_action_key_idx" in plan and "SCAN" not in plan.replace("SCAN ledger_action USING", "")
        else:
            cursor.execute("SET enable_seqscan = off")
            cursor.execute("EXPLAIN SELECT * FROM ledger_action WHERE project_id = 1 AND namespace = '' AND "
                           "idempotency_key = %s "
                           "ORDER BY id LIMIT 100", [KEY])
            plan = " ".join(row[0] for row in cursor.fetchall())
            cursor.execute("SET enable_seqscan = on")
            assert "ledger_action_key_idx" in plan or "ledger_action_performed_once" in plan
    # The request itself: the key's authentication, then one SELECT of the ledger.
    with django_assert_max_num_queries(3) as queries:
        assert writer.get("/actions", {"idempotency_key": KEY}).status_code == 200
    assert sum("ledger_action" in q["sql"] for q in queries.captured_queries) == 1


def test_the_conversation_lists_its_actions_in_keyset_pages(writer, convo):
    for i in range(3):
        writer.post(actions_path(convo), refund_body(idempotency_key=f"k{i}"))
    page = writer.get(actions_path(convo), {"limit": 2}).json()
    assert [a["idempotency_key"] for a in page["items"]] == ["k0", "k1"] and page["next"]
    rest = writer.get(actions_path(convo), {"cursor": page["next"]}).json()
    assert [a["idempotency_key"] for a in rest["items"]] == ["k2"] and rest["next"] is None


# -- the reconciliation export --------------------------------------------------------


def test_the_export_is_csv_across_conversations_with_filters(writer, convo):
    writer.post(actions_path(convo), refund_body())
    writer.post(actions_path(convo), refund_body())
    other = store.create_conversation(title="other")
    writer.post(actions_path(other), refund_body(idempotency_key="=HYPERLINK(1)", name="send_voucher"))
    r = writer.get("/actions/export", {"format": "csv"})
    assert r.status_code == 200 and r["Content-Type"].startswith("text/csv")
    assert 'attachment; filename="actions-ledger.csv"' == r["Content-Disposition"]
    rows = list(csv.DictReader(io.StringIO(b"".join(r.streaming_content).decode())))
    assert [(row["name"], row["status"]) for row in rows] == [
        ("issue_refund", "performed"), ("issue_refund", "already_performed"), ("send_voucher", "performed")]
    assert json.loads(rows[0]["arguments"]) == {"order": "SU-88421", "amount_cents": 11800}
    assert rows[2]["idempotency_key"] == "'=HYPERLINK(1)"  # never a live formula in a spreadsheet
    only = writer.get("/actions/export", {"format": "jsonl", "name": "issue_refund", "status": "performed"})
    lines = [json.loads(line) for line in b"".join(only.streaming_content).decode().splitlines()]
    assert [(x["name"], x["status"], x["conversation_id"]) for x in lines] == [
        ("issue_refund", "performed", str(convo.pk))]


def test_the_export_filters_by_date_range_and_namespace(writer, convo):
    from datetime import timedelta

    from django.utils import timezone

    writer.post(actions_path(convo), refund_body())
    tomorrow = (timezone.now() + timedelta(days=1)).date().isoformat()
    yesterday = (timezone.now() - timedelta(days=1)).date().isoformat()

    def count(params):
        r = writer.get("/actions/export", {"format": "jsonl", **params})
        assert r.status_code == 200, r.content
        return len(b"".join(r.streaming_content).splitlines())

    assert count({"since": yesterday, "until": tomorrow}) == 1
    assert count({"since": tomorrow}) == 0
    assert count({"until": yesterday}) == 0
    assert count({"namespace": ""}) == 1 and count({"namespace": "tenant-b"}) == 0
    bad = writer.get("/actions/export", {"since": tomorrow, "until": yesterday})
    assert bad.status_code == 422 and error_of(bad)["field"] == "until"
    assert writer.get("/actions/export", {"since": "yesterday"}).status_code == 422
    assert writer.get("/actions/export", {"format": "xlsx"}).status_code == 422


def test_the_export_is_audited(writer, convo):
    from conversations.models import AuditEvent

    writer.get("/actions/export", {"name": "issue_refund"})
    event = AuditEvent.objects.get(action="actions.exported")
    assert event.actor == "key:writer" and event.detail["filters"] == {"name": "issue_refund"}


# -- snapshots ------------------------------------------------------------------------


def snapshot_body(convo, **extra):
    return {"position": 2, "repo": "/home/dev/shop", "ref": f"refs/memoryui/{convo.pk}/2", "commit": COMMIT,
            "files_changed": 3, "insertions": 41, "deletions": 7, **extra}


def test_a_snapshot_is_recorded_and_listed_with_its_restore_command(writer, convo):
    r = writer.post(f"/conversations/{convo.pk}/snapshots", snapshot_body(convo))
    assert r.status_code == 201, r.content
    body = r.json()
    assert body["ref"] == f"refs/memoryui/{convo.pk}/2" and body["commit"] == COMMIT
    assert body["restore"] == f"git -C /home/dev/shop stash apply refs/memoryui/{convo.pk}/2"
    assert writer.post(f"/conversations/{convo.pk}/snapshots", snapshot_body(convo)).status_code == 200
    clash = writer.post(f"/conversations/{convo.pk}/snapshots", snapshot_body(convo, commit="1" * 40))
    assert clash.status_code == 409 and error_of(clash)["code"] == "snapshot_exists"
    listed = writer.get(f"/conversations/{convo.pk}/snapshots").json()["items"]
    assert [(s["position"], s["insertions"]) for s in listed] == [(2, 41)]
    assert WorkspaceSnapshot.objects.count() == 1


@pytest.mark.parametrize("extra, field", [
    ({"commit": "zz"}, "commit"),
    ({"position": 99}, "position"),
    ({"ref": "refs/heads/main"}, "ref"),
    ({"insertions": -3}, "insertions"),
    ({"repo": ""}, "repo"),
])
def test_a_bad_snapshot_is_a_422_naming_the_field(writer, convo, extra, field):
    r = writer.post(f"/conversations/{convo.pk}/snapshots", snapshot_body(convo, **extra))
    assert r.status_code == 422, r.content
    assert error_of(r)["field"] == field


def test_the_schema_documents_every_ledger_endpoint_with_examples_and_scopes(client):
    schema = client.get("/api/v1/openapi.json").json()
    for path, method in [
        ("/api/v1/conversations/{conversation_id}/state", "get"),
        ("/api/v1/conversations/{conversation_id}/state", "put"),
        ("/api/v1/conversations/{conversation_id}/actions", "post"),
        ("/api/v1/actions", "get"),
        ("/api/v1/conversations/{conversation_id}/snapshots", "post"),
    ]:
        operation = schema["paths"][path][method]
        needs = "`write`" if method in ("put", "post") else "`read`"
        assert needs in operation["description"]
        assert any("example" in (c or {}) for r in operation["responses"].values()
                   for c in (r.get("content") or {}).values()), (path, method)
    put = schema["paths"]["/api/v1/conversations/{conversation_id}/state"]["put"]
    assert "409" in put["responses"]


# -- conversation exports -------------------------------------------------------------


def test_a_conversation_export_carries_its_task_state_actions_and_snapshots(writer, convo):
    writer.put(state_path(convo), {"state": {"decision": "refund"}, "expected_version": 0})
    writer.post(actions_path(convo), refund_body())
    writer.post(actions_path(convo), refund_body())
    writer.post(f"/conversations/{convo.pk}/snapshots", snapshot_body(convo))

    whole = json.loads(b"".join(writer.get(f"/conversations/{convo.pk}/export", {"format": "json"}).streaming_content))
    assert whole["task_state"]["version"] == 1 and whole["task_state"]["state"] == {"decision": "refund"}
    assert [e["version"] for e in whole["task_state_events"]] == [1]
    assert [a["status"] for a in whole["actions"]] == ["performed", "already_performed"]
    assert whole["workspace_snapshots"][0]["commit"] == COMMIT
    assert len(whole["messages"]) == 4

    lines = [json.loads(x) for x in b"".join(
        writer.get(f"/conversations/{convo.pk}/export", {"format": "jsonl"}).streaming_content).splitlines()]
    assert [x.get("record") for x in lines] == [None] * 4 + ["task_state_event", "action", "action",
                                                             "workspace_snapshot", "signed_head"]

    md = b"".join(writer.get(f"/conversations/{convo.pk}/export", {"format": "markdown"}).streaming_content).decode()
    assert "## Task state and actions" in md and "`/decision` added \"refund\"" in md
    assert f"`{KEY}` | already_performed |" in md and "stash apply" in md


def test_the_http_idempotency_key_replays_a_request_while_the_business_key_records_a_retry(writer, convo):
    # The header makes one *request* safe to resend (nothing is written again); the body's
    # idempotency_key is the action's business key (every attempt is recorded).
    first = writer.post(actions_path(convo), refund_body(), headers={"Idempotency-Key": "req-1"})
    replay = writer.post(actions_path(convo), refund_body(), headers={"Idempotency-Key": "req-1"})
    assert first.status_code == replay.status_code == 201
    assert replay["Idempotent-Replayed"] == "true" and replay.json() == first.json()
    assert Action.objects.count() == 1
    retry = writer.post(actions_path(convo), refund_body(), headers={"Idempotency-Key": "req-2"})
    assert retry.status_code == 200 and retry.json()["status"] == "already_performed"
    assert Action.objects.count() == 2
