"""Search by meaning in Chromium: a reader asks in their own words and finds the row that says it
differently, marked as found by meaning (docs/screenshots/search-meaning.png)."""

import pytest

from conversations import store
from conversations.roles import AUDITOR
from tests.test_browser_ui import _shot

pytestmark = [pytest.mark.browser, pytest.mark.same_on_every_database, pytest.mark.django_db(transaction=True)]


def test_a_reader_finds_a_paraphrase_by_meaning_and_sees_why(live_server, logged_in_page):
    ticket = store.create_conversation(title="Order 7: broken kettle", subject="customer:42")
    for text in ("Where is my parcel?", "I would like my money back for the broken kettle",
                 "Can you ship it to Lyon instead?", "Thanks, that is all for today"):
        store.append_message(conversation_id=ticket.pk, message={"kind": "user", "content": text})
    other = store.create_conversation(title="Weekly report", subject="team:ops")
    store.append_message(conversation_id=other.pk, message={"kind": "user", "content": "Summarise the open tickets"})

    page = logged_in_page(AUDITOR, "/search/", viewport={"width": 1440, "height": 900})
    page.get_by_label("Find by").select_option("words")
    page.locator("input[name=q]").fill("refund")
    page.locator("input[name=q]").press("Enter")
    page.wait_for_url("**q=refund**")
    assert "money back" not in page.locator("main").inner_text()  # the words alone find nothing

    page.get_by_label("Find by").select_option("meaning")
    page.locator("input[name=q]").press("Enter")
    page.wait_for_url("**mode=meaning**")
    first = page.locator(".hit").first
    assert "money back for the broken kettle" in first.inner_text()
    assert "meaning" in first.locator(".badge").inner_text()
    assert "by meaning" in page.locator("#search-count").inner_text()
    _shot(page, "search-meaning.png")
