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


LONG = "sk_live_" + "9f3a" * 18  # 80 characters, no space: a key, a hash, base64


def test_long_unbroken_values_wrap_inside_their_boxes_on_a_phone(live_server, logged_in_page):
    from conversations.ledger import store as ledger

    c = store.create_conversation(title="Keys and hashes", subject="cust:" + LONG)
    store.append_messages(conversation_id=c.pk, messages=[
        {"kind": "user", "content": f"my key is {LONG} and https://example.com/{LONG}/{LONG}"},
        {"kind": "assistant", "content": "Checking.", "tool_calls": [
            {"id": "c1", "name": "lookup_" + LONG[:40], "arguments": {"token": LONG, "url": "https://x/" + LONG}}]},
        {"kind": "tool", "tool_call_id": "c1", "content": LONG * 3},
        {"kind": "note", "text": LONG},
    ])
    ledger.set_state(conversation_id=c.pk, state={"api_key": LONG, LONG[:30]: [LONG, {"b64": LONG * 2}]},
                     expected_version=0)
    ledger.record_action(conversation_id=c.pk, idempotency_key="refund-" + LONG, name="refund", arguments={"k": LONG},
                         result={"receipt": LONG})
    page = logged_in_page(AUDITOR, viewport={"width": 390, "height": 844})
    page.goto(live_server.url + f"/conversations/{c.pk}/")
    page.wait_for_selector("article.msg")
    widths = page.evaluate("""() => ({page: document.scrollingElement.scrollWidth,
        wide: [...document.querySelectorAll('body *')].filter(e => e.getBoundingClientRect().right > 391
              && getComputedStyle(e).position !== 'fixed').slice(0, 5).map(e => e.tagName + '.' + e.className)})""")
    assert widths["page"] <= 390, widths
    bar = page.locator("nav.page-nav").bounding_box()
    assert bar is None or bar["x"] + bar["width"] <= 390
