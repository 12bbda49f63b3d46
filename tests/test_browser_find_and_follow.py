"""The find box and live follow as a reader meets them (Chromium, 1440x900): "all results" keeps
the search, the hits come into view with the focus, and live follow counts only the rows
appended since the reader arrived."""

import pytest

from conversations import store
from conversations.roles import AUDITOR

pytestmark = [pytest.mark.browser, pytest.mark.same_on_every_database, pytest.mark.django_db(transaction=True)]


def _long(rows: int, word_every: int = 0):
    c = store.create_conversation(title="Long ticket")
    messages = [{"kind": "user" if i % 2 else "assistant",
                 "content": f"step {i}: refund the kettle" if word_every and i % word_every == 0 else f"step {i}"}
                for i in range(rows)]
    for start in range(0, rows, 500):
        store.append_messages(conversation_id=c.pk, messages=messages[start:start + 500])
    return c


def test_all_results_opens_the_search_with_the_words_and_the_conversation(live_server, logged_in_page):
    c = _long(200, word_every=5)  # 40 hits: more than the find box lists
    page = logged_in_page(AUDITOR)
    page.goto(live_server.url + f"/conversations/{c.pk}/")
    page.fill(".find-box input[name=q]", "kettle")
    page.locator(".find-box").get_by_role("button", name="Find").click()
    page.wait_for_selector("#find-results li.hit")
    page.locator("#find-results").get_by_role("link", name="all results").click()
    page.wait_for_url("**/search/?**")
    assert "q=kettle" in page.url and f"conversation={c.pk}" in page.url
    assert page.locator("ol.hits li.hit").count() >= 20


def test_the_hits_come_into_view_and_take_the_focus(live_server, logged_in_page):
    c = _long(300, word_every=7)
    page = logged_in_page(AUDITOR, viewport={"width": 1440, "height": 900})
    page.goto(live_server.url + f"/conversations/{c.pk}/")
    page.fill(".find-box input[name=q]", "kettle")
    page.keyboard.press("Enter")
    page.wait_for_selector("#find-results li.hit")
    page.wait_for_function("() => document.activeElement && document.activeElement.classList.contains('find-count')")
    box = page.locator("#find-results .find-count").bounding_box()
    assert 0 <= box["y"] and box["y"] + box["height"] <= 900


def test_live_follow_counts_only_rows_appended_since_the_reader_arrived(live_server, logged_in_page):
    c = _long(600)  # more than one page: the reader at the top has not loaded the end
    page = logged_in_page(AUDITOR)
    page.clock.install()
    page.goto(live_server.url + f"/conversations/{c.pk}/")
    page.evaluate("document.querySelectorAll('.rows[data-follow-url]').forEach(r => r.dataset.followInterval = 300)")
    page.wait_for_selector("#record a.more")
    store.append_message(conversation_id=c.pk, message={"kind": "note", "text": "one more"})
    page.clock.run_for(4000)
    marker = page.locator("button.new-rows")
    page.wait_for_function("() => !document.querySelector('button.new-rows').hidden", timeout=15000)
    assert marker.inner_text() == "1 new row ↓"
