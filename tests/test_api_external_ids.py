"""External ids: a framework finds its conversation by (namespace, external_id), which never change."""

import pytest
from django.db import IntegrityError, connection, transaction

from conversations import store
from conversations.errors import Conflict
from conversations.models import Conversation
from tests.api_support import error_of

pytestmark = pytest.mark.django_db

SESSION = {"namespace": "claude-agent", "external_id": "session-7f3a9c", "title": "Refund for order 7"}


def test_it_creates_then_gets_the_same_conversation(writer):
    first = writer.post("/conversations", SESSION)
    assert first.status_code == 201
    assert (first.json()["namespace"], first.json()["external_id"]) == ("claude-agent", "session-7f3a9c")
    again = writer.post("/conversations", {**SESSION, "title": "Another title"})
    assert again.status_code == 200
    assert again.json()["id"] == first.json()["id"]
    assert again.json()["title"] == "Refund for order 7"
    assert Conversation.objects.count() == 1


def test_the_same_id_in_another_namespace_is_another_conversation(writer):
    a = writer.post("/conversations", SESSION).json()
    b = writer.post("/conversations", {**SESSION, "namespace": "openai-agents"}).json()
    c = writer.post("/conversations", {"external_id": SESSION["external_id"]}).json()
    assert len({a["id"], b["id"], c["id"]}) == 3
    assert c["namespace"] == ""


def test_it_finds_a_conversation_by_its_external_id(writer, reader):
    made = writer.post("/conversations", SESSION).json()
    writer.post("/conversations", {**SESSION, "external_id": "other"})
    found = reader.get("/conversations", {"namespace": "claude-agent", "external_id": "session-7f3a9c"}).json()
    assert [c["id"] for c in found["items"]] == [made["id"]]
    assert reader.get("/conversations", {"namespace": "nope", "external_id": "session-7f3a9c"}).json()["items"] == []


def test_it_lists_a_namespace(writer, reader, convo):
    mine = {writer.post("/conversations", {**SESSION, "external_id": f"s{i}"}).json()["id"] for i in range(3)}
    listed = reader.get("/conversations", {"namespace": "claude-agent", "limit": 2}).json()
    assert len(listed["items"]) == 2 and "namespace=claude-agent" in listed["next_url"]
    rest = reader.get("/conversations", {"namespace": "claude-agent", "cursor": listed["next"], "limit": 2}).json()
    assert {c["id"] for c in listed["items"] + rest["items"]} == mine


@pytest.mark.parametrize("body, field", [
    ({"external_id": ""}, "external_id"),
    ({"external_id": "x" * 201}, "external_id"),
    ({"external_id": 7}, "external_id"),
    ({"namespace": "n" * 201, "external_id": "x"}, "namespace"),
    ({"namespace": "a\u0000b", "external_id": "x"}, "namespace"),
])
def test_it_refuses_bad_external_ids(writer, body, field):
    response = writer.post("/conversations", body)
    assert response.status_code == 422
    assert error_of(response)["field"] == field
    assert Conversation.objects.count() == 0


def test_the_store_refuses_to_create_a_taken_pair():
    store.create_conversation(namespace="n", external_id="x")
    with pytest.raises(Conflict) as exc:
        store.create_conversation(namespace="n", external_id="x")
    assert exc.value.code == "external_id_taken"


def test_a_fork_stays_in_its_namespace_and_may_get_its_own_id(writer):
    parent = writer.post("/conversations", SESSION).json()
    writer.post(f"/conversations/{parent['id']}/messages", {"kind": "user", "content": "hi"})
    child = writer.post(f"/conversations/{parent['id']}/forks", {"position": 0, "external_id": "branch-1"}).json()
    assert (child["namespace"], child["external_id"], child["parent_relation"]) == ("claude-agent", "branch-1", "fork")
    plain = writer.post(f"/conversations/{parent['id']}/forks", {"position": 0}).json()
    assert (plain["namespace"], plain["external_id"]) == ("claude-agent", None)
    taken = writer.post(f"/conversations/{parent['id']}/forks", {"position": 0, "external_id": "session-7f3a9c"})
    assert taken.status_code == 409 and error_of(taken)["code"] == "external_id_taken"


def test_the_conversation_page_shows_the_external_id(client, writer):
    from tests.api_support import login_as

    made = writer.post("/conversations", SESSION).json()
    login_as(client, "auditor")
    page = client.get(f"/conversations/{made['id']}/").content.decode()
    assert "claude-agent" in page and "session-7f3a9c" in page


def test_the_list_page_filters_by_namespace(client, writer):
    from tests.api_support import login_as

    writer.post("/conversations", SESSION)
    writer.post("/conversations", {"title": "Elsewhere", "namespace": "other-bot"})
    login_as(client, "auditor")
    everything = client.get("/").content.decode()
    assert "Refund for order 7" in everything and "Elsewhere" in everything
    assert '<option value="claude-agent"' in everything
    filtered = client.get("/", {"namespace": "claude-agent"}).content.decode()
    assert "Refund for order 7" in filtered and "Elsewhere" not in filtered


# -- the database keeps them immutable (raw SQL, as any tool could run it) -------------


def _execute(sql, params):
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(sql, params)


def _db_id(pk):
    return Conversation._meta.pk.get_db_prep_value(pk, connection)


@pytest.mark.parametrize("column, value", [("external_id", "hijacked"), ("external_id", None),
                                           ("namespace", "elsewhere"), ("namespace", "")])
def test_the_database_refuses_to_change_an_external_id(column, value):
    c = store.create_conversation(namespace="claude-agent", external_id="s1")
    with pytest.raises(IntegrityError) as exc:
        _execute(f"UPDATE conversations_conversation SET {column} = %s WHERE id = %s", [value, _db_id(c.pk)])
    assert "immutable" in str(exc.value)
    c.refresh_from_db()
    assert (c.namespace, c.external_id) == ("claude-agent", "s1")


def test_the_database_lets_an_external_id_be_set_once_and_other_columns_change():
    c = store.create_conversation(title="no id yet")
    _execute("UPDATE conversations_conversation SET namespace = %s, external_id = %s WHERE id = %s",
             ["late", "s9", _db_id(c.pk)])
    _execute("UPDATE conversations_conversation SET title = %s, pinned = %s WHERE id = %s",
             ["renamed", True, _db_id(c.pk)])
    c.refresh_from_db()
    assert (c.namespace, c.external_id, c.title) == ("late", "s9", "renamed")
    with pytest.raises(IntegrityError):
        _execute("UPDATE conversations_conversation SET external_id = %s WHERE id = %s", ["s10", _db_id(c.pk)])


def test_the_database_refuses_a_second_conversation_with_a_taken_pair():
    store.create_conversation(namespace="n", external_id="x")
    other = store.create_conversation(namespace="n")
    with pytest.raises(IntegrityError):
        _execute("UPDATE conversations_conversation SET external_id = %s WHERE id = %s", ["x", _db_id(other.pk)])
