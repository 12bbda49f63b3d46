"""/api/v1/keys: list, read, create and revoke the API keys of the caller's project
(conversations/api_projects.py)."""

import pytest
from django.test import Client

from conversations import api_keys
from conversations.models import ApiKey, AuditEvent, IdempotencyKey
from tests.api_support import Api, error_of
from tests.helpers import make_person

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("answer_shapes")]


def key(project=None, scopes=("admin",), name="key", **kwargs) -> tuple[ApiKey, Api]:
    made, secret = api_keys.create_api_key(name=name, scopes=list(scopes), project=project, **kwargs)
    return made, Api(Client(), secret)


@pytest.fixture
def alpha_admin(two_projects):
    return key(two_projects[0], name="alpha-admin")


@pytest.fixture
def operator(db):
    return key(None, name="ops", all_projects=True)


def names(answer) -> list[str]:
    return [k["name"] for k in answer.json()["items"]]


def test_it_lists_the_keys_of_the_caller_project_newest_first_and_no_secret(two_projects, alpha_admin):
    alpha, beta = two_projects
    me, api = alpha_admin
    key(alpha, ("read",), "alpha-reader", namespaces=["claude-code"])
    key(beta, ("admin",), "beta-admin")
    key(None, ("admin",), "ops", all_projects=True)
    answer = api.get("/keys")
    assert answer.status_code == 200
    assert names(answer) == ["alpha-reader", "alpha-admin"]
    reader = answer.json()["items"][0]
    assert reader["project"] == "alpha" and reader["namespaces"] == ["claude-code"] and reader["scopes"] == ["read"]
    assert reader["all_projects"] is False and reader["active"] is True and reader["revoked_at"] is None
    assert "secret" not in reader and "key_hash" not in answer.content.decode()


def test_it_pages_and_filters_by_state(two_projects, alpha_admin):
    alpha, _ = two_projects
    _, api = alpha_admin
    made = [key(alpha, ("read",), f"k{n}")[0] for n in range(5)]
    api_keys.revoke_api_key(key_id=made[0].pk)
    first = api.get("/keys", {"limit": 2}).json()
    assert [k["name"] for k in first["items"]] == ["k4", "k3"] and first["next"]
    second = api.get("/keys", {"limit": 2, "cursor": first["next"]}).json()
    assert [k["name"] for k in second["items"]] == ["k2", "k1"]
    assert names(api.get("/keys", {"active": "false"})) == ["k0"]
    assert "k0" not in names(api.get("/keys", {"active": "true"}))
    assert api.get("/keys", {"cursor": "nonsense"}).status_code == 400
    assert error_of(api.get("/keys", {"limit": 0}))["field"] == "limit"


def test_it_reads_one_key_and_finds_none_of_another_project(two_projects, alpha_admin):
    alpha, beta = two_projects
    _, api = alpha_admin
    ours, _ = key(alpha, ("read",), "ours")
    theirs, _ = key(beta, ("read",), "theirs")
    ops, _ = key(None, ("admin",), "ops", all_projects=True)
    assert api.get(f"/keys/{ours.pk}").json()["name"] == "ours"
    for missing in (theirs.pk, ops.pk, 999999, 2**70, 0, -1):
        answer = api.get(f"/keys/{missing}")
        assert answer.status_code == 404, missing
        assert "theirs" not in answer.content.decode() and "ops" not in answer.content.decode()
    assert error_of(api.get("/keys/abc"))["field"] == "key_id"


def test_it_creates_a_key_in_the_caller_project_and_shows_the_secret_once(two_projects, alpha_admin):
    alpha, _ = two_projects
    _, api = alpha_admin
    answer = api.post("/keys", {"name": "importer", "scopes": ["read", "write"], "namespaces": ["claude-code"]})
    assert answer.status_code == 201, answer.content
    made = answer.json()
    assert made["project"] == "alpha" and made["namespaces"] == ["claude-code"] and made["all_projects"] is False
    new = ApiKey.everywhere.get(pk=made["id"])
    assert new.project_id == alpha.pk and new.created_by == "key:alpha-admin"
    assert made["secret"].startswith(f"mui_{new.prefix}_") and made["secret"] not in str(new.__dict__)
    assert api_keys.authenticate_api_key(made["secret"]) == new
    assert "secret" not in api.get(f"/keys/{new.pk}").json()
    assert AuditEvent.everywhere.get(action="api_key.created", target_id=str(new.pk)).project_id == alpha.pk
    # The new key acts in alpha and only in its namespace.
    agent = Api(Client(), made["secret"])
    assert agent.post("/conversations", {"namespace": "claude-code", "external_id": "s1"}).status_code == 201
    assert agent.post("/conversations", {"namespace": "codex", "external_id": "s1"}).status_code == 403


@pytest.mark.parametrize("body, status, field", [
    ({"scopes": ["read"]}, 422, "name"),
    ({"name": "", "scopes": ["read"]}, 422, "name"),
    ({"name": "x", "scopes": []}, 422, "scopes"),
    ({"name": "x", "scopes": ["root"]}, 422, "scopes"),
    ({"name": "x", "scopes": "read"}, 422, "scopes"),
    ({"name": "x", "scopes": ["read"], "namespaces": ["bad\u200bone"]}, 422, "namespaces"),
    ({"name": "x", "scopes": ["read"], "namespaces": "claude-code"}, 422, "namespaces"),
    ({"name": "x", "scopes": ["read"], "namespaces": [f"n{i}" for i in range(51)]}, 422, "namespaces"),
    ({"name": "x", "scopes": ["read"], "all_projects": "yes"}, 422, "all_projects"),
    ({"name": "x", "scopes": ["read"], "project": "beta"}, 422, "project"),
    ({"name": "x" * 201, "scopes": ["read"]}, 422, "name"),
])
def test_it_refuses_bad_input_naming_the_field(two_projects, alpha_admin, body, status, field):
    _, api = alpha_admin
    answer = api.post("/keys", body)
    assert answer.status_code == status, answer.content
    assert error_of(answer)["field"] == field
    assert ApiKey.everywhere.count() == 1


def test_it_refuses_a_body_that_is_not_json(alpha_admin):
    _, api = alpha_admin
    assert api.post("/keys", raw="name=x").status_code == 400
    assert api.post("/keys", raw="{}", content_type="text/plain").status_code == 415


def test_no_caller_grants_a_scope_it_lacks(two_projects):
    alpha, _ = two_projects
    _, api = key(alpha, ("admin",), "admin-only")
    answer = api.post("/keys", {"name": "x", "scopes": ["read", "facts:read"]})
    assert answer.status_code == 403 and error_of(answer)["field"] == "scopes"
    assert "facts:read" in error_of(answer)["message"]
    # admin stands for read and write.
    assert api.post("/keys", {"name": "y", "scopes": ["read", "write", "admin"]}).status_code == 201


def test_a_key_narrowed_to_namespaces_manages_no_keys(two_projects):
    alpha, _ = two_projects
    _, api = key(alpha, ("admin",), "narrow-admin", namespaces=["claude-code"])
    for answer in (api.get("/keys"), api.post("/keys", {"name": "x", "scopes": ["read"]})):
        assert answer.status_code == 403
    assert ApiKey.everywhere.count() == 1


@pytest.mark.parametrize("scopes", [("read",), ("read", "write"), ("facts:read", "facts:write")])
def test_it_needs_the_admin_scope(two_projects, scopes):
    alpha, _ = two_projects
    victim, _ = key(alpha, ("read",), "victim")
    _, api = key(alpha, scopes, "weak")
    assert api.get("/keys").status_code == 403
    assert api.post("/keys", {"name": "x", "scopes": ["read"]}).status_code == 403
    assert api.post(f"/keys/{victim.pk}/revoke").status_code == 403
    victim.refresh_from_db()
    assert victim.revoked_at is None


def test_it_revokes_a_key_of_the_project_at_once(two_projects, alpha_admin):
    alpha, _ = two_projects
    _, api = alpha_admin
    victim, victim_api = key(alpha, ("read",), "victim")
    assert victim_api.get("/conversations").status_code == 200
    answer = api.post(f"/keys/{victim.pk}/revoke")
    assert answer.status_code == 200 and answer.json()["active"] is False and answer.json()["revoked_at"]
    assert victim_api.get("/conversations").status_code == 401
    again = api.post(f"/keys/{victim.pk}/revoke")
    assert again.status_code == 200 and again.json()["revoked_at"] == answer.json()["revoked_at"]
    assert AuditEvent.everywhere.filter(action="api_key.revoked").count() == 1


def test_it_revokes_no_key_of_another_project_nor_of_the_whole_server(two_projects, alpha_admin):
    _, beta = two_projects
    _, api = alpha_admin
    theirs, theirs_api = key(beta, ("read",), "theirs")
    ops, ops_api = key(None, ("admin",), "ops", all_projects=True)
    for target in (theirs, ops):
        answer = api.post(f"/keys/{target.pk}/revoke")
        assert answer.status_code == 404 and error_of(answer)["field"] == "key_id"
    assert theirs_api.get("/conversations").status_code == 200 and ops_api.get("/conversations").status_code == 200


def test_only_an_all_projects_admin_key_makes_all_projects_keys(two_projects, alpha_admin, operator):
    _, api = alpha_admin
    refused = api.post("/keys", {"name": "sneaky", "scopes": ["admin"], "all_projects": True})
    assert refused.status_code == 403 and error_of(refused)["field"] == "all_projects"
    client = Client()
    person = make_person("root", {}, superuser=True)
    client.force_login(person)
    as_person = Api(client, None).post("/keys", {"name": "sneaky", "scopes": ["admin"], "all_projects": True})
    assert as_person.status_code == 403
    assert not ApiKey.everywhere.filter(name="sneaky").exists()

    _, ops_api = operator
    made = ops_api.post("/keys", {"name": "ops2", "scopes": ["read"], "all_projects": True})
    assert made.status_code == 201 and made.json()["all_projects"] is True and made.json()["project"] is None
    assert error_of(ops_api.post("/keys", {"name": "x", "scopes": ["read"], "all_projects": True,
                                           "namespaces": ["a"]}))["field"] == "namespaces"


def test_an_operator_key_lists_every_key_or_one_project_by_header(two_projects, operator):
    alpha, beta = two_projects
    _, ops_api = operator
    key(alpha, ("read",), "a1")
    key(beta, ("read",), "b1")
    assert set(names(ops_api.get("/keys"))) == {"a1", "b1", "ops"}
    only_beta = ops_api.get("/keys", headers={"X-Memoryui-Project": "beta"})
    assert set(names(only_beta)) == {"b1", "ops"}
    made = ops_api.post("/keys", {"name": "b2", "scopes": ["read"]}, headers={"X-Memoryui-Project": "beta"})
    assert made.json()["project"] == "beta"
    # Named nowhere: a new key goes where every operator's write goes, into `default`.
    assert ops_api.post("/keys", {"name": "d1", "scopes": ["read"]}).json()["project"] == "default"


def test_an_operator_revokes_an_all_projects_key_from_inside_a_project(two_projects, operator):
    _, ops_api = operator
    other, other_api = key(None, ("read",), "ops-reader", all_projects=True)
    answer = ops_api.post(f"/keys/{other.pk}/revoke", headers={"X-Memoryui-Project": "alpha"})
    assert answer.status_code == 200 and answer.json()["all_projects"] is True
    assert other_api.get("/conversations").status_code == 401
    assert AuditEvent.everywhere.get(action="api_key.revoked").project_id is None


def test_a_signed_in_admin_manages_the_keys_of_the_project_named_in_the_header(two_projects):
    alpha, beta = two_projects
    key(alpha, ("read",), "a1")
    client = Client()
    client.force_login(make_person("ann", {alpha: "admin", beta: "auditor"}))
    api = Api(client, None)
    assert names(api.get("/keys", headers={"X-Memoryui-Project": "alpha"})) == ["a1"]
    assert api.get("/keys", headers={"X-Memoryui-Project": "beta"}).status_code == 403
    made = api.post("/keys", {"name": "a2", "scopes": ["read"]}, headers={"X-Memoryui-Project": "alpha"})
    assert made.status_code == 201 and made.json()["project"] == "alpha"
    assert made.json()["created_by"] == "user:ann"


def test_a_retried_create_never_replays_the_secret(two_projects, alpha_admin):
    _, api = alpha_admin
    headers = {"Idempotency-Key": "make-importer-1"}
    first = api.post("/keys", {"name": "importer", "scopes": ["read"]}, headers=headers)
    assert first.status_code == 201
    secret = first.json()["secret"]
    again = api.post("/keys", {"name": "importer", "scopes": ["read"]}, headers=headers)
    assert again.status_code == 409 and again["Idempotent-Replayed"] == "true"
    error = error_of(again)
    assert error["code"] == "idempotency_secret_not_kept" and f"API key {first.json()['id']}" in error["message"]
    assert secret not in again.content.decode()
    assert ApiKey.everywhere.filter(name="importer").count() == 1
    assert all(secret not in row.body for row in IdempotencyKey.objects.all())
