"""Projects: keys, people and pages each see only their own project's rows (conversations/projects.py).

The cross-project matrix (tests/test_project_matrix.py) walks every route; these tests pin
the rules themselves: where a new row goes, what a key or a person of one project sees of
another's, and how the commands make projects, keys and members."""

import io
import zipfile

import pytest
from django.core.management import CommandError, call_command

from conversations import api_keys, projects, store
from conversations.facts import store as facts
from conversations.models import AuditEvent, Conversation, Project
from conversations.project_store import create_project
from conversations.retention import erasure
from conversations.roles import assign_role
from tests.api_support import Api, error_of
from tests.helpers import make_user

pytestmark = pytest.mark.django_db


def in_project(project, fn, *args, **kwargs):
    with projects.scoped(projects.one(project.pk)):
        return fn(*args, **kwargs)


@pytest.fixture
def two():
    a = create_project(slug="alpha", name="Alpha")
    b = create_project(slug="beta", name="Beta")
    return a, b


def key_of(project, scopes=("read", "write"), **kwargs) -> str:
    _, secret = api_keys.create_api_key(name=f"key-{project.slug}", scopes=list(scopes), project=project, **kwargs)
    return secret


def test_it_puts_what_a_key_creates_into_the_key_project(client, two):
    a, b = two
    api = Api(client, key_of(a))
    made = api.post("/conversations", {"title": "in alpha"}).json()
    assert Conversation.everywhere.get(pk=made["id"]).project_id == a.pk


def test_a_key_of_one_project_does_not_find_another_project_conversation(client, two):
    a, b = two
    theirs = in_project(b, store.create_conversation, title="beta's secret")
    api = Api(client, key_of(a, scopes=("admin",)))
    for response in (api.get(f"/conversations/{theirs.pk}"), api.get(f"/conversations/{theirs.pk}/messages"),
                     api.post(f"/conversations/{theirs.pk}/messages", {"kind": "note", "text": "x"}),
                     api.delete(f"/conversations/{theirs.pk}")):
        assert response.status_code == 404, response.content
        assert "beta's secret" not in response.content.decode()
    listed = api.get("/conversations").json()
    assert [c["id"] for c in listed["items"]] == []
    assert Conversation.everywhere.filter(pk=theirs.pk, deleting=False).exists()


def test_two_projects_may_hold_the_same_external_id(client, two):
    a, b = two
    ours = Api(client, key_of(a)).post("/conversations", {"namespace": "claude-code", "external_id": "abc"})
    theirs = Api(client, key_of(b)).post("/conversations", {"namespace": "claude-code", "external_id": "abc"})
    assert ours.status_code == theirs.status_code == 201
    assert ours.json()["id"] != theirs.json()["id"]
    again = Api(client, key_of(a)).post("/conversations", {"namespace": "claude-code", "external_id": "abc"})
    assert again.status_code == 200 and again.json()["id"] == ours.json()["id"]


def test_a_fork_stays_in_its_parent_project_whoever_forks_it(client, two):
    a, b = two
    theirs = in_project(b, store.create_conversation, title="b")
    in_project(b, store.append_message, conversation_id=theirs.pk, message={"kind": "note", "text": "one"})
    operator = Api(client, api_keys.create_api_key(name="ops", scopes=["admin"], all_projects=True)[1])
    forked = operator.post(f"/conversations/{theirs.pk}/forks", {"position": 0})
    assert forked.status_code == 201, forked.content
    assert Conversation.everywhere.get(pk=forked.json()["id"]).project_id == b.pk


def test_a_key_narrowed_to_namespaces_writes_only_there(client, two):
    a, _ = two
    api = Api(client, key_of(a, namespaces=["claude-code"]))
    assert api.post("/conversations", {"namespace": "claude-code", "external_id": "s1"}).status_code == 201
    refused = api.post("/conversations", {"namespace": "codex", "external_id": "s1"})
    assert refused.status_code == 403
    assert "claude-code" in error_of(refused)["message"]
    other = in_project(a, store.create_conversation, title="codex session", namespace="codex")
    assert api.get(f"/conversations/{other.pk}").status_code == 404


def test_an_all_projects_key_reads_every_project_and_names_one_with_a_header(client, two):
    a, b = two
    mine = in_project(a, store.create_conversation, title="a1")
    theirs = in_project(b, store.create_conversation, title="b1")
    _, secret = api_keys.create_api_key(name="ops", scopes=["admin"], all_projects=True)
    operator = Api(client, secret)
    seen = {c["id"] for c in operator.get("/conversations").json()["items"]}
    assert {str(mine.pk), str(theirs.pk)} <= seen
    only_b = {c["id"] for c in operator.get("/conversations", headers={"X-Memoryui-Project": "beta"}).json()["items"]}
    assert only_b == {str(theirs.pk)}
    made = operator.post("/conversations", {"title": "for beta"}, headers={"X-Memoryui-Project": "beta"})
    assert Conversation.everywhere.get(pk=made.json()["id"]).project_id == b.pk
    assert operator.get("/conversations", headers={"X-Memoryui-Project": "nope"}).status_code == 404


def test_a_project_key_naming_another_project_is_not_found(client, two):
    a, b = two
    api = Api(client, key_of(a))
    assert api.get("/conversations", headers={"X-Memoryui-Project": "beta"}).status_code == 404
    assert api.get("/conversations", headers={"X-Memoryui-Project": "alpha"}).status_code == 200


def test_a_person_sees_a_project_page_only_as_its_member(client, two):
    a, b = two
    person = make_user("auditor", "ann")
    assign_role(person, "reviewer", a)
    theirs = in_project(b, store.create_conversation, title="b only")
    ours = in_project(a, store.create_conversation, title="a only")
    client.force_login(person)
    page = client.get("/p/alpha/")
    assert page.status_code == 200
    body = page.content.decode()
    assert "a only" in body and "b only" not in body
    assert f'href="/p/alpha/conversations/{ours.pk}/"' in body
    assert client.get("/p/beta/").status_code == 404
    assert client.get(f"/p/beta/conversations/{theirs.pk}/").status_code == 404
    assert client.get(f"/p/alpha/conversations/{theirs.pk}/").status_code == 404
    assert client.get(f"/conversations/{ours.pk}/").status_code == 404  # the root is `default`
    assert client.get("/p/nothing-here/").status_code == 404


def test_a_person_outside_default_is_sent_to_their_first_project(client, two):
    a, _ = two
    person = make_user(None, "bob")
    assign_role(person, "auditor", a)
    client.force_login(person)
    response = client.get("/search/?q=x")
    assert response.status_code == 302 and response["Location"] == "/p/alpha/search/?q=x"


def test_a_superuser_is_an_admin_of_every_project(client, two):
    a, b = two
    root = make_user(None, "root")
    root.is_superuser = True
    root.save()
    client.force_login(root)
    assert client.get("/p/beta/").status_code == 200
    assert client.get("/p/alpha/admin/").status_code == 200


def test_the_commands_make_projects_keys_and_members(capsys):
    call_command("create_project", "support", "--name", "Support bots", "--retention-days", "30")
    project = Project.objects.get(slug="support")
    assert project.name == "Support bots" and project.retention_days == 30
    with pytest.raises(CommandError, match="already exists"):
        call_command("create_project", "support")
    with pytest.raises(CommandError, match="slug"):
        call_command("create_project", "Not A Slug")
    call_command("create_api_key", "support-bot", "--project", "support", "--scopes", "read")
    assert "for project 'support'" in capsys.readouterr().out
    call_command("create_api_key", "ops", "--all-projects", "--scopes", "admin")
    assert "every project" in capsys.readouterr().out
    with pytest.raises(CommandError, match="no project"):
        call_command("create_api_key", "x", "--project", "nope")
    call_command("create_user", "carol", "--role", "reviewer", "--project", "support", "--password", "pw-12345678")
    call_command("create_user", "carol", "--role", "auditor", "--password", "pw-12345678")
    from django.contrib.auth import get_user_model

    carol = get_user_model().objects.get(username="carol")
    assert dict(carol.memberships.values_list("project__slug", "role")) == {"support": "reviewer",
                                                                              "default": "auditor"}


def test_a_conversation_never_moves_to_another_project(two):
    from django.db import IntegrityError, connection, transaction

    a, b = two
    c = in_project(a, store.create_conversation, title="stays")
    with pytest.raises(IntegrityError), transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("UPDATE conversations_conversation SET project_id = %s WHERE id = %s",
                       [b.pk, Conversation._meta.pk.get_db_prep_value(c.pk, connection)])


def test_a_streamed_answer_is_read_inside_the_request_project(client, two):
    """A subject's ZIP is written as it is sent, after the view returned: what it reads is still
    read in the key's project."""
    a, b = two
    for project, text in ((a, "alpha's fact"), (b, "beta's fact")):
        with projects.scoped(projects.one(project.pk)):
            facts.propose_fact(subject="customer:9", text=text, importance=5, created_by="test")
    answer = Api(client, key_of(a, scopes=("admin",))).get("/subject-export", {"subject": "customer:9"})
    with zipfile.ZipFile(io.BytesIO(b"".join(answer.streaming_content))) as archive:
        held = archive.read("facts.jsonl").decode()
    assert "alpha's fact" in held and "beta's fact" not in held


def test_the_verification_page_walks_only_the_project_own_conversations(client, two):
    a, b = two
    theirs = in_project(b, store.create_conversation, title="beta chain")
    gone = in_project(b, store.create_conversation, title="beta erased")
    with projects.scoped(projects.one(b.pk)):
        receipt = erasure.execute_deletion(conversation_ids=[gone.pk], actor="user:beta-admin", kind="conversation")
    in_project(a, store.create_conversation, title="alpha chain")
    person = make_user(None, "ann")
    assign_role(person, "admin", a)
    client.force_login(person)
    body = client.get("/p/alpha/admin/verification/").content.decode()
    assert "alpha chain" in body
    for hidden in ("beta chain", str(theirs.pk), str(gone.pk), str(receipt.pk)):
        assert hidden not in body
    own_events = AuditEvent.objects.filter(project=a).count()
    assert f"verified</span> {own_events} events" in body


def test_a_subject_page_shows_the_history_of_the_project_own_facts_only(client, two):
    a, b = two
    for project in (a, b):
        fact = in_project(project, facts.propose_fact, subject="customer:9", text=f"{project.slug}'s fact",
                          importance=5, created_by=f"key:{project.slug}-agent")
        in_project(project, facts.approve_fact, fact_id=fact.pk, actor=f"user:{project.slug}-reviewer")
    person = make_user(None, "rita")
    assign_role(person, "reviewer", a)
    client.force_login(person)
    body = client.post("/p/alpha/facts/subject/", {"s": "customer:9"}, follow=True).content.decode()
    assert "alpha-reviewer" in body and "beta-reviewer" not in body and "beta's fact" not in body
