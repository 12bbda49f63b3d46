"""Idempotency-Key on every POST: a retry gets the first answer and writes nothing."""

import json
from datetime import timedelta

import pytest
from django.utils import timezone

from conversations import api_keys, idempotency, projects, store
from conversations.models import AuditEvent, Checkpoint, Conversation, IdempotencyKey, Message
from conversations.project_store import create_project
from conversations.retention import erasure
from conversations.roles import assign_role
from tests.api_support import Api, error_of, login_as, make_key

pytestmark = pytest.mark.django_db

STEP = {"kind": "assistant", "content": "Refund issued for order 7."}


def keyed(key):
    return {"Idempotency-Key": key}


def test_it_answers_a_retry_with_the_first_answer_and_writes_once(writer, convo):
    path = f"/conversations/{convo.pk}/messages"
    first = writer.post(path, STEP, headers=keyed("step-1"))
    again = writer.post(path, STEP, headers=keyed("step-1"))
    assert first.status_code == again.status_code == 201
    assert again.content == first.content
    assert again["Idempotent-Replayed"] == "true"
    assert "Idempotent-Replayed" not in first
    assert Message.objects.of(convo.pk).count() == 5


def test_it_refuses_the_same_key_for_a_different_body(writer, convo):
    path = f"/conversations/{convo.pk}/messages"
    assert writer.post(path, STEP, headers=keyed("step-1")).status_code == 201
    other = writer.post(path, {"kind": "assistant", "content": "Something else"}, headers=keyed("step-1"))
    assert other.status_code == 422
    assert error_of(other) == {"code": "idempotency_key_reused", "field": "Idempotency-Key",
                               "message": error_of(other)["message"]}
    assert Message.objects.of(convo.pk).count() == 5


def test_it_refuses_the_same_key_on_another_path_or_query(writer, convo):
    assert writer.post(f"/conversations/{convo.pk}/messages", STEP, headers=keyed("k")).status_code == 201
    moved = writer.post(f"/conversations/{convo.pk}/messages?expected_position=5", STEP, headers=keyed("k"))
    assert error_of(moved)["code"] == "idempotency_key_reused"
    forked = writer.post(f"/conversations/{convo.pk}/forks", {"position": 1}, headers=keyed("k"))
    assert error_of(forked)["code"] == "idempotency_key_reused"
    assert Conversation.objects.count() == 1


def test_keys_belong_to_their_caller(client, convo):
    one = Api(client, make_key(["write"], name="one"))
    two = Api(client, make_key(["write"], name="two"))
    path = f"/conversations/{convo.pk}/messages"
    assert one.post(path, STEP, headers=keyed("shared")).status_code == 201
    theirs = two.post(path, STEP, headers=keyed("shared"))
    assert theirs.status_code == 201 and "Idempotent-Replayed" not in theirs
    assert Message.objects.of(convo.pk).count() == 6


def test_a_person_has_keys_of_their_own(client, convo):
    login_as(client, "admin")
    person = Api(client, None)
    path = f"/conversations/{convo.pk}/checkpoints"
    first = person.post(path, {"position": 1, "summary": "folded by hand"}, headers=keyed("fold-1"))
    again = person.post(path, {"position": 1, "summary": "folded by hand"}, headers=keyed("fold-1"))
    assert first.status_code == 201 and again["Idempotent-Replayed"] == "true"
    assert again.json() == first.json()
    assert Checkpoint.objects.of(convo.pk).count() == 1
    row = IdempotencyKey.objects.get()
    assert row.caller.startswith("user:")


def test_a_person_sending_a_stale_key_writes_as_themselves(client, convo):
    user = login_as(client, "admin")
    person = Api(client, "mui_revoked_or_mistyped")
    path = f"/conversations/{convo.pk}/messages"
    assert person.post(path, STEP, headers=keyed("k")).status_code == 201
    assert person.post(path, STEP, headers=keyed("k"))["Idempotent-Replayed"] == "true"
    assert IdempotencyKey.objects.get().caller == f"user:{user.pk}"
    assert Message.objects.of(convo.pk).count() == 5


# ---- one key space per project ------------------------------------------------------------


CREATE = {"title": "Refund for order 7", "subject": "customer:42", "namespace": "support-bot",
          "external_id": "session-1"}


def project_key(project) -> str:
    return api_keys.create_api_key(name=f"{project.slug}-agent", scopes=["read", "write"], project=project)[1]


def test_the_same_key_from_two_projects_keys_is_two_writes(client):
    alpha, beta = create_project(slug="alpha"), create_project(slug="beta")
    ours = Api(client, project_key(alpha)).post("/conversations", CREATE, headers=keyed("create-1"))
    theirs = Api(client, project_key(beta)).post("/conversations", CREATE, headers=keyed("create-1"))
    assert ours.status_code == theirs.status_code == 201
    assert "Idempotent-Replayed" not in theirs and theirs.json()["id"] != ours.json()["id"]
    assert {c.project_id for c in Conversation.everywhere.filter(external_id="session-1")} == {alpha.pk, beta.pk}
    assert dict(IdempotencyKey.objects.values_list("project_id", "key")) == {alpha.pk: "create-1",
                                                                            beta.pk: "create-1"}


def test_a_person_acting_in_two_projects_writes_once_in_each(client):
    alpha, beta = create_project(slug="alpha"), create_project(slug="beta")
    person = login_as(client, None, "ann")
    assign_role(person, "admin", alpha)
    assign_role(person, "admin", beta)
    api = Api(client, None)
    made = {slug: api.post("/conversations", CREATE, headers={**keyed("create-1"), "X-Memoryui-Project": slug})
            for slug in ("alpha", "beta")}
    assert made["alpha"].status_code == made["beta"].status_code == 201
    assert "Idempotent-Replayed" not in made["beta"]
    again = api.post("/conversations", CREATE, headers={**keyed("create-1"), "X-Memoryui-Project": "beta"})
    assert again["Idempotent-Replayed"] == "true" and again.json()["id"] == made["beta"].json()["id"]
    assert Conversation.everywhere.get(pk=made["alpha"].json()["id"]).project_id == alpha.pk
    assert Conversation.everywhere.get(pk=made["beta"].json()["id"]).project_id == beta.pk


def test_a_deletion_request_forgets_its_own_projects_keys_only(client):
    alpha, beta = create_project(slug="alpha"), create_project(slug="beta")
    for project in (alpha, beta):
        assert Api(client, project_key(project)).post("/conversations", CREATE,
                                                      headers=keyed("create-1")).status_code == 201
    with projects.scoped(projects.one(alpha.pk)):
        erasure.execute_deletion(subject="customer:42", actor="user:admin")
    assert list(IdempotencyKey.objects.values_list("project_id", flat=True)) == [beta.pk]


@pytest.mark.parametrize("bad", ["", " ", "has space", "x" * 256, "naïve", "tab\there"])
def test_it_refuses_a_malformed_key_and_writes_nothing(writer, convo, bad):
    response = writer.post(f"/conversations/{convo.pk}/messages", STEP, headers=keyed(bad))
    assert response.status_code == 422
    assert error_of(response)["field"] == "Idempotency-Key"
    assert Message.objects.of(convo.pk).count() == 4


def test_it_accepts_every_visible_ascii_character_up_to_255(writer, convo):
    key = "".join(chr(c) for c in range(0x21, 0x7F)) * 3
    key = key[:255]
    path = f"/conversations/{convo.pk}/messages"
    assert writer.post(path, STEP, headers=keyed(key)).status_code == 201
    assert writer.post(path, STEP, headers=keyed(key))["Idempotent-Replayed"] == "true"


def test_a_refused_request_is_not_kept_and_runs_again(writer, convo):
    path = f"/conversations/{convo.pk}/messages?expected_position=2"
    refused = writer.post(path, STEP, headers=keyed("late"))
    assert refused.status_code == 409
    assert IdempotencyKey.objects.count() == 0
    again = writer.post(path, STEP, headers=keyed("late"))
    assert again.status_code == 409 and "Idempotent-Replayed" not in again


def test_the_key_and_the_write_commit_together(writer, convo, monkeypatch):
    """A failure between the write and the key row leaves neither: one transaction."""
    def broken_insert(*args, **kwargs):
        raise RuntimeError("the disk filled up right here")

    monkeypatch.setattr(idempotency, "_insert", broken_insert)
    writer.client.raise_request_exception = False
    response = writer.post(f"/conversations/{convo.pk}/messages", STEP, headers=keyed("k1"))
    assert response.status_code == 500
    assert Message.objects.of(convo.pk).count() == 4
    created = writer.post("/conversations", {"title": "never"}, headers=keyed("k2"))
    assert created.status_code == 500
    assert not Conversation.objects.filter(title="never").exists()
    assert IdempotencyKey.objects.count() == 0


def test_the_stored_answer_is_the_response_and_nothing_of_the_request(writer, convo):
    # Words no uuid, hash or timestamp can contain: only letters outside a-f.
    secret_text = "the customer's card ends in 4242, password quokka-wombat"
    response = writer.post(f"/conversations/{convo.pk}/messages", {"kind": "user", "content": secret_text},
                           headers=keyed("k"))
    row = IdempotencyKey.objects.get()
    assert row.body == response.content.decode()
    assert row.status == 201 and row.content_type == "application/json"
    assert row.conversation_id == convo.pk
    stored = json.dumps([getattr(row, f.attname) for f in IdempotencyKey._meta.fields], default=str)
    assert "quokka-wombat" not in stored and "card ends in" not in stored


def test_an_expired_key_runs_again(writer, convo):
    path = f"/conversations/{convo.pk}/messages"
    assert writer.post(path, STEP, headers=keyed("old")).status_code == 201
    IdempotencyKey.objects.update(created_at=timezone.now() - timedelta(hours=25))
    again = writer.post(path, STEP, headers=keyed("old"))
    assert again.status_code == 201 and "Idempotent-Replayed" not in again
    assert Message.objects.of(convo.pk).count() == 6


def test_the_lifetime_is_a_setting(writer, convo, settings):
    settings.MEMORYUI_IDEMPOTENCY_HOURS = 1
    path = f"/conversations/{convo.pk}/messages"
    writer.post(path, STEP, headers=keyed("k"))
    IdempotencyKey.objects.update(created_at=timezone.now() - timedelta(minutes=61))
    assert "Idempotent-Replayed" not in writer.post(path, STEP, headers=keyed("k"))


def test_delete_expired_removes_only_old_keys(writer, convo):
    for i in range(5):
        writer.post(f"/conversations/{convo.pk}/messages", STEP, headers=keyed(f"k{i}"))
    IdempotencyKey.objects.filter(key__in=["k0", "k1", "k2"]).update(created_at=timezone.now() - timedelta(days=2))
    assert idempotency.delete_expired(batch_size=2) == 3
    assert sorted(IdempotencyKey.objects.values_list("key", flat=True)) == ["k3", "k4"]


def test_a_request_without_a_key_keeps_nothing(writer, convo):
    writer.post(f"/conversations/{convo.pk}/messages", STEP)
    writer.post(f"/conversations/{convo.pk}/messages", STEP)
    assert Message.objects.of(convo.pk).count() == 6
    assert IdempotencyKey.objects.count() == 0


def test_an_unauthenticated_request_with_a_key_is_refused_and_keeps_nothing(client, convo):
    anonymous = Api(client, "mui_nope_nope")
    response = anonymous.post(f"/conversations/{convo.pk}/messages", STEP, headers=keyed("k"))
    assert response.status_code == 401
    assert IdempotencyKey.objects.count() == 0


def test_every_kind_of_write_replays(writer, convo):
    cases = [
        ("/conversations", {"title": "New", "subject": "customer:9"}),
        (f"/conversations/{convo.pk}/messages/batch", {"messages": [STEP, STEP]}),
        (f"/conversations/{convo.pk}/checkpoints", {"position": 3, "summary": "folded"}),
        (f"/conversations/{convo.pk}/forks", {"position": 1, "title": "branch"}),
    ]
    for i, (path, body) in enumerate(cases):
        first = writer.post(path, body, headers=keyed(f"w{i}"))
        again = writer.post(path, body, headers=keyed(f"w{i}"))
        assert first.status_code == 201, first.content
        assert (again.status_code, again.content, again["Idempotent-Replayed"]) == (201, first.content, "true")
    assert Conversation.objects.count() == 3  # convo, the new one, the fork
    assert Message.objects.of(convo.pk).count() == 6
    assert Checkpoint.objects.of(convo.pk).count() == 1
    assert AuditEvent.objects.filter(action="conversation.forked").count() == 1


def test_facts_writes_replay(client):
    agent = Api(client, make_key(["facts:write", "facts:read"], name="extractor"))
    body = {"subject": "customer:42", "text": "Prefers email over phone.", "importance": 3}
    first = agent.post("/facts", body, headers=keyed("fact-1"))
    again = agent.post("/facts", body, headers=keyed("fact-1"))
    assert first.status_code == 201
    assert (again.status_code, again.content, again["Idempotent-Replayed"]) == (201, first.content, "true")
    from conversations.facts.models import Fact

    assert Fact.objects.count() == 1
    assert IdempotencyKey.objects.get().subject_norm == "customer:42"


def test_the_schema_documents_the_header_on_every_post(client):
    schema = client.get("/api/v1/openapi.json").json()
    posts = {path: item["post"] for path, item in schema["paths"].items() if "post" in item}
    assert "/api/v1/conversations/{conversation_id}/messages/batch" in posts
    assert "/api/v1/facts" in posts and "/api/v1/prune" in posts
    for path, operation in posts.items():
        header = [p for p in operation["parameters"] if p["name"] == "Idempotency-Key"]
        assert header and header[0]["in"] == "header" and header[0]["schema"]["maxLength"] == 255, path
        ok = [r for s, r in operation["responses"].items() if s.startswith("2")]
        assert all("Idempotent-Replayed" in r.get("headers", {}) for r in ok), path


@pytest.mark.django_db(transaction=True)
def test_prune_and_deletion_requests_replay(client):
    janitor = Api(client, make_key(["admin"], name="janitor"))
    first = janitor.post("/prune", {"older_than_days": 30}, headers=keyed("prune-1"))
    again = janitor.post("/prune", {"older_than_days": 30}, headers=keyed("prune-1"))
    assert first.status_code == 200
    assert (again.content, again["Idempotent-Replayed"]) == (first.content, "true")
    from conversations.retention.models import DeletionReceipt, PruneRun

    assert PruneRun.objects.count() == 1

    store.create_conversation(title="to go", subject="customer:77")
    body = {"subject": "customer:77"}
    first = janitor.post("/deletion-requests", body, headers=keyed("erase-1"))
    again = janitor.post("/deletion-requests", body, headers=keyed("erase-1"))
    assert first.status_code == 201
    assert (again.content, again["Idempotent-Replayed"]) == (first.content, "true")
    assert DeletionReceipt.objects.count() == 1
    other = janitor.post("/deletion-requests", {"subject": "customer:78"}, headers=keyed("erase-1"))
    assert error_of(other)["code"] == "idempotency_key_reused"


@pytest.mark.django_db(transaction=True)
def test_a_claim_in_progress_answers_409_and_a_dead_one_is_taken_over(client):
    janitor = Api(client, make_key(["admin"], name="janitor"))
    body = {"older_than_days": 30}
    request = client.post("/api/v1/prune", json.dumps(body), content_type="application/json",
                          headers={"Authorization": f"Bearer {janitor.key}", "Idempotency-Key": "p"})
    assert request.status_code == 200
    row = IdempotencyKey.objects.get()
    # As if a process had claimed the key and were still running the prune:
    IdempotencyKey.objects.filter(pk=row.pk).update(status=0, body="", created_at=timezone.now())
    busy = janitor.post("/prune", body, headers=keyed("p"))
    assert busy.status_code == 409 and error_of(busy)["code"] == "idempotency_key_in_progress"
    assert busy["Retry-After"]
    # … and as if that process had died long ago:
    IdempotencyKey.objects.update(created_at=timezone.now() - timedelta(seconds=idempotency.CLAIM_STALE_SECONDS + 5))
    taken = janitor.post("/prune", body, headers=keyed("p"))
    assert taken.status_code == 200 and "Idempotent-Replayed" not in taken
    assert IdempotencyKey.objects.get().status == 200


@pytest.mark.django_db(transaction=True)
def test_erasure_removes_the_keys_that_reference_what_it_erases(client):
    agent = Api(client, make_key(["read", "write", "facts:write"], name="agent"))
    janitor = Api(client, make_key(["admin"], name="janitor"))
    made = agent.post("/conversations", {"title": "Refund for Ada Lovelace", "subject": "customer:ada"},
                      headers=keyed("c1")).json()
    agent.post(f"/conversations/{made['id']}/messages", STEP, headers=keyed("m1"))
    # A fork's answer names its parent in its lineage; the fork itself is kept.
    fork = agent.post(f"/conversations/{made['id']}/forks", {"position": 0, "title": "kept branch"},
                      headers=keyed("f1")).json()
    agent.post("/facts", {"subject": "customer:ada", "text": "Ada prefers letters.", "importance": 2},
               headers=keyed("fact1"))
    other = agent.post("/conversations", {"title": "Someone else"}, headers=keyed("c2")).json()
    # not about Ada
    Conversation.objects.filter(pk=fork["id"]).update(subject="customer:kept", subject_norm="customer:kept")

    receipt = janitor.post("/deletion-requests", {"subject": "customer:ada"}).json()

    assert receipt["counts"]["conversations"] == 1
    kept = set(IdempotencyKey.objects.values_list("key", flat=True))
    assert kept == {"c2"}, kept
    assert IdempotencyKey.objects.get(key="c2").conversation_id is not None
    assert other["id"] in IdempotencyKey.objects.get(key="c2").body
    assert receipt["verification"]["status"] == "verified", receipt["verification"]


def test_the_prune_run_deletes_expired_keys(writer, convo):
    from conversations.retention.pruning import prune_older_than

    writer.post(f"/conversations/{convo.pk}/messages", STEP, headers=keyed("old"))
    writer.post(f"/conversations/{convo.pk}/messages", STEP, headers=keyed("fresh"))
    IdempotencyKey.objects.filter(key="old").update(created_at=timezone.now() - timedelta(hours=30))
    prune_older_than(days=90)
    assert list(IdempotencyKey.objects.values_list("key", flat=True)) == ["fresh"]
