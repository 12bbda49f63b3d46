"""A reader with a keyboard, and one who wants the messages first (Chromium, 1440x900): the first
message is a few Tab presses away, the context chart is one tab stop with the arrow keys inside,
and the panels above the rows fold into one line that remembers whether it was open."""

import pytest

from conversations import store
from conversations.roles import ADMIN, AUDITOR
from tests.test_browser_ui import _shot

pytestmark = [pytest.mark.browser, pytest.mark.same_on_every_database, pytest.mark.django_db(transaction=True)]

WIDE = {"width": 1440, "height": 900}


def _session(calls: int = 300):
    """A long coding session: replies with token usage (a point each on the chart), a fold, a fork."""
    c = store.create_conversation(title="Coding session", subject="dev:ada")
    rows = []
    for i in range(calls):
        rows.append({"kind": "user", "content": f"step {i}"})
        usage = {"input_tokens": 1000 + 10 * i, "output_tokens": 50}
        meta = {"model": "claude-sonnet-4-5", "usage": usage}
        rows.append({"kind": "assistant", "content": f"done {i}", "meta": meta})
    for start in range(0, len(rows), 500):
        store.append_messages(conversation_id=c.pk, messages=rows[start:start + 500])
    store.checkpoint_at(conversation_id=c.pk, position=len(rows) // 2 - 1, summary="The first half of the steps.")
    store.fork_conversation(conversation_id=c.pk, position=9, title="A branch")
    return c


def _tab_to_first_message(page) -> tuple[int, int]:
    """Tab presses from the top until a control of the first message has the focus; the Skip to the
    messages link is followed when met. (presses in all, presses after the skip link)."""
    presses, after_skip = 0, None
    for _ in range(60):
        page.keyboard.press("Tab")
        presses += 1
        if after_skip is not None:
            after_skip += 1
        focus = page.evaluate("""() => { const a = document.activeElement;
            const first = document.querySelector('#record article.msg');
            return {text: (a.textContent || '').trim(), skip: a.classList.contains('skip-link'),
                    inFirst: !!(a.closest && a.closest('#record article.msg') === first)}; }""")
        if focus["inFirst"]:
            return presses, after_skip
        if focus["skip"] and "messages" in focus["text"]:
            page.keyboard.press("Enter")
            after_skip = 0
    raise AssertionError("the first message was not reached")


def test_the_first_message_is_a_few_tab_presses_from_the_top(live_server, logged_in_page):
    c = _session()
    page = logged_in_page(AUDITOR, f"/conversations/{c.pk}/", viewport=WIDE)
    page.wait_for_selector("#context-chart", state="attached")  # drawn: its points must not be stops
    presses, after_skip = _tab_to_first_message(page)
    assert presses <= 5 and after_skip is not None and after_skip <= 3, (presses, after_skip)


def test_the_context_chart_is_one_tab_stop_with_the_arrows_inside(live_server, logged_in_page):
    c = _session(40)
    page = logged_in_page(AUDITOR, f"/conversations/{c.pk}/", viewport=WIDE)
    page.locator("#conv-panels > summary").click()
    page.wait_for_selector("#context-chart svg")
    stops = page.evaluate("""() => [...document.querySelectorAll('#context-chart a, #context-chart svg')]
        .filter(e => e.tabIndex >= 0).length""")
    assert stops == 1
    page.locator("#context-chart svg").focus()
    page.keyboard.press("ArrowRight")
    first = page.evaluate("document.activeElement.dataset.position")
    page.keyboard.press("ArrowRight")
    second = page.evaluate("document.activeElement.dataset.position")
    assert int(second) > int(first)
    assert page.evaluate("document.activeElement.getAttribute('aria-label')").startswith(f"#{second}:")
    page.keyboard.press("End")
    last = page.evaluate("document.activeElement.dataset.position")
    page.keyboard.press("Enter")
    page.wait_for_url(f"**?at={last}#p{last}")


def test_the_messages_come_first_and_the_panels_open_as_left(live_server, logged_in_page):
    c = _session(60)
    page = logged_in_page(AUDITOR, f"/conversations/{c.pk}/", viewport=WIDE)
    first = page.locator("#record article.msg").first.bounding_box()
    assert first["y"] <= 400, first
    _shot(page, "conversation-messages-first.png")
    assert not page.locator("#conv-panels").evaluate("d => d.open")
    page.locator("#conv-panels > summary").click()
    page.wait_for_selector("#context-chart")
    page.reload()
    assert page.locator("#conv-panels").evaluate("d => d.open")  # remembered for this person


def test_a_phone_keeps_the_screen_for_the_rows(live_server, logged_in_page):
    c = _session(60)
    # An admin: the most links in the navigation.
    page = logged_in_page(ADMIN, f"/conversations/{c.pk}/", viewport={"width": 390, "height": 844})
    # The top bar is two rows (brand, project and Log out; then the navigation, scrolling
    # sideways in itself): it was four, 207 px.
    assert page.locator(".topbar").bounding_box()["height"] <= 120
    page.locator("#record article.msg").nth(30).scroll_into_view_if_needed()
    fixed = page.evaluate("""() => [...document.querySelectorAll('body *')].filter(e => {
        const style = getComputedStyle(e), box = e.getBoundingClientRect();
        const pinned = style.position === 'fixed' || style.position === 'sticky';
        return pinned && box.height > 0 && box.bottom > 0 && box.top < innerHeight && style.visibility !== 'hidden';
    }).reduce((sum, e) => sum + e.getBoundingClientRect().height, 0)""")
    assert fixed <= 0.1 * 844, fixed  # at most a tenth of the screen stays over the rows


def test_desktop_go_to_buttons_cover_no_row(live_server, logged_in_page):
    c = _session(60)
    page = logged_in_page(AUDITOR, f"/conversations/{c.pk}/", viewport=WIDE)
    assert page.locator("nav.page-nav").evaluate("n => getComputedStyle(n).position") == "static"


def test_the_list_shows_rows_tokens_and_cost_sorted_as_asked(live_server, logged_in_page):
    for n in (6, 30, 12):
        _session(n)
    page = logged_in_page(AUDITOR, "/", viewport=WIDE)
    page.get_by_role("link", name="Tokens").click()
    page.wait_for_url("**sort=tokens**")
    assert page.locator("th[aria-sort=descending]").text_content().strip().startswith("Tokens")
    _shot(page, "conversation-list.png")
