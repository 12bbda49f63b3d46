"""One conversation: full record against active view, fold, filters, paging, permissions."""

import re
import uuid

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from conversations import store, views
from conversations.models import AuditEvent, Checkpoint, Conversation, Message
from conversations.roles import ADMIN, AUDITOR, REVIEWER
from tests.api_support import login_as
from tests.retention_support import delete_conversation

pytestmark = pytest.mark.django_db


def _login(client, role, name=None):
    return login_as(client, role, name or f"u-{role}")


@pytest.fixture
def auditor(client):
    return _login(client, AUDITOR)


MESSAGES = [
    {"kind": "system", "content": "Be kind."},
    {"kind": "user", "content": "My blender is cracked."},
    {"kind": "assistant", "content": "Looking it up.",
     "tool_calls": [{"id": "call_1", "name": "lookup_order", "arguments": {"order_id": "48213", "deep": {"a": 1}}}]},
    {"kind": "tool", "tool_call_id": "call_1", "name": "lookup_order", "content": '{"price":149}', "is_error": True},
    {"kind": "thought", "text": "Refund it."},
    {"kind": "assistant", "content": "Refunded.", "meta": {"model": "m-1", "usage": {"input_tokens": 5}}},
    {"kind": "user", "content": "Thanks!"},
]


@pytest.fixture
def convo():
    c = store.create_conversation(title="Order 48213", subject="cust:7")
    for m in MESSAGES:
        store.append_message(conversation_id=c.pk, message=m)
    store.checkpoint_at(conversation_id=c.pk, position=1, summary="Early fold summary")
    store.checkpoint_at(conversation_id=c.pk, position=3, summary="Customer wants a refund.")
    return Conversation.objects.get(pk=c.pk)


def url(c, query=""):
    return f"/conversations/{c.pk}/{query}"


def _positions(items):
    return [e.position for e in items if not getattr(e, "is_marker", False)]


def test_it_requires_login(client, convo):
    response = client.get(url(convo))
    assert response.status_code == 302 and response["Location"].startswith("/login/")


@pytest.mark.parametrize("role", [AUDITOR, REVIEWER, ADMIN])
def test_it_admits_every_role(client, convo, role):
    _login(client, role)
    assert client.get(url(convo)).status_code == 200


def test_it_refuses_a_user_without_a_role(client, convo):
    _login(client, None)
    assert client.get(url(convo)).status_code == 403


@pytest.mark.parametrize("cid", ["0d6b8f0e-2c4a-4e1b-9f3d-7a5c1e8b2d46", "not-a-uuid", "0" * 40, "%3Cscript%3E"])
def test_it_answers_404_for_unknown_and_malformed_ids(client, auditor, cid):
    assert client.get(f"/conversations/{cid}/").status_code == 404


def test_it_shows_the_header_with_counts(client, auditor, convo):
    response = client.get(url(convo))
    body = response.content.decode()
    assert "Order 48213" in body and "cust:7" in body and str(convo.pk) in body
    assert response.context["checkpoint_count"] == 2 and response.context["latest"].message_position == 3
    assert "after #3" in body
    for fmt in ("json", "jsonl", "markdown"):
        assert f"/conversations/{convo.pk}/export.{fmt}" in body


def test_it_draws_the_fold_in_both_views(client, auditor, convo):
    response = client.get(url(convo))
    record = response.context["record"]
    markers = [e for e in record if getattr(e, "is_marker", False)]
    assert [(m.checkpoint.message_position, m.is_fold) for m in markers] == [(1, False), (3, True)]
    # The fold sits right after row 3, the earlier checkpoint right after row 1.
    assert record.index(markers[1]) == 5 and record.index(markers[0]) == 2
    assert _positions(record) == list(range(7))
    active = response.context["active"]
    assert active.checkpoint.summary == "Customer wants a refund."
    assert [i.position for i in active.page.items] == [4, 5, 6]
    body = response.content.decode()
    assert 'id="fold"' in body and "Earlier checkpoint at #1" in body
    assert 'id="ahandoff"' in body and "Customer wants a refund." in body
    assert body.index('id="fold"') < body.index('id="p4"') < body.index('id="ahandoff"') < body.index('id="a4"')


def test_it_shows_tool_calls_structured(client, auditor, convo):
    body = client.get(url(convo)).content.decode()
    assert '<code class="tool-name">lookup_order</code>' in body
    # Pretty-printed and highlighted (Pygments' spans around each token).
    text = re.sub(r"<span[^>]*>|</span>", "", body)
    assert '"order_id": "48213",\n  "deep": {\n' in text
    assert '<span class="flag flag-error">error</span>' in body
    assert "id call_1" in body and "m-1" in body  # the result sits under its call


def test_it_colours_rows_by_kind_with_the_name_shown(client, auditor, convo):
    body = client.get(url(convo)).content.decode()
    assert 'class="msg kind-thought"' in body
    assert '<span class="kind">thought</span>' in body
    assert 'class="legend"' in body


def test_it_collapses_long_content(client, auditor):
    c = store.create_conversation(title="long")
    store.append_message(conversation_id=c.pk, message={"kind": "note", "text": "word " * 1000})
    body = client.get(url(c)).content.decode()
    assert '<details class="long">' in body and "Show all 5000 characters" in body


def test_it_filters_by_kind_in_both_views(client, auditor, convo):
    response = client.get(url(convo, "?kind=assistant&kind=bogus"))
    assert _positions(response.context["record"]) == [2, 5]
    assert [i.position for i in response.context["active"].page.items] == [5]
    # The fold is still drawn although its row is filtered out.
    assert any(getattr(e, "is_fold", False) for e in response.context["record"])


def test_it_answers_the_views_fragment_to_the_filter_form(client, auditor, convo):
    response = client.get(url(convo, "?kind=user"), HTTP_HX_REQUEST="true", HTTP_HX_TARGET="views")
    body = response.content.decode()
    assert body.lstrip().startswith('<div id="views"')
    assert "<html" not in body and 'id="p1"' in body and 'id="p2"' not in body
    assert "HX-Request" in response["Vary"]


def test_it_loads_more_rows_by_keyset(client, auditor, convo, monkeypatch):
    monkeypatch.setattr(views, "ROW_PAGE", 2)
    monkeypatch.setattr(views, "MORE_FACTOR", 1)
    response = client.get(url(convo))
    assert _positions(response.context["record"]) == [0, 1]
    more = response.context["record_more"]
    assert more == "?after=1"
    assert 'hx-trigger="intersect once"' in response.content.decode()
    fragment = client.get(url(convo, more), HTTP_HX_REQUEST="true", HTTP_HX_TARGET="record-more")
    body = fragment.content.decode()
    assert "<html" not in body and 'id="views"' not in body
    assert 'id="p2"' in body and 'id="p3"' in body and 'id="p1"' not in body
    assert 'id="fold"' in body and 'id="record-more"' in body
    # Without JavaScript the same link is a whole page starting after the cursor.
    page = client.get(url(convo, more))
    assert b"<html" in page.content and _positions(page.context["record"]) == [2, 3]


def test_pages_that_arrive_while_scrolling_are_larger(client, auditor, convo, monkeypatch):
    monkeypatch.setattr(views, "ROW_PAGE", 1)
    monkeypatch.setattr(views, "MORE_FACTOR", 3)
    assert _positions(client.get(url(convo)).context["record"]) == [0]
    fragment = client.get(url(convo, "?after=0"), HTTP_HX_REQUEST="true", HTTP_HX_TARGET="record-more")
    assert _positions(fragment.context["record"]) == [1, 2, 3]


def test_it_loads_more_of_the_active_view(client, auditor, convo, monkeypatch):
    monkeypatch.setattr(views, "ROW_PAGE", 2)
    response = client.get(url(convo))
    assert response.context["active_more"] == "?active_after=5"
    fragment = client.get(url(convo, "?active_after=5"), HTTP_HX_REQUEST="true", HTTP_HX_TARGET="active-more")
    body = fragment.content.decode()
    assert 'id="a6"' in body and "ahandoff" not in body and 'id="p0"' not in body


def test_it_jumps_to_a_position(client, auditor, convo, monkeypatch):
    monkeypatch.setattr(views, "ROW_PAGE", 12)
    response = client.get(url(convo, "?at=5"))
    assert _positions(response.context["record"]) == [2, 3, 4, 5, 6]  # three rows of context above
    assert 'class="msg kind-assistant is-here" id="p5"' in response.content.decode()
    assert response.context["record_earlier"] == "?"  # back to the start
    response = client.get(url(convo, "?at=1"))
    assert _positions(response.context["record"])[0] == 0 and response.context["record_earlier"] is None
    # Past the end: the last rows, not an error.
    assert client.get(url(convo, "?at=999999")).status_code == 200


@pytest.mark.parametrize("query", ["?at=x", "?at=-1", "?after=-2", "?after=1e3", "?at=" + "9" * 30,
                                   "?active_after=nope"])
def test_it_answers_bad_parameters_with_400(client, auditor, convo, query):
    assert client.get(url(convo, query)).status_code == 400


def test_it_links_a_permalink_and_actions_per_row(client, auditor, convo):
    body = client.get(url(convo)).content.decode()
    assert f'href="/conversations/{convo.pk}/?at=4#p4"' in body
    assert 'href="saw/4/"' in body  # the row menu links relative to the page
    assert 'href="fork/4/"' in body
    assert 'href="checkpoint/' not in body  # auditors do not get it
    assert "Delete conversation" not in body


def test_it_offers_admins_checkpoint_and_delete(client, convo):
    _login(client, ADMIN)
    body = client.get(url(convo)).content.decode()
    assert f'href="/admin/conversations/{convo.pk}/delete/"' in body
    assert 'href="checkpoint/4/"' in body
    # Not before the fold: the store would refuse it.
    assert f"/conversations/{convo.pk}/checkpoint/2/" not in body


def test_it_shows_a_broken_row_as_a_marked_hole(client, auditor, convo):
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE {Conversation._meta.db_table} SET next_position = 8 WHERE id = %s",
                       [Conversation._meta.pk.get_db_prep_value(convo.pk, connection)])
    Message.objects.create(conversation=convo, position=7, kind="user",
                           content='{"kind": "user", "text": "<script>window.__pwned=1</script>"}',
                           created_at=convo.created_at)
    response = client.get(url(convo))
    assert response.status_code == 200
    body = response.content.decode()
    assert "Broken row" in body and "is-broken" in body
    assert "&lt;script&gt;window.__pwned=1&lt;/script&gt;" in body and "<script>window.__pwned" not in body


def test_it_shows_lineage_and_the_fork_tree(client, auditor, convo):
    child = store.fork_conversation(conversation_id=convo.pk, position=5, title="child")
    grandchild = store.fork_conversation(conversation_id=child.pk, position=2, title="grandchild")
    sibling = store.fork_conversation(conversation_id=convo.pk, position=1, title="sibling")
    root_page = client.get(url(convo)).content.decode()
    assert "Fork tree · 3 descendants" in root_page
    for c in (child, grandchild, sibling):
        assert f'href="/conversations/{c.pk}/"' in root_page
    page = client.get(url(grandchild)).content.decode()
    crumbs = page[page.index('class="crumbs"'):page.index("</nav>", page.index('class="crumbs"'))]
    assert crumbs.index(str(convo.pk)) < crumbs.index(str(child.pk))
    assert "at #5" in crumbs and "at #2" in crumbs and "grandchild" in crumbs
    assert "parent pruned" not in crumbs  # its parent is there


def test_it_says_parent_pruned(client, auditor, convo):
    child = store.fork_conversation(conversation_id=convo.pk, position=2, title="child")
    delete_conversation(convo.pk)
    response = client.get(url(child))
    assert response.status_code == 200
    assert b"parent pruned" in response.content
    assert [i.position for i in response.context["active"].page.items] == [2]


def test_the_first_page_costs_the_same_for_a_long_conversation(client, auditor, monkeypatch):
    monkeypatch.setattr(views, "ROW_PAGE", 5)
    short = store.create_conversation(title="short")
    long = store.create_conversation(title="long")
    for i in range(6):
        store.append_message(conversation_id=short.pk, message={"kind": "note", "text": f"n{i}"})
    for i in range(60):
        store.append_message(conversation_id=long.pk, message={"kind": "note", "text": f"n{i}"})
    counts = []
    for c in (short, long):
        with CaptureQueriesContext(connection) as ctx:
            assert client.get(url(c)).status_code == 200
        sql = [q["sql"].upper() for q in ctx.captured_queries]
        assert not any("OFFSET" in s for s in sql)
        assert not any("COUNT(" in s and Message._meta.db_table.upper() in s for s in sql)
        counts.append(len(sql))
    assert counts[0] == counts[1]


def test_get_never_changes_state(client, convo):
    _login(client, ADMIN)
    before = (Message.objects.count(), Checkpoint.objects.count(), Conversation.objects.count(),
              AuditEvent.objects.count())
    for path in ["", "?at=3", "saw/4/", "fork/3/", "checkpoint/5/"]:
        assert client.get(url(convo, path)).status_code == 200
    after = (Message.objects.count(), Checkpoint.objects.count(), Conversation.objects.count(),
             AuditEvent.objects.count())
    assert before == after


def test_it_rejects_post(client, auditor, convo):
    assert client.post(url(convo)).status_code == 405


def test_the_404_page_names_what_is_missing(client, auditor):
    response = client.get(f"/conversations/{uuid.UUID(int=7)}/")
    assert response.status_code == 404
    assert b"Not found" in response.content and b"not found" in response.content
    assert b"Back to the conversations" in response.content


def test_the_403_page_says_why(client):
    _login(client, None, name="norole")
    response = client.get("/")
    assert response.status_code == 403 and b"has no role" in response.content


def test_the_404_page_for_unknown_paths_stays_plain(client, auditor):
    response = client.get("/no/such/page/")
    assert response.status_code == 404 and b"nothing at this address" in response.content
    assert b"tried" not in response.content


def test_it_draws_each_checkpoint_once_across_pages(client, auditor, monkeypatch):
    monkeypatch.setattr(views, "ROW_PAGE", 3)
    c = store.create_conversation(title="many folds")
    for i in range(10):
        store.append_message(conversation_id=c.pk, message={"kind": "note" if i % 2 else "user",
                                                            "text" if i % 2 else "content": f"r{i}"})
    for position in (1, 3, 5, 7):
        store.checkpoint_at(conversation_id=c.pk, position=position, summary=f"s{position}")
    for query in ("", "?kind=user"):  # the filter hides every checkpoint's own row
        seen, rows, next_query = [], [], query
        while next_query is not None:
            response = client.get(url(c, next_query))
            record = response.context["record"]
            seen += [(e.checkpoint.message_position, e.is_fold) for e in record if getattr(e, "is_marker", False)]
            rows += _positions(record)
            next_query = response.context["record_more"]
        assert seen == [(1, False), (3, False), (5, False), (7, True)], query
        assert rows == (list(range(10)) if not query else [0, 2, 4, 6, 8])
