"""The search page's filters and its paging, and the conversation access log, in
Chromium at a desktop and a phone viewport."""

from datetime import timedelta

import pytest
from django.utils import timezone

from conversations import store
from conversations.access.models import ConversationAccess
from conversations.roles import ADMIN, AUDITOR
from tests.helpers import unfold
from tests.test_browser_search_follow import VIEWPORTS

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]



def _open(logged_in_page, viewport, username):
    page = logged_in_page(None, username=username, viewport=VIEWPORTS[viewport])
    return page.context, page


def _hits(page):
    # Each hit opens its row with the words to mark (&q=refund), left out here.
    return page.locator("ol.hits li.hit a.pos").evaluate_all(
        "els => els.map(e => e.getAttribute('href').replace('&q=refund', ''))")


@pytest.mark.parametrize("viewport", ["wide", "phone"])
def test_search_filters_narrow_the_hits_and_more_arrive_once(live_server, user, logged_in_page, viewport):
    user(AUDITOR, "sol")
    shop = store.create_conversation(title="Shop ticket", subject="cust:shop", namespace="support")
    bank = store.create_conversation(title="Bank ticket", subject="cust:bank", namespace="billing")
    for c in (shop, bank):
        store.append_message(conversation_id=c.pk, message={"kind": "user", "content": "I want a refund"})
        store.append_message(conversation_id=c.pk, message={
            "kind": "tool", "tool_call_id": "t1", "name": "issue_refund", "content": "refund issued"})
    for i in range(45):  # more than a page (20) of hits
        store.append_message(conversation_id=shop.pk, message={"kind": "note", "text": f"refund follow-up {i}"})
    context, page = _open(logged_in_page, viewport, "sol")

    def search(**fields):
        page.goto(live_server.url + "/search/")
        page.fill("input[name=q]", "refund")
        page.select_option("select[name=order]", "newest")  # the row list, in pages (the default groups them)
        for name, value in fields.items():
            if name == "kind":
                unfold(page, "#row-filters")
                page.locator(f"input[name=kind][value={value}]").check()
            else:
                page.fill(f"input[name={name}]", value)
        page.get_by_role("button", name="Search").click()
        page.wait_for_url("**/search/?q=refund**")

    search(kind="tool")
    assert sorted(_hits(page)) == sorted(f"/conversations/{c.pk}/?at=1#p1" for c in (shop, bank))
    search(subject="cust:bank")
    assert sorted(_hits(page)) == [f"/conversations/{bank.pk}/?at={p}#p{p}" for p in (0, 1)]
    search(namespace="billing", kind="user")
    assert _hits(page) == [f"/conversations/{bank.pk}/?at=0#p0"]
    yesterday = (timezone.localdate() - timedelta(days=1)).isoformat()
    search(to=yesterday)
    assert _hits(page) == []
    assert page.locator("p.empty").inner_text() == "No row matches “refund” with these filters."
    assert page.evaluate("document.scrollingElement.scrollWidth <= window.innerWidth")

    # 49 hits: a page of 20, then the rest as the reader scrolls, each hit once.
    search()
    assert len(_hits(page)) == 20
    for shown in (40, 49):
        page.locator("#search-more").scroll_into_view_if_needed()
        page.wait_for_function(f"() => document.querySelectorAll('ol.hits li.hit').length === {shown}")
    hits = _hits(page)
    assert len(set(hits)) == 49 and page.locator("#search-more").count() == 0
    context.close()


@pytest.mark.parametrize("viewport", ["wide", "phone"])
def test_opening_a_conversation_is_in_the_access_log_an_admin_reads(live_server, user, logged_in_page, viewport):
    user(AUDITOR, "ann")
    user(ADMIN, "root")
    c = store.create_conversation(title="Order 48213", subject="cust:48213")
    for i in range(4):
        store.append_message(conversation_id=c.pk, message={"kind": "note", "text": f"row {i}"})

    context, page = _open(logged_in_page, viewport, "ann")
    page.goto(live_server.url + f"/conversations/{c.pk}/")
    if viewport == "phone":  # the exports fold behind a button on a phone
        page.locator("button.phone-toggle", has_text="Export").click()
    with page.expect_download():
        page.locator("a.button", has_text="JSONL").click()
    page.locator("#p3 details.row-menu > summary").click()
    page.locator("#p3").get_by_role("link", name="What the model saw").click()
    page.wait_for_url("**/saw/3/")
    context.close()
    assert list(ConversationAccess.objects.order_by("id").values_list("actor", "via", "detail")) == [
        ("user:ann", "page", ""), ("user:ann", "export", "jsonl"), ("user:ann", "model_saw", "#3")]

    context, page = _open(logged_in_page, viewport, "root")
    page.goto(live_server.url + "/admin/access/")
    rows = page.locator("table tbody tr")
    assert rows.count() == 3
    text = page.locator("table").inner_text()
    assert "user:ann" in text and "conversation page" in text and "what the model saw" in text and "jsonl" in text
    # Each row links the conversation; the page does not scroll sideways on a phone.
    page.locator("table tbody tr").first.get_by_role("link", name="Order 48213").click()
    page.wait_for_url(f"**/conversations/{c.pk}/")
    page.go_back()
    assert page.evaluate("document.scrollingElement.scrollWidth <= window.innerWidth")
    assert page.get_by_role("link", name="facts access log").is_visible()
    context.close()
