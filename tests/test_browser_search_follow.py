"""Search and live follow in a real Chromium, at a desktop and a phone viewport."""

import pytest

from conversations import store
from conversations.roles import AUDITOR
from tests.helpers import below_the_bar, count_polls, polls_sent, wait_for_polls
from tests.test_browser_ui import PAYLOADS, _shot

pytestmark = [pytest.mark.browser, pytest.mark.same_on_every_database, pytest.mark.django_db(transaction=True)]

VIEWPORTS = {"wide": {"width": 1440, "height": 900}, "phone": {"width": 390, "height": 844}}


def _ticket(rows=60):
    c = store.create_conversation(title="Blender ticket", subject="cust:7")
    for i in range(rows):
        text = "I want a refund for the cracked blender" if i == 37 else f"step {i}: checking the order"
        store.append_message(conversation_id=c.pk, message={"kind": "user" if i % 2 else "assistant", "content": text})
    store.append_message(conversation_id=c.pk, message={"kind": "user", "content": "refund " + " ".join(PAYLOADS)})
    return c


@pytest.mark.parametrize("viewport", ["wide", "phone"])
def test_a_search_hit_opens_the_conversation_at_that_row_focused(live_server, logged_in_page, viewport):
    c = _ticket()
    page = logged_in_page(AUDITOR, viewport=VIEWPORTS[viewport])
    dialogs = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.get_by_role("link", name="Search", exact=True).click()
    page.fill("input[name=q]", "refund blend*")
    page.get_by_role("button", name="Search").click()
    page.wait_for_url("**/search/?q=refund*")
    hits = page.locator("ol.hits li.hit")
    assert hits.count() == 1
    assert [m.inner_text() for m in hits.first.locator("mark").all()] == ["refund", "blender"]
    # The page does not scroll sideways on a phone.
    assert page.evaluate("document.scrollingElement.scrollWidth <= window.innerWidth")
    if viewport == "wide":
        page.fill("input[name=q]", "refund")
        page.get_by_role("button", name="Search").click()
        page.wait_for_url("**q=refund**")
        assert page.locator("ol.hits li.hit").count() == 2
        assert page.evaluate("typeof window.__pwned") == "undefined" and dialogs == []
        _shot(page, "search.png")
        page.fill("input[name=q]", "refund blend*")
        page.get_by_role("button", name="Search").click()
    page.locator("ol.hits li.hit a.pos").first.click()
    page.wait_for_url(lambda url: f"/conversations/{c.pk}/?at=37&q=" in url and url.endswith("#p37"))
    row = page.locator("#p37")
    assert "is-here" in row.get_attribute("class")
    # The searched words are marked inside the opened row, and only there.
    page.wait_for_selector("#p37[data-search-marks]")
    assert row.locator(".msg-body mark.search-mark").all_inner_texts() == ["refund", "blender"]
    assert page.locator("article.msg:not([data-position='37']) mark.search-mark").count() == 0
    page.wait_for_function("() => document.activeElement && document.activeElement.id === 'p37'")
    # In view and not under the sticky top bar.
    assert below_the_bar(page, "#p37", VIEWPORTS[viewport]["height"])

    # The words come from the address: markup there is text, never run.
    words = "%3Cimg%20src%3Dx%20onerror%3Dwindow.__pwned%3D1%3E%20refund"
    page.goto(live_server.url + f"/conversations/{c.pk}/?at=60&q=" + words)
    page.wait_for_selector("#p60[data-search-marks]")
    assert page.locator("#p60 mark.search-mark").first.inner_text() == "refund"
    assert page.evaluate("typeof window.__pwned") == "undefined" and dialogs == []

    # Bad syntax: a message in the form, not an error page.
    page.goto(live_server.url + '/search/?q="unclosed')
    assert page.locator("#search-error").inner_text().startswith("q:")


def test_the_find_box_searches_inside_the_conversation(live_server, logged_in_page):
    c = _ticket()
    other = store.create_conversation(title="Other")
    store.append_message(conversation_id=other.pk, message={"kind": "user", "content": "refund elsewhere"})
    page = logged_in_page(AUDITOR)
    page.goto(live_server.url + f"/conversations/{c.pk}/")
    page.fill(".find-box input[name=q]", "refund")
    page.locator(".find-box").get_by_role("button", name="Find").click()
    page.wait_for_selector("#find-results li.hit")
    assert page.url.endswith(f"/conversations/{c.pk}/")  # the page stayed
    positions = page.locator("#find-results li.hit a.pos").all_inner_texts()
    assert positions == ["#60", "#37"]


def test_live_follow_shows_new_rows_once_without_reloading(live_server, logged_in_page):
    c = _ticket(rows=40)
    page = logged_in_page(AUDITOR)
    page.clock.install()  # the page's timers run in real time, and the test can move them on at once
    page.goto(live_server.url + f"/conversations/{c.pk}/")
    page.evaluate("document.querySelectorAll('.rows[data-follow-url]').forEach(r => r.dataset.followInterval = 300)")
    page.evaluate("window.__sameDocument = true")
    requests = []
    page.on("request", lambda r: requests.append(r.url) if "after=" in r.url else None)
    # Wait until polling started (the interval is read at set-up: 3 s the first time).
    page.wait_for_function("() => document.querySelectorAll('#record article.msg').length === 41")
    for i in range(3):
        store.append_message(conversation_id=c.pk, message={"kind": "note", "text": f"appended live {i}"})
    page.wait_for_function("() => document.querySelectorAll('#record article.msg').length === 44", timeout=15000)
    marker = page.locator("button.new-rows")
    assert marker.is_visible() and marker.inner_text() == "3 new rows ↓"
    _shot(page, "live-follow.png")
    marker.click()  # to the newest row
    page.wait_for_function("() => document.activeElement && document.activeElement.id === 'p43'")
    positions = page.locator("#record article.msg").evaluate_all("els => els.map(e => +e.dataset.position)")
    assert positions == list(range(44))  # each row once, in order
    # No checkpoint: the active view says it equals the record and repeats no row.
    assert page.locator("#active-equals").is_visible() and page.locator("#active-pane article.msg").count() == 0
    assert page.evaluate("window.__sameDocument") is True  # never reloaded
    wait_for_polls(page, 2)
    page.wait_for_function("() => document.querySelector('button.new-rows').hidden")

    # Hidden tab: no polling until it is shown again.
    page.evaluate("""() => {
        Object.defineProperty(document, 'visibilityState', {configurable: true, get: () => 'hidden'});
        document.dispatchEvent(new Event('visibilitychange'));
    }""")
    page.clock.run_for(3500)  # any poll scheduled before hiding has run
    before = len(requests)
    count_polls(page)
    store.append_message(conversation_id=c.pk, message={"kind": "note", "text": "while hidden"})
    page.clock.run_for(3500)  # ten poll intervals on the page's clock
    assert polls_sent(page) == 0 and len(requests) == before
    assert page.locator("#record article.msg").count() == 44
    page.evaluate("""() => {
        Object.defineProperty(document, 'visibilityState', {configurable: true, get: () => 'visible'});
        document.dispatchEvent(new Event('visibilitychange'));
    }""")
    page.wait_for_function("() => document.querySelectorAll('#record article.msg').length === 45", timeout=15000)
