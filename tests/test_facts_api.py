import pytest

from conversations import api_keys, store
from conversations.facts import store as facts
from conversations.facts.models import Fact, FactAccess, FactEvent
from conversations.roles import ADMIN, AUDITOR, REVIEWER
from tests.api_support import login_as

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("answer_shapes")]


def bearer(*scopes):
    _, secret = api_keys.create_api_key(name="agent-" + "-".join(scopes), scopes=list(scopes))
    return {"HTTP_AUTHORIZATION": f"Bearer {secret}"}


@pytest.fixture
def writer():
    return bearer("facts:write")


@pytest.fixture
def reader():
    return bearer("facts:read")


@pytest.fixture
def source():
    c = store.create_conversation(title="t", subject="cust:7")
    for text in ("hi", "I always want a replacement, never a refund", "ok"):
        store.append_message(conversation_id=c.pk, message={"kind": "user", "content": text})
    return c


def propose(client, headers, **body):
    data = {"subject": "cust:7", "text": "Prefers replacements over refunds", "category": "preference",
            "importance": 7, **body}
    return client.post("/api/v1/facts", data, content_type="application/json", **headers)


def test_it_proposes_a_fact_with_provenance(client, writer, source):
    r = propose(client, writer, source_conversation_id=str(source.pk), source_position=1)
    assert r.status_code == 201, r.content
    body = r.json()
    assert body["status"] == "proposed"
    assert body["source"] == {"conversation_id": str(source.pk), "position": 1}
    assert body["created_by"].startswith("key:")
    assert body["expires_at"] is not None
    assert FactEvent.objects.filter(fact_id=body["id"], kind="proposed").count() == 1


@pytest.mark.parametrize(
    "body, field",
    [
        ({"importance": 0}, "importance"),
        ({"importance": 11}, "importance"),
        ({"text": "   "}, "text"),
        ({"category": "gossip"}, "category"),
        ({"subject": ""}, "subject"),
        ({"source_position": 3}, "source_position"),
        ({"source_position": -1}, "source_position"),
        ({"valid_from": "2026-01-01T00:00:00"}, "valid_from"),
        ({"expires_at": "2001-01-01T00:00:00Z"}, "expires_at"),
    ],
)
def test_it_rejects_bad_input_and_writes_nothing(client, writer, source, body, field):
    body.setdefault("source_conversation_id", str(source.pk))
    body.setdefault("source_position", 0)
    r = propose(client, writer, **body)
    assert 400 <= r.status_code < 500, r.content
    assert r.json()["error"]["field"] == field
    assert not Fact.objects.exists()
    assert not FactEvent.objects.exists()


def test_it_rejects_a_source_conversation_that_does_not_exist(client, writer):
    r = propose(client, writer, source_conversation_id="6f1c2c1e-0000-4000-8000-000000000000", source_position=0)
    assert r.status_code == 404
    assert r.json()["error"]["field"] == "source_conversation_id"
    assert not Fact.objects.exists()


def test_it_needs_the_write_scope_to_propose(client, reader):
    assert propose(client, reader).status_code == 403
    assert propose(client, bearer("write")).status_code == 403
    assert propose(client, {}).status_code == 401
    assert not Fact.objects.exists()


def test_it_recalls_only_approved_facts_best_first(client, reader):
    a = facts.propose_fact(subject="cust:7", text="Prefers replacements over refunds", importance=9, created_by="k")
    b = facts.propose_fact(subject="cust:7", text="Lives in Leeds", importance=2, created_by="k")
    facts.propose_fact(subject="cust:7", text="Wants refunds for everything", importance=9, created_by="k")
    facts.approve_fact(fact_id=a.pk, actor="user:r")
    facts.approve_fact(fact_id=b.pk, actor="user:r")
    r = client.get("/api/v1/facts/recall", {"subject": "cust:7", "query": "refund replacement", "limit": 5}, **reader)
    assert r.status_code == 200, r.content
    got = r.json()["items"]
    assert [g["fact"]["id"] for g in got] == [a.pk, b.pk]
    assert got[0]["parts"]["relevance"] == 1.0
    assert got[0]["fact"]["access_count"] == 1
    # An agent's recall is not a person's read.
    assert not FactAccess.objects.exists()


def test_it_rejects_a_bad_recall_limit(client, reader):
    r = client.get("/api/v1/facts/recall", {"subject": "cust:7", "limit": 0}, **reader)
    assert r.status_code == 422
    assert r.json()["error"]["field"] == "limit"


def test_it_invalidates_once(client, writer):
    f = facts.propose_fact(subject="cust:7", text="Lives in Leeds", importance=2, created_by="k")
    facts.approve_fact(fact_id=f.pk, actor="user:r")
    url = f"/api/v1/facts/{f.pk}/invalidate"
    body = {"invalid_at": "2030-01-01T00:00:00Z", "reason": "moved to York"}
    r = client.post(url, body, content_type="application/json", **writer)
    assert r.status_code == 200, r.content
    assert r.json()["invalid_at"].startswith("2030-01-01")
    again = client.post(url, body, content_type="application/json", **writer)
    assert again.status_code == 409
    assert again.json()["error"]["code"] == "already_invalidated"
    assert FactEvent.objects.filter(fact=f, kind="invalidated").count() == 1


def test_it_refuses_to_invalidate_without_a_reason_or_a_fact(client, writer):
    f = facts.propose_fact(subject="cust:7", text="Lives in Leeds", importance=2, created_by="k")
    facts.approve_fact(fact_id=f.pk, actor="user:r")
    r = client.post(f"/api/v1/facts/{f.pk}/invalidate", {"reason": " "}, content_type="application/json", **writer)
    assert r.status_code == 422
    assert r.json()["error"]["field"] == "reason"
    r = client.post("/api/v1/facts/999999/invalidate", {"reason": "x"}, content_type="application/json", **writer)
    assert r.status_code == 404
    assert Fact.objects.get(pk=f.pk).invalid_at is None


def test_it_refuses_to_invalidate_a_proposal(client, writer):
    f = facts.propose_fact(subject="cust:7", text="Lives in Leeds", importance=2, created_by="k")
    r = client.post(f"/api/v1/facts/{f.pk}/invalidate", {"reason": "x"}, content_type="application/json", **writer)
    assert r.status_code == 409


def test_it_lists_and_shows_a_subjects_facts(client, reader):
    f = facts.propose_fact(subject="cust:7", text="Lives in Leeds", importance=2, created_by="k")
    r = client.get("/api/v1/facts", {"subject": "cust:7"}, **reader)
    assert [x["id"] for x in r.json()["items"]] == [f.pk]
    r = client.get(f"/api/v1/facts/{f.pk}", **reader)
    assert [e["kind"] for e in r.json()["events"]] == ["proposed"]


def _login(client, role):
    return login_as(client, role)


def test_it_forbids_auditors_every_facts_endpoint(client):
    f = facts.propose_fact(subject="cust:7", text="Lives in Leeds", importance=2, created_by="k")
    _login(client, AUDITOR)
    assert client.get("/api/v1/facts", {"subject": "cust:7"}).status_code == 403
    assert client.get("/api/v1/facts/recall", {"subject": "cust:7"}).status_code == 403
    assert client.get(f"/api/v1/facts/{f.pk}").status_code == 403
    assert propose(client, {}).status_code in (401, 403)
    assert not FactAccess.objects.exists()


def test_it_logs_a_reviewers_read_through_the_api(client):
    facts.propose_fact(subject="cust:7", text="Lives in Leeds", importance=2, created_by="k")
    user = _login(client, REVIEWER)
    assert client.get("/api/v1/facts", {"subject": "cust:7"}).status_code == 200
    log = FactAccess.objects.get()
    assert (log.actor, log.subject) == (f"user:{user.username}", "cust:7")


def test_it_lets_an_admin_session_propose(client):
    _login(client, ADMIN)
    assert propose(client, {}).status_code == 201


def test_it_404s_ids_too_large_for_the_database(client, reader, writer):
    huge = 10**30
    assert client.get(f"/api/v1/facts/{huge}", **reader).status_code == 404
    r = client.post(f"/api/v1/facts/{huge}/invalidate", {"reason": "x"}, content_type="application/json", **writer)
    assert r.status_code == 404


def test_it_rejects_huge_numbers_in_a_proposal(client, writer, source):
    r = propose(client, writer, importance=10**30)
    assert r.status_code == 422
    r = propose(client, writer, source_conversation_id=str(source.pk), source_position=2**70)
    assert r.status_code == 422
    assert not Fact.objects.exists()


def test_it_logs_a_reviewers_recall_but_not_an_agents(client, reader):
    client.get("/api/v1/facts/recall", {"subject": "cust:7"}, **reader)
    assert not FactAccess.objects.exists()
    _login(client, REVIEWER)
    assert client.get("/api/v1/facts/recall", {"subject": "cust:7"}).status_code == 200
    assert FactAccess.objects.get().view == "api recall"
