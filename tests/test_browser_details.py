"""Small details in Chromium: a favicon, the skip link, few landmarks, tool
output as code with a height cap; on a phone the top bar wraps with Log out in sight,
tables scroll in their own box, and only the visible tab loads pages."""

import pytest

from conversations import store, views
from conversations.roles import AUDITOR
from tests.helpers import wait_for_polls
from tests.test_browser_search_follow import VIEWPORTS
from tests.test_browser_ui import _shot

pytestmark = [pytest.mark.browser, pytest.mark.same_on_every_database, pytest.mark.django_db(transaction=True)]

TRACEBACK = "Traceback (most recent call last):\n" + "".join(
    f'  File "/srv/billing/step_{i}.py", line {i}, in run\n    total = round(net * rate, 2)\n' for i in range(200)
) + "CardExpired: card 4417"


def _session(rows=0, title="Refund that failed"):
    c = store.create_conversation(title=title, subject="cust:11")
    store.append_message(conversation_id=c.pk, message={"kind": "user", "content": "Refund order 48213, please."})
    store.append_message(conversation_id=c.pk, message={
        "kind": "assistant", "content": "Refunding.",
        "tool_calls": [{"id": "call_refund", "name": "issue_refund", "arguments": {"amount": 149}}]})
    store.append_message(conversation_id=c.pk, message={
        "kind": "tool", "tool_call_id": "call_refund", "name": "issue_refund", "content": TRACEBACK, "is_error": True})
    store.append_message(conversation_id=c.pk, message={
        "kind": "tool", "tool_call_id": "call_refund", "name": "issue_refund",
        "content": "\n".join(f"line {i}: retry scheduled" for i in range(9))})
    for i in range(rows):
        store.append_message(conversation_id=c.pk,
                             message={"kind": "user" if i % 2 else "assistant", "content": f"filler {i}"})
    return c


def _open(logged_in_page, viewport):
    page = logged_in_page(AUDITOR, viewport=VIEWPORTS[viewport])
    return page.context, page


def _in_sight(page, selector, viewport):
    box = page.locator(selector).bounding_box()
    return box is not None and 0 <= box["x"] and box["x"] + box["width"] <= VIEWPORTS[viewport]["width"] \
        and 0 <= box["y"] and box["y"] + box["height"] <= VIEWPORTS[viewport]["height"]


@pytest.mark.parametrize("viewport", ["wide", "phone"])
def test_favicon_skip_link_landmarks_and_tool_output(live_server, logged_in_page, viewport, monkeypatch):
    monkeypatch.setattr(views, "ROW_PAGE", 50)
    c = _session(rows=60)
    context, page = _open(logged_in_page, viewport)
    # The icon browsers ask for whatever the page links: not a 404.
    answer = page.request.get(live_server.url + "/favicon.ico")
    assert answer.status == 200 and answer.headers["content-type"].startswith("image/svg")

    page.goto(live_server.url + f"/conversations/{c.pk}/")
    # The first Tab reaches the skip link to the messages, in sight; Enter moves focus to them.
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.className") == "skip-link"
    assert _in_sight(page, ".skip-link:focus", viewport)
    page.keyboard.press("Enter")
    assert page.evaluate("document.activeElement.id") == "messages"
    # A page of 50 rows has a handful of navigation landmarks, not one per row.
    assert page.locator("article.msg").count() >= 50
    assert page.locator("nav").count() <= 3

    # Tool output reads as code, and a 400-line traceback stays under a screen once expanded.
    # The failed result sits under its call in the reply's turn, closed when long.
    error = page.locator("#p1 details.result")
    assert "flag-error" in error.locator("summary").first.inner_html()
    error.locator("summary").first.click()
    long = error.locator("details.long")
    assert "mono" in long.locator("summary .preview").evaluate("e => getComputedStyle(e).fontFamily")
    long.locator("summary").first.click()
    text = long.locator(".text").first
    assert "mono" in text.evaluate("e => getComputedStyle(e).fontFamily")
    height = text.evaluate("e => e.getBoundingClientRect().height")
    assert 100 < height <= 32 * 16 and text.evaluate("e => e.scrollHeight > e.clientHeight")
    short = page.locator("#p3 .msg-body .text").first
    assert "mono" in short.evaluate("e => getComputedStyle(e).fontFamily")
    body = page.locator("#p0 .msg-body .text").first
    assert "mono" not in body.evaluate("e => getComputedStyle(e).fontFamily")
    assert page.evaluate("document.scrollingElement.scrollWidth <= window.innerWidth")
    context.close()


def test_on_a_phone_the_top_bar_wraps_and_nothing_scrolls_sideways(live_server, logged_in_page):
    c = _session(rows=30)
    for i in range(12):
        _session(title=f"Order #{48200 + i}: a long title about a blender that arrived cracked and a refund")
    context, page = _open(logged_in_page, "phone")
    for path in ("/", f"/conversations/{c.pk}/", f"/conversations/{c.pk}/saw/3/", "/search/?q=refund"):
        page.goto(live_server.url + path)
        page.evaluate("window.scrollTo(0, 0)")  # a phone's top bar scrolls away with the page
        # Log out stays on screen: the bar wraps instead of running off the right edge.
        assert _in_sight(page, "form.logout button", "phone"), path
        assert page.evaluate("document.scrollingElement.scrollWidth <= window.innerWidth"), path
        # A table that does not fit scrolls inside its own box.
        for table in page.locator("table").all():
            box = table.bounding_box()
            assert box["x"] >= 0 and box["x"] + box["width"] <= VIEWPORTS["phone"]["width"], path
    page.goto(live_server.url + f"/conversations/{c.pk}/")
    # No rows arrived: the "N new rows" marker is not drawn (an empty blue pill was).
    assert page.locator("button.new-rows").count() == 1 and not page.locator("button.new-rows").is_visible()
    # The shot: the tabs under the top bar, then the first rows of the full record.
    page.evaluate("""() => window.scrollBy(0, document.querySelector('.tabbar').getBoundingClientRect().top
        - document.querySelector('header.topbar').getBoundingClientRect().height - 8)""")
    _shot(page, "conversation-phone.png")
    context.close()


def test_on_a_phone_only_the_visible_tab_loads_pages(live_server, logged_in_page, monkeypatch):
    monkeypatch.setattr(views, "ROW_PAGE", 10)  # pages of 10, then 40 while scrolling
    c = _session(rows=300)
    # Folded, so the active view has rows of its own (without a fold it says it equals the record).
    store.checkpoint_at(conversation_id=c.pk, position=0, summary="A refund was asked for.")
    context, page = _open(logged_in_page, "phone")
    page.goto(live_server.url + f"/conversations/{c.pk}/")
    assert page.locator("#record-pane").is_visible() and not page.locator("#active-pane").is_visible()
    count = "(id) => document.querySelectorAll('#' + id + ' article.msg[data-position]').length"
    page.evaluate("""() => { window.__activeLoads = 0; document.addEventListener('htmx:beforeRequest', e => {
        if (e.target.closest('#active-pane')) window.__activeLoads += 1; }); }""")
    for _ in range(6):
        before = page.evaluate(count, "record")
        page.locator("#record-more").scroll_into_view_if_needed()
        page.wait_for_function(f"() => ({count})('record') > {before}")
    page.wait_for_function("() => !document.querySelector('.htmx-request')")  # every load answered
    assert page.evaluate(count, "record") >= 10 + 6 * 40 - 40
    assert page.evaluate("window.__activeLoads") == 0  # the hidden tab asked for nothing
    assert page.evaluate(count, "active") == 10
    # Shown, it loads as its reader scrolls.
    page.locator("label[for=tab-active]").click()
    page.locator("#active-more").scroll_into_view_if_needed()
    page.wait_for_function(f"() => ({count})('active') > 10")
    context.close()


def test_on_a_phone_live_follow_fills_the_shown_tab_and_the_other_once_shown(live_server, logged_in_page):
    c = _session(rows=10)  # rows #0-#13
    store.checkpoint_at(conversation_id=c.pk, position=0, summary="A refund was asked for.")  # the active view: #1 on
    context, page = _open(logged_in_page, "phone")
    page.goto(live_server.url + f"/conversations/{c.pk}/")
    page.evaluate("document.querySelectorAll('.rows[data-follow-url]').forEach(r => r.dataset.followInterval = 300)")
    for i in range(2):
        store.append_message(conversation_id=c.pk, message={"kind": "note", "text": f"appended live {i}"})
    page.wait_for_function("() => !!document.getElementById('p15')", timeout=15000)
    # The reader is at the top: the marker says so, on screen, and leads to the newest row.
    marker = page.locator("button.new-rows")
    assert marker.inner_text() == "2 new rows ↓" and _in_sight(page, "button.new-rows", "phone")
    marker.click()
    page.wait_for_function("() => document.activeElement && document.activeElement.id === 'p15'")
    # The hidden tab asked for nothing, over three more polls; shown, it catches up, each row once.
    wait_for_polls(page, 3)
    assert page.locator("#a14").count() == 0
    page.locator("label[for=tab-active]").click()
    page.wait_for_function("() => !!document.getElementById('a15')", timeout=15000)
    positions = page.locator("#active article.msg[data-position]").evaluate_all(
        "els => els.map(e => +e.dataset.position)")
    assert positions == list(range(1, 16))
    assert page.evaluate("document.scrollingElement.scrollWidth <= window.innerWidth")
    context.close()
