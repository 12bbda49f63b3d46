"""The conversation page's investigation aids at the view level: a tool call's link to
its result and back, and the errors-only and tool-name filters in both views."""

import re

import pytest

from conversations import store, views
from conversations.roles import AUDITOR
from tests.api_support import login_as
from tests.test_page_conversation import url

pytestmark = pytest.mark.django_db

ROWS = [
    {"kind": "user", "content": "Refund order 7 and check stock."},
    {"kind": "assistant", "content": "On it.", "tool_calls": [
        {"id": "call_a", "name": "lookup_order", "arguments": {"order": 7}},
        {"id": "call_b", "name": "check_stock", "arguments": {"sku": "b-1"}}]},
    {"kind": "tool", "tool_call_id": "call_b", "name": "check_stock", "content": "3 left"},
    {"kind": "tool", "tool_call_id": "call_a", "name": "lookup_order", "content": "not found", "is_error": True},
    {"kind": "assistant", "content": "Retrying.", "tool_calls": [
        {"id": "call_c", "name": "lookup_order", "arguments": {"order": "7"}}]},
    {"kind": "note", "text": "mentions lookup_order but is no call"},
    {"kind": "tool", "tool_call_id": "call_c", "name": "lookup_order", "content": '{"order": 7}'},
    {"kind": "assistant", "content": "Refunding.", "tool_calls": [
        {"id": "call_d", "name": "issue_refund", "arguments": {"amount": 10}}]},
    {"kind": "tool", "tool_call_id": "call_d", "name": "issue_refund", "content": "card expired", "is_error": True},
    {"kind": "user", "content": "Thanks"},
]


@pytest.fixture
def auditor(client):
    return login_as(client, AUDITOR, "u-auditor")


@pytest.fixture
def session():
    c = store.create_conversation(title="Tools")
    for m in ROWS:
        store.append_message(conversation_id=c.pk, message=m)
    # At #3, after the first lookup's results: #4 calls call_c, answered at #6, and a fold
    # between a call and its result is refused.
    store.checkpoint_at(conversation_id=c.pk, position=3, summary="Looked the order up once.")
    return c


def positions(html, prefix):
    import re
    return [int(p) for p in re.findall(rf'<article class="msg[^"]*" id="{prefix}(\d+)"', html)]


def tool_link(client, c, position, call=None):
    return client.get(f"/conversations/{c.pk}/tool/{position}/", {"call": call} if call else {})


@pytest.mark.parametrize("position, call, target", [
    (1, "call_a", 3),  # two calls in one row: each finds its own result
    (1, "call_b", 2),
    (4, "call_c", 6),
    (7, "call_d", 8),
])
def test_a_call_links_to_its_result(client, auditor, session, position, call, target):
    r = tool_link(client, session, position, call)
    assert r.status_code == 302 and r["Location"] == f"/conversations/{session.pk}/?at={target}#p{target}"


@pytest.mark.parametrize("position, target", [(2, 1), (3, 1), (6, 4), (8, 7)])
def test_a_result_links_back_to_its_call(client, auditor, session, position, target):
    r = tool_link(client, session, position)
    assert r.status_code == 302 and r["Location"] == f"/conversations/{session.pk}/?at={target}#p{target}"


def test_the_page_links_each_call_and_result(client, auditor, session):
    # Results on the same page are nested under their calls; the link
    # stays for a result the page does not hold.
    html = client.get(url(session)).content.decode()
    for position in (3, 2):
        assert re.search(rf'<details class="result[^"]*"[^>]*data-position="{position}">\s*<summary>.*?</summary>'
                         rf'\s*<a class="result-row" href="#p{position}">its row, #{position}<', html, re.S)
    assert "shown under its call in <a href=\"#p1\">#1</a>" in html
    only_call = client.get(url(session), {"kind": "assistant"}).content.decode()
    assert f'href="/conversations/{session.pk}/tool/1/?call=call_a">↓ its result' in only_call
    only_result = client.get(url(session), {"kind": "tool"}).content.decode()
    assert f'href="/conversations/{session.pk}/tool/3/">↑ the call' in only_result


@pytest.mark.parametrize("position, call", [
    (0, None),         # not a tool result
    (5, None),         # a note
    (4, "call_a"),     # call_a's result came before #4
    (1, "call_zzz"),   # no such call
    (99, None),        # no such row
])
def test_a_missing_link_is_a_404_naming_it(client, auditor, session, position, call):
    assert tool_link(client, session, position, call).status_code == 404


def test_a_call_id_no_database_can_hold_is_a_400(client, auditor, session):
    r = tool_link(client, session, 1, "a\x00b")
    assert r.status_code == 400 and "call must not contain NUL" in r.content.decode()
    # Bytes that are not UTF-8 arrive as replacement characters: no such call.
    assert client.get(f"/conversations/{session.pk}/tool/1/?call=%ED%A0%80").status_code == 404


def test_errors_only_shows_only_failed_tool_results_in_both_views(client, auditor, session):
    html = client.get(url(session, "?errors=1")).content.decode()
    assert positions(html, "p") == [3, 8]
    assert positions(html, "a") == [8]  # #3 is folded away
    assert html.count("flag flag-error") == 3
    assert 'name="errors" value="1" checked' in html


def test_the_tool_filter_shows_calls_and_results_of_that_tool_only(client, auditor, session):
    html = client.get(url(session, "?tool=lookup_order")).content.decode()
    # The calls and the results; not the note that merely names it, not other tools.
    assert positions(html, "p") == [1, 3, 4, 6]
    assert positions(html, "a") == [4, 6]
    assert 'name="tool" value="lookup_order"' in html
    html = client.get(url(session, "?tool=issue_refund&errors=1")).content.decode()
    assert positions(html, "p") == [8]
    html = client.get(url(session, "?tool=send_email")).content.decode()
    assert positions(html, "p") == [] and "No rows of the tool “send_email” in this conversation." in html


def test_filters_say_so_when_the_active_view_has_nothing(client, auditor, session):
    html = client.get(url(session, "?tool=check_stock")).content.decode()
    assert positions(html, "p") == [1, 2] and positions(html, "a") == []
    assert "No rows of the tool “check_stock” in the active view (after the fold at #3)." in html
    assert "No rows after the fold yet" not in html


def test_the_filters_are_carried_by_every_page_link(client, auditor, session, monkeypatch):
    monkeypatch.setattr(views, "ROW_PAGE", 1)
    monkeypatch.setattr(views, "MORE_FACTOR", 1)
    html = client.get(url(session, "?tool=lookup_order&kind=tool")).content.decode()
    assert positions(html, "p") == [3]
    more = html[html.index('id="record-more"'):][:400]
    assert "tool=lookup_order" in more and "kind=tool" in more
    html = client.get(url(session, "?tool=lookup_order&kind=tool&after=3"),
                      HTTP_HX_REQUEST="true", HTTP_HX_TARGET="record-more").content.decode()
    assert positions(html, "p") == [6]
    html = client.get(url(session, "?errors=1")).content.decode()
    more = html[html.index('id="record-more"'):][:400]
    assert "errors=1" in more


@pytest.mark.parametrize("tool", ["a\x00b", "x" * 201])
def test_a_tool_name_no_agent_gave_is_a_400(client, auditor, session, tool):
    assert client.get(url(session), {"tool": tool}).status_code == 400
