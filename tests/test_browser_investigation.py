"""Investigating a conversation in Chromium: tool call ↔ result links, the errors-only
and tool filters, copying a row as JSON or as a link, collapse all, relative and
absolute times, what the model saw, jump-to, and readable row actions."""

import json
from datetime import timedelta

import pytest

from conversations import store, views
from conversations.models import Message
from conversations.roles import AUDITOR
from tests.helpers import below_the_bar, unfold
from tests.test_browser_search_follow import VIEWPORTS

pytestmark = [pytest.mark.browser, pytest.mark.same_on_every_database, pytest.mark.django_db(transaction=True)]



def _session(filler=20):
    """A support session: a lookup that works, a refund that fails, filler, a fold."""
    c = store.create_conversation(title="Refund investigation", subject="cust:9")
    rows = [
        {"kind": "system", "content": "You are a support agent."},
        {"kind": "user", "content": "My blender arrived cracked, order 48213."},
        {"kind": "assistant", "content": "Let me look.",
         "meta": {"model": "gpt-x", "usage": {"input_tokens": 812, "output_tokens": 40}},
         "tool_calls": [{"id": "call_look", "name": "lookup_order", "arguments": {"order_id": "48213"}}]},
        {"kind": "tool", "tool_call_id": "call_look", "name": "lookup_order", "content": '{"price": 149}'},
        {"kind": "assistant", "content": "Refunding.",
         "tool_calls": [{"id": "call_refund", "name": "issue_refund", "arguments": {"amount": 149}}]},
        {"kind": "note", "text": "waiting for the payment provider"},
        {"kind": "tool", "tool_call_id": "call_refund", "name": "issue_refund",
         "content": "Traceback (most recent call last):\n  CardExpired: card 4417", "is_error": True},
    ]
    for m in rows:
        store.append_message(conversation_id=c.pk, message=m)
    # The agent folded the start before it went on: rows written after this saw the summary.
    # (At #3, after the lookup's result: #4 calls the refund, answered at #6, and a fold
    # between a call and its result is refused.)
    store.checkpoint_at(conversation_id=c.pk, position=3, summary="Order 48213 looked up; refund next.")
    for i in range(filler):
        store.append_message(conversation_id=c.pk,
                             message={"kind": "user" if i % 2 else "assistant", "content": f"filler {i}"})
    return c


def _open(logged_in_page, viewport="wide", **context_kw):
    page = logged_in_page(AUDITOR, viewport=VIEWPORTS[viewport], **context_kw)
    return page.context, page


def _focused(page):
    return page.evaluate("document.activeElement && document.activeElement.id")


def _below_the_bar(page, selector, viewport="wide"):
    return below_the_bar(page, selector, VIEWPORTS[viewport]["height"])


def _positions(page, pane):
    return page.locator(f"#{pane} article.msg[data-position]").evaluate_all("els => els.map(e => +e.dataset.position)")


def test_a_tool_call_links_to_its_result_and_back(live_server, logged_in_page):
    c = _session()
    context, page = _open(logged_in_page)
    page.goto(live_server.url + f"/conversations/{c.pk}/")
    # On the same page the result sits under its call, marked failed …
    result = page.locator("#p4 details.result")
    assert "CardExpired" in result.inner_text() and result.locator(".flag-error").count() == 1
    # … and its own row, in its place, points back to the turn.
    result.get_by_role("link", name="its row, #6").click()
    page.wait_for_function("() => document.activeElement && document.activeElement.id === 'p6'")
    assert _below_the_bar(page, "#p6")
    page.locator("#p6").get_by_role("link", name="#4").click()
    page.wait_for_function("() => document.activeElement && document.activeElement.id === 'p4'")
    assert _below_the_bar(page, "#p4")
    # A result the page does not hold is reached by its link, focused below the bar.
    page.goto(live_server.url + f"/conversations/{c.pk}/?kind=assistant")
    page.locator("#p4").get_by_role("link", name="↓ its result").click()
    page.wait_for_url(f"**/conversations/{c.pk}/?at=6#p6")
    page.wait_for_function("() => document.activeElement && document.activeElement.id === 'p6'")
    assert "is-here" in page.locator("#p6").get_attribute("class")
    assert _below_the_bar(page, "#p6")
    context.close()


def test_errors_only_and_tool_filters_narrow_both_views(live_server, logged_in_page):
    c = _session()
    context, page = _open(logged_in_page)
    page.goto(live_server.url + f"/conversations/{c.pk}/")
    page.evaluate("window.__sameDocument = true")
    unfold(page, "#row-filters")
    page.get_by_label("Errors only").check()
    page.get_by_role("button", name="Apply").click()
    page.wait_for_url("**errors=1**")
    page.wait_for_function("() => document.querySelectorAll('#record article.msg').length === 1")
    assert _positions(page, "record") == [6] and _positions(page, "active") == [6]
    assert page.locator("#p6 .flag-error").is_visible()
    page.get_by_label("Errors only").uncheck()
    page.get_by_role("textbox", name="Tool").fill("lookup_order")
    page.get_by_role("button", name="Apply").click()
    page.wait_for_url("**tool=lookup_order**")
    page.wait_for_function("() => document.querySelectorAll('#record article.msg').length === 2")
    assert _positions(page, "record") == [2, 3]
    # The active view starts after the fold at #3: neither row is in it, and it says so.
    assert _positions(page, "active") == []
    assert "No rows of the tool “lookup_order” in the active view (after the fold at #3)" in \
        page.locator("#active .empty").inner_text()
    assert page.evaluate("window.__sameDocument") is True
    # The filter survives a reload (it is in the address), and Clear ends it.
    page.reload()
    assert _positions(page, "record") == [2, 3]
    page.get_by_role("link", name="Clear").click()
    page.wait_for_url(f"**/conversations/{c.pk}/")
    assert len(_positions(page, "record")) == 27
    context.close()


def test_copy_a_row_as_json_and_its_link(live_server, logged_in_page):
    c = _session()
    context, page = _open(logged_in_page, permissions=["clipboard-read", "clipboard-write"])
    page.goto(live_server.url + f"/conversations/{c.pk}/")
    row = page.locator("#p4")
    row.locator("details.row-menu > summary").click()  # the row's actions, in one menu
    row.get_by_role("button", name="Copy JSON").click()
    page.wait_for_function("() => document.querySelector('#p4 button[data-copy=json]').textContent === 'Copied'")
    copied = json.loads(page.evaluate("navigator.clipboard.readText()"))
    stored = Message.objects.get(conversation_id=c.pk, position=4)
    assert copied["position"] == 4 and copied["kind"] == "assistant"
    assert copied["message"] == json.loads(stored.content)
    row.get_by_role("button", name="Copy link").click()
    page.wait_for_function("() => document.querySelector('#p4 button[data-copy=link]').textContent === 'Copied'")
    link = page.evaluate("navigator.clipboard.readText()")
    assert link == live_server.url + f"/conversations/{c.pk}/?at=4#p4"
    # The copied link opens the row, focused.
    page.goto(link)
    page.wait_for_function("() => document.activeElement && document.activeElement.id === 'p4'")
    context.close()


def test_collapse_all_folds_every_row_to_its_head_also_rows_loaded_later(live_server, logged_in_page, monkeypatch):
    monkeypatch.setattr(views, "ROW_PAGE", 10)
    c = _session(filler=40)
    context, page = _open(logged_in_page)
    page.goto(live_server.url + f"/conversations/{c.pk}/")
    toggle = page.locator("button[data-collapse-all]")
    first_height = page.locator("#p6").bounding_box()["height"]
    toggle.click()
    assert toggle.get_attribute("aria-pressed") == "true" and toggle.inner_text() == "Expand all"
    assert page.locator("#p6 .msg-body").is_hidden() and page.locator("#a6 .msg-body").is_hidden()
    assert page.locator("#p6 .msg-head").is_visible()
    assert page.locator("#p6").bounding_box()["height"] < first_height
    # Rows that arrive while scrolling come in collapsed too.
    page.locator("#record-more").scroll_into_view_if_needed()
    page.wait_for_selector("#p20")
    assert page.locator("#p20 .msg-body").is_hidden()
    toggle.click()
    assert toggle.get_attribute("aria-pressed") == "false" and toggle.inner_text() == "Collapse all"
    assert page.locator("#p6 .msg-body").is_visible() and page.locator("#p20 .msg-body").is_visible()
    context.close()


def test_times_read_relative_beside_the_absolute_time(live_server, logged_in_page):
    c = _session(filler=0)
    created = Message.objects.get(conversation_id=c.pk, position=0).created_at
    context, page = _open(logged_in_page, timezone_id="UTC")
    page.clock.set_fixed_time(created + timedelta(hours=3, minutes=5))
    page.goto(live_server.url + f"/conversations/{c.pk}/")
    stamp = page.locator("#p0 time")
    assert stamp.get_attribute("datetime") == created.isoformat()
    assert stamp.get_attribute("title") == created.isoformat()
    assert stamp.inner_text() == created.strftime("%Y-%m-%d %H:%M:%S") + " · 3 h ago"
    page.clock.set_fixed_time(created + timedelta(days=2, hours=1))
    page.reload()
    assert page.locator("#p0 time .rel").inner_text() == " · 2 days ago"
    # Without JavaScript: the absolute time alone.
    context.close()
    context, page = _open(logged_in_page, java_script_enabled=False)
    page.goto(live_server.url + f"/conversations/{c.pk}/")
    assert page.locator("#p0 time").inner_text() == created.strftime("%Y-%m-%d %H:%M:%S")
    context.close()


def test_what_the_model_saw_reads_newest_first_with_its_size_and_legend(live_server, logged_in_page, monkeypatch):
    monkeypatch.setattr(views, "ROW_PAGE", 10)
    c = _session(filler=30)
    context, page = _open(logged_in_page)
    page.goto(live_server.url + f"/conversations/{c.pk}/?at=30")
    page.locator("#p30 details.row-menu > summary").click()
    page.locator("#p30").get_by_role("link", name="What the model saw").click()
    page.wait_for_url(f"**/conversations/{c.pk}/saw/30/")
    # The rows just before #30 at the top, reading back to the fold (#3) and its summary.
    assert _positions(page, "saw")[:3] == [29, 28, 27]
    # Scrolled to from the page itself: a link already on screen is swapped by htmx at once,
    # and Playwright's scroll would then find it detached.
    more = "() => { const m = document.getElementById('saw-more'); if (m) m.scrollIntoView(); }"
    page.evaluate(more)
    page.wait_for_function("() => document.querySelectorAll('#saw article.msg[data-position]').length === 20")
    page.evaluate(more)
    page.wait_for_function("() => document.querySelectorAll('#saw article.msg[data-position]').length === 26")
    assert _positions(page, "saw") == list(range(29, 3, -1))
    assert "Order 48213 looked up; refund next." in page.locator("#saw").inner_text()
    # Its size: 26 rows plus the summary, and the characters as stored.
    rows = Message.objects.filter(conversation_id=c.pk, position__gt=3, position__lt=30)
    chars = sum(len(m.content) for m in rows) + len("Order 48213 looked up; refund next.")
    lead = page.locator(".context-size").inner_text()
    assert "26 rows" in lead and f"{chars} characters" in lead
    assert "Newest first: #29 at the top, reading back to #4, then the summary." in lead
    legend = page.locator("ul.legend li").all_inner_texts()
    assert {"user", "assistant", "tool", "system", "note"} <= set(legend)
    # #0: nothing came before it, said plainly.
    page.goto(live_server.url + f"/conversations/{c.pk}/saw/0/")
    assert page.locator(".lead").inner_text() == \
        "Nothing: #0 is the first row of the conversation, so the model saw no earlier row of it."
    assert "#-1" not in page.locator("main").inner_text()
    context.close()


@pytest.mark.parametrize("viewport", ["wide", "phone"])
def test_jump_to_focuses_the_row_and_aligns_the_active_view(live_server, logged_in_page, monkeypatch, viewport):
    monkeypatch.setattr(views, "ROW_PAGE", 10)
    c = _session(filler=60)
    context, page = _open(logged_in_page, viewport)
    page.goto(live_server.url + f"/conversations/{c.pk}/")
    unfold(page, "#row-filters")  # the filters fold into one line at every width
    page.get_by_label("Jump to #").fill("50")
    page.get_by_role("button", name="Apply").click()
    page.wait_for_url("**at=50**")
    page.wait_for_function("() => document.activeElement && document.activeElement.id === 'p50'")
    assert _below_the_bar(page, "#p50", viewport)
    assert "is-here" in page.locator("#p50").get_attribute("class")
    # The active view shows the same rows (after the fold), the row marked in it too.
    record, active = _positions(page, "record"), _positions(page, "active")
    assert 50 in record and 50 in active and active[0] == record[0]
    assert "is-here" in page.locator("#a50").get_attribute("class")
    if viewport == "phone":
        page.locator("label[for=tab-active]").click()
        assert page.locator("#a50").is_visible()
    # A permalink does the same on a fresh load.
    page.goto(live_server.url + f"/conversations/{c.pk}/?at=40#p40")
    page.wait_for_function("() => document.activeElement && document.activeElement.id === 'p40'")
    assert _below_the_bar(page, "#p40", viewport)
    assert _positions(page, "active")[0] == _positions(page, "record")[0]
    context.close()


CONTRAST = """(el) => {
    // Any CSS colour (rgb(), color(srgb …) from color-mix(), …) as 8-bit sRGB, read off a painted pixel.
    const canvas = document.createElement('canvas'); canvas.width = canvas.height = 1;
    const ctx = canvas.getContext('2d', {willReadFrequently: true});
    const rgb = (s) => { ctx.clearRect(0, 0, 1, 1); ctx.fillStyle = s; ctx.fillRect(0, 0, 1, 1);
        const d = ctx.getImageData(0, 0, 1, 1).data; return {r: d[0], g: d[1], b: d[2], a: d[3] / 255}; };
    const lum = (c) => { const f = (v) => {
        v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); };
        return 0.2126 * f(c.r) + 0.7152 * f(c.g) + 0.0722 * f(c.b); };
    // The background the text is drawn on: the nearest ancestor that paints one.
    let node = el, bg = null;
    while (node && node.nodeType === 1) {
        const c = rgb(getComputedStyle(node).backgroundColor);
        if (c.a > 0) { bg = c; break; }
        node = node.parentElement;
    }
    bg = bg || {r: 255, g: 255, b: 255, a: 1};
    const fg = rgb(getComputedStyle(el).color);
    const opacity = Number(getComputedStyle(el).opacity);
    const mix = (a, b, t) => a * t + b * (1 - t);
    const seen = {r: mix(fg.r, bg.r, fg.a * opacity), g: mix(fg.g, bg.g, fg.a * opacity),
                  b: mix(fg.b, bg.b, fg.a * opacity)};
    const [hi, lo] = [lum(seen), lum(bg)].sort((x, y) => y - x);
    return (hi + 0.05) / (lo + 0.05);
}"""


def test_row_actions_read_at_4_5_to_1_on_every_kind(live_server, logged_in_page):
    c = _session(filler=2)
    store.append_message(conversation_id=c.pk, message={"kind": "thought", "text": "hm"})
    context, page = _open(logged_in_page)
    page.goto(live_server.url + f"/conversations/{c.pk}/")
    actions = page.locator("#record article.msg .row-actions a, #record article.msg .row-actions button")
    assert actions.count() > 20
    kinds = set()
    for i in range(actions.count()):
        el = actions.nth(i)
        ratio = el.evaluate(CONTRAST)
        kinds.add(el.evaluate("e => e.closest('article').dataset.kind"))
        assert ratio >= 4.5, (el.inner_text(), ratio)
    # Hovered, too.
    page.locator("#p6").hover()
    assert page.locator("#p6 .row-actions a").first.evaluate(CONTRAST) >= 4.5
    assert {"system", "user", "assistant", "tool", "note", "thought"} <= kinds
    context.close()
