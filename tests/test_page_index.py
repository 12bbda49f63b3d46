"""The conversations list: keyset pages, search, filters, roles."""

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from conversations import store, views
from conversations.models import Conversation
from conversations.roles import ADMIN, AUDITOR, REVIEWER
from tests.api_support import login_as

pytestmark = pytest.mark.django_db


def _login(client, role):
    return login_as(client, role, f"u-{role}")


@pytest.fixture
def auditor(client):
    return _login(client, AUDITOR)


def _titles(response):
    return [c.title for c in response.context["conversations"]]


def test_it_requires_login(client):
    response = client.get("/")
    assert response.status_code == 302 and response["Location"].startswith("/login/")


@pytest.mark.parametrize("role", [AUDITOR, REVIEWER, ADMIN])
def test_it_admits_every_role(client, role):
    _login(client, role)
    assert client.get("/").status_code == 200


def test_it_refuses_a_user_without_a_role(client):
    _login(client, None)
    assert client.get("/").status_code == 403


def test_it_shows_an_empty_state_that_says_what_to_do(client, auditor):
    response = client.get("/")
    assert b"No conversations yet" in response.content
    assert b"load_demo" in response.content


def test_it_lists_rows_with_counts_and_badges(client, auditor):
    c = store.create_conversation(title="Refund for order 7", subject="cust:7")
    for i in range(3):
        store.append_message(conversation_id=c.pk, message={"kind": "user", "content": f"m{i}"})
    store.checkpoint_at(conversation_id=c.pk, position=1, summary="s")
    store.fork_conversation(conversation_id=c.pk, position=0, title="child")
    store.set_pinned(conversation_id=c.pk, pinned=True)
    response = client.get("/")
    body = response.content.decode()
    assert "Refund for order 7" in body and "cust:7" in body
    row = next(x for x in response.context["conversations"] if x.pk == c.pk)
    assert row.fork_count == 1 and row.has_checkpoint and row.next_position == 3
    assert 'class="badge pinned"' in body and 'class="badge checkpoint"' in body and 'class="badge forked"' in body


def test_it_pages_by_keyset_cursor_newest_first(client, auditor, monkeypatch):
    monkeypatch.setattr(views, "LIST_PAGE", 2)
    now = timezone.now()
    for i in range(5):
        c = store.create_conversation(title=f"c{i}")
        # Same time for two of them: the id breaks the tie, no row is lost or repeated.
        Conversation.objects.filter(pk=c.pk).update(last_activity_at=now - timedelta(minutes=min(i, 3)))
    seen, url = [], "/"
    while url:
        response = client.get(url)
        seen += _titles(response)
        url = response.context["more_url"] and "/" + response.context["more_url"]
    assert sorted(seen) == ["c0", "c1", "c2", "c3", "c4"]
    assert seen[:3] == ["c0", "c1", "c2"]


def test_it_never_uses_offset(client, auditor, monkeypatch):
    monkeypatch.setattr(views, "LIST_PAGE", 1)
    store.create_conversation(title="a")
    store.create_conversation(title="b")
    with CaptureQueriesContext(connection) as ctx:
        first = client.get("/")
        client.get("/" + first.context["more_url"])
    assert not any("OFFSET" in q["sql"].upper() for q in ctx.captured_queries)


def test_it_answers_the_load_more_fragment_to_htmx(client, auditor, monkeypatch):
    monkeypatch.setattr(views, "LIST_PAGE", 1)
    store.create_conversation(title="older")
    store.create_conversation(title="newer")
    first = client.get("/")
    assert "HX-Request" in first["Vary"]
    response = client.get("/" + first.context["more_url"], HTTP_HX_REQUEST="true",
                          HTTP_HX_TARGET="conversation-list-more")
    body = response.content.decode()
    assert "older" in body and "<html" not in body and "<table" not in body
    assert "HX-Request" in response["Vary"]


def test_it_answers_the_list_fragment_to_a_search(client, auditor):
    store.create_conversation(title="Blender refund", subject="cust:1")
    store.create_conversation(title="Other", subject="team:pay")
    response = client.get("/?q=blender", HTTP_HX_REQUEST="true", HTTP_HX_TARGET="conversation-list")
    body = response.content.decode()
    assert body.lstrip().startswith('<div id="conversation-list">')
    assert "Blender refund" in body and "Other" not in body


def test_it_gives_the_whole_page_to_htmx_requests_for_other_targets(client, auditor):
    response = client.get("/", HTTP_HX_REQUEST="true", HTTP_HX_TARGET="main")
    assert b"<html" in response.content


def test_it_searches_title_subject_and_id(client, auditor):
    a = store.create_conversation(title="Blender refund", subject="cust:anna")
    b = store.create_conversation(title="Coding", subject="team:payments")
    assert _titles(client.get("/?q=BLENDER")) == ["Blender refund"]
    assert _titles(client.get("/?q=payments")) == ["Coding"]
    assert _titles(client.get(f"/?q={b.pk}")) == ["Coding"]
    response = client.get("/?q=nothing-like-this")
    assert b"No conversation matches" in response.content
    assert a.pk


def test_it_filters(client, auditor):
    old = store.create_conversation(title="old")
    Conversation.objects.filter(pk=old.pk).update(last_activity_at=timezone.now() - timedelta(days=40))
    parent = store.create_conversation(title="parent")
    store.append_message(conversation_id=parent.pk, message={"kind": "user", "content": "x"})
    store.checkpoint_at(conversation_id=parent.pk, position=0, summary="s")
    store.fork_conversation(conversation_id=parent.pk, position=0, title="child")
    pinned = store.create_conversation(title="pinned")
    store.set_pinned(conversation_id=pinned.pk, pinned=True)
    assert _titles(client.get("/?forks=1")) == ["parent"]
    assert _titles(client.get("/?forked=1")) == ["child"]
    assert sorted(_titles(client.get("/?checkpoint=1"))) == ["child", "parent"]
    assert _titles(client.get("/?pinned=1")) == ["pinned"]
    assert _titles(client.get("/?older=30")) == ["old"]


@pytest.mark.parametrize("query", ["?cursor=%%%", "?cursor=bm9wZQ", "?older=abc", "?older=0",
                                   "?older=99999999999999999999"])
def test_it_answers_bad_parameters_with_400(client, auditor, query):
    response = client.get("/" + query)
    assert response.status_code == 400
    assert b"bad parameter" in response.content


def test_it_escapes_titles_and_subjects(client, auditor):
    store.create_conversation(title="<script>window.__pwned=1</script>", subject='<img src=x onerror="alert(1)">')
    body = client.get("/").content.decode()
    assert "<script>window.__pwned" not in body and "<img src=x" not in body
    assert "&lt;script&gt;" in body


def test_it_rejects_post(client, auditor):
    assert client.post("/").status_code == 405


def _replies(title: str, tokens: list[int], *, namespace: str = "", meta=None):
    c = store.create_conversation(title=title, namespace=namespace, meta=meta)
    for n in tokens:
        store.append_message(conversation_id=c.pk, message={
            "kind": "assistant", "content": "ok", "meta": {"model": "claude-sonnet-4-5",
                                                          "usage": {"input_tokens": n, "output_tokens": 10}}})
    return c


def test_the_list_shows_tokens_and_cost_and_sorts_by_each(client):
    _replies("Small talk", [100])  # 110 tokens
    _replies("Big job", [50_000, 60_000])  # 110,020 tokens
    _replies("Many rows", [10] * 5)  # 100 tokens, five rows
    login_as(client, "auditor")
    body = client.get("/").content.decode()
    assert 'data-label="Tokens"' in body and ">110,020</td>" in body and 'data-label="Cost">$0.' in body

    def order(sort):
        page = client.get("/", {"sort": sort}).content.decode()
        return sorted(("Small talk", "Big job", "Many rows"), key=page.index)

    assert order("tokens") == ["Big job", "Small talk", "Many rows"]
    assert order("rows") == ["Many rows", "Big job", "Small talk"]
    assert order("cost")[0] == "Big job"
    assert 'aria-sort="descending"' in client.get("/", {"sort": "cost"}).content.decode()
    assert client.get("/", {"sort": "nonsense"}).status_code == 400


def test_the_totals_count_rows_appended_since_they_were_last_read(client):
    c = _replies("Growing", [100])
    login_as(client, "auditor")
    assert "110</td>" in client.get("/").content.decode()
    usage = {"input_tokens": 5, "output_tokens": 5}
    store.append_message(conversation_id=c.pk, message={"kind": "assistant", "content": "more",
                                                        "meta": {"model": "x", "usage": usage}})
    assert "120</td>" in client.get("/").content.decode()


def test_a_claude_code_namespace_shows_as_its_project_folder(client):
    _replies("Session", [1], namespace="-srv-billing", meta={"claude_code": {"cwd": "/srv/billing"}})
    login_as(client, "auditor")
    body = client.get("/").content.decode()
    assert 'title="namespace -srv-billing">/srv/billing</span>' in body
    assert '<option value="-srv-billing">/srv/billing</option>' in body


def test_an_imported_claude_code_session_is_listed_under_the_folder_it_ran_in(client, tmp_path):
    """The folder comes from the session's own entries (`cwd`), by the file door and by the
    session-store door alike."""
    from pathlib import Path

    from conversations.imports import importer
    from conversations.imports.entry_appends import append_entries

    fixture = Path(__file__).parent / "fixtures" / "formats" / "claude_code_session.jsonl"
    result = importer.import_text(fixture.read_text(), namespace="-home-dev-shop", path=str(fixture))
    imported = Conversation.objects.get(pk=result.conversation_id)
    assert imported.meta["claude_code"]["cwd"] == "/home/dev/shop"
    entry = {"type": "user", "uuid": "u-1", "parentUuid": None, "sessionId": "s-folder", "cwd": "/srv/billing",
             "timestamp": "2026-01-01T00:00:00Z", "message": {"role": "user", "content": "hello"}}
    append_entries(format="claude-code", namespace="-srv-billing", external_id="s-folder", entries=[entry])
    login_as(client, "auditor")
    body = client.get("/").content.decode()
    assert 'title="namespace -home-dev-shop / external id">/home/dev/shop / ' in body
    assert 'title="namespace -srv-billing / external id">/srv/billing / ' in body
