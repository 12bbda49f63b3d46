"""Reading a conversation in a real Chromium: a reply as one turn with
its numbers, rendered Markdown that stays inert, the context chart, full vs active by row,
First/Latest, live follow you can see, and the page on a phone.

Saves docs/screenshots/turn-parallel-tool-calls.png, context-chart.png, markdown-code.png
and phone-ledger.png.
"""

from pathlib import Path

import pytest

from conversations import store
from conversations.imports import entry_appends, entry_streams
from conversations.roles import AUDITOR
from tests.helpers import below_the_bar, count_polls, polls_sent, unfold, wait_for_polls
from tests.test_one_reply_one_row import session_entries

pytestmark = [pytest.mark.browser, pytest.mark.same_on_every_database, pytest.mark.django_db(transaction=True)]

SHOTS = Path(__file__).resolve().parent.parent / "docs" / "screenshots"
DESKTOP = {"width": 1440, "height": 900}
PHONE = {"width": 390, "height": 844}

MARKDOWN = """Here is **the fix** and a list:

- rounds *once* per invoice
- keeps `vat()` pure

```python
def vat(lines):
    return round(sum(lines) * 0.19, 2)
```

[docs](https://example.com/vat) [bad](javascript:window.__xss=1) <img src=x onerror="window.__xss=2">
<script>window.__xss=3</script> ![pixel](https://tracker.example/p.gif)
[data](data:text/html,<script>window.__xss=4</script>) <svg onload="window.__xss=5"></svg>
<a href="javascript:window.__xss=6">raw anchor</a> <iframe src="javascript:window.__xss=7"></iframe>
"""


def _open(logged_in_page, viewport=DESKTOP):
    page = logged_in_page(AUDITOR, viewport=viewport)
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("dialog", lambda d: (errors.append("dialog: " + d.message), d.dismiss()))
    return page.context, page, errors


def _settle(page):
    page.evaluate("() => new Promise(done => requestAnimationFrame(() => requestAnimationFrame(done)))")


def _shot(page, name, **kw):
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / name), **kw)


def _import(entries):
    entry_appends.append_entries(format="claude-code", namespace="-srv-ops", external_id=entries[0]["sessionId"],
                            entries=entries)
    return entry_streams.load_entries(format="claude-code", namespace="-srv-ops",
                                 external_id=entries[0]["sessionId"])[0]


# ---- 1. turns ---------------------------------------------------------------------


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_a_reply_reads_as_one_turn_with_its_numbers_and_one_menu(live_server, logged_in_page, viewport):
    from playwright.sync_api import expect

    cid = _import(session_entries())
    context, page, errors = _open(logged_in_page, viewport)
    page.goto(f"{live_server.url}/conversations/{cid}/")
    reply = page.locator("#p1")
    # The reply: its text, then its three calls, each with its result nested under it.
    results = reply.locator("details.result")
    expect(results).to_have_count(3)
    for n, service in enumerate(("api", "billing", "search")):
        call = reply.locator(".tool-call").nth(n)
        assert service in call.locator(".tool-head").inner_text() or service in call.inner_text()
        assert f"{service}: up" in call.locator("details.result").inner_text()
    # The result rows keep their place as one-line pointers back to the turn.
    for position in (2, 3, 4):
        assert "shown under its call in #1" in " ".join(page.locator(f"#p{position}").text_content().split())
    # Per reply: model, tokens, cache and a cost from the price table.
    usage = reply.locator(".usage")
    assert "claude-sonnet-4-5" in usage.inner_text() and usage.locator(".cost").inner_text().startswith("$")
    # The header's totals load after the first paint, folded with the other panels.
    unfold(page, "#conv-panels")
    expect(page.locator("#usage-cost")).to_contain_text("$")
    # One small menu per row; closed, none of its actions takes room.
    assert not reply.get_by_role("link", name="What the model saw").is_visible()
    menu = reply.locator("details.row-menu > summary")
    box = menu.bounding_box()
    assert box["width"] >= 44 and box["height"] >= 44
    menu.click()
    expect(reply.get_by_role("link", name="What the model saw")).to_be_visible()
    page.locator("h1").click()  # a click elsewhere closes it
    expect(reply.get_by_role("link", name="What the model saw")).to_be_hidden()
    if viewport is DESKTOP:
        page.set_viewport_size({"width": 1440, "height": 1300})
        _settle(page)
        _shot(page, "turn-parallel-tool-calls.png", full_page=True)
    # Collapse all leaves one line per row: its first words.
    unfold(page, "#row-filters")
    page.get_by_role("button", name="Collapse all").click()
    expect(page.locator("#p0 .msg-body")).to_be_hidden()
    preview = page.locator("#p0 .preview-line")
    expect(preview).to_be_visible()
    assert preview.inner_text().startswith("Are the three services up?")
    assert page.evaluate("document.scrollingElement.scrollWidth <= window.innerWidth")
    assert errors == []
    context.close()


# ---- 3. safe rich text --------------------------------------------------------------


def test_markdown_renders_code_is_highlighted_and_every_payload_stays_inert(live_server, logged_in_page):
    from playwright.sync_api import expect

    c = store.create_conversation(title="Rendered")
    store.append_message(conversation_id=c.pk, message={
        "kind": "user", "content": "<local-command-caveat>Caveat: the messages below were generated by the user "
                                   "while running local commands.</local-command-caveat>"})
    store.append_message(conversation_id=c.pk, message={
        "kind": "user", "content": "<command-name>/exit</command-name>\n<command-message>exit</command-message>"})
    store.append_message(conversation_id=c.pk, message={"kind": "user", "content": "Fix the VAT rounding."})
    store.append_message(conversation_id=c.pk, message={"kind": "assistant", "content": MARKDOWN,
                                                        "meta": {"model": "gpt-4o", "usage": {
                                                            "prompt_tokens": 1200, "completion_tokens": 80,
                                                            "prompt_tokens_details": {"cached_tokens": 1000}}}})
    context, page, errors = _open(logged_in_page)
    page.goto(f"{live_server.url}/conversations/{c.pk}/")
    row = page.locator("#p3")
    body = row.locator(".msg-body .text.md")
    expect(body.locator("strong")).to_have_text("the fix")
    assert body.locator("li").count() == 2 and body.locator("code").first.inner_text() == "vat()"
    # Pygments' classes, coloured by the stylesheet (no inline style under the CSP).
    keyword = body.locator("pre.highlight span.k").first
    assert keyword.inner_text() == "def"
    assert keyword.evaluate("e => getComputedStyle(e).color") != body.evaluate("e => getComputedStyle(e).color")
    link = body.get_by_role("link", name="docs")
    assert link.get_attribute("href") == "https://example.com/vat"
    assert set(link.get_attribute("rel").split()) >= {"nofollow", "noopener"}
    # Refused and inert: no javascript: or data: link, no element from the text, no image loaded.
    hrefs = body.locator("a").evaluate_all("els => els.map(e => e.getAttribute('href'))")
    assert not any(h.lower().startswith(("javascript:", "data:")) for h in hrefs), hrefs
    for tag in ("img", "script", "svg", "iframe"):
        assert body.locator(tag).count() == 0, tag
    assert "onerror" in body.inner_text()  # shown as the text it is
    assert body.get_by_role("link", name="image: pixel").count() == 1
    assert body.get_by_role("link", name="bad").count() == 0
    page.evaluate("() => document.querySelectorAll('#p3 a').forEach(a => a.dispatchEvent(new MouseEvent('mouseover')))")
    assert page.evaluate("window.__xss") is None
    # OpenAI usage: cached tokens read apart from the rest, priced.
    assert "cache 1000 read" in row.locator(".usage").inner_text() and "$" in row.locator(".usage").inner_text()
    # Claude Code's wrappers: muted meta, not a person's words.
    for position in (0, 1):
        harness = page.locator(f"#p{position}")
        assert "is-harness" in harness.get_attribute("class")
        assert harness.locator(".harness-tag").count() >= 1
    assert page.locator("#p1 .harness-tag").first.inner_text() == "command-name"
    assert "is-harness" not in page.locator("#p2").get_attribute("class")
    _settle(page)
    row.scroll_into_view_if_needed()
    _shot(page, "markdown-code.png")
    # Raw: the exact stored text, in place of the rendering, and back.
    row.locator("details.row-menu > summary").click()
    row.get_by_role("link", name="Raw").click()
    raw = row.locator("pre.raw-text")
    expect(raw).to_be_visible()
    from conversations.models import Message
    stored = Message.objects.get(conversation_id=c.pk, position=3).content
    assert raw.text_content() == stored
    assert row.locator(".msg-body").is_hidden()
    row.locator("details.row-menu > summary").click()
    row.get_by_role("link", name="Raw").click()
    expect(raw).to_have_count(0)
    assert page.evaluate("window.__xss") is None and errors == []
    context.close()


# ---- 2. the context chart --------------------------------------------------------------


def test_the_context_chart_shows_folds_forks_and_jumps_to_a_row(live_server, logged_in_page):
    c = store.create_conversation(title="Long coding session")
    for turn in range(24):
        store.append_message(conversation_id=c.pk, message={"kind": "user", "content": f"step {turn} " + "x" * 400})
        meta = {"model": "claude-sonnet-4-5", "usage": {"input_tokens": 200, "output_tokens": 90,
                                                        "cache_read_input_tokens": 1500 + 700 * (turn % 8)}}
        store.append_message(conversation_id=c.pk, message={"kind": "assistant", "content": f"done {turn}",
                                                            **({"meta": meta} if turn % 6 else {})})
        if turn in (7, 15):
            store.checkpoint_at(conversation_id=c.pk, position=2 * turn + 1, summary=f"Steps up to {turn}.")
    store.fork_conversation(conversation_id=c.pk, position=20, title="Try another rounding")
    importer_child = store.create_conversation(title="Explore subagent")
    from conversations.models import Conversation
    Conversation.objects.filter(pk=importer_child.pk).update(parent_id=c.pk, forked_from_position=30,
                                                             parent_relation="subagent")
    context, page, errors = _open(logged_in_page)
    page.goto(f"{live_server.url}/conversations/{c.pk}/")
    unfold(page, "#conv-panels")
    chart = page.locator("#context-chart svg")
    chart.wait_for()
    points = chart.locator("a.point")
    assert points.count() == 24
    assert chart.locator("a.point.estimated").count() == 4  # turns 0, 6, 12, 18 carry no usage
    assert chart.locator("a.fold-mark").count() == 2
    assert chart.locator("a.fork-mark").count() == 1 and chart.locator("a.spawn-mark").count() == 1
    caption = page.locator("#context-chart figcaption").inner_text()
    assert "estimated" in caption and "folds" in caption.lower()
    # Context grows between folds and drops after each one (measured from usage).
    y = {int(p): float(cy) for p, cy in points.evaluate_all(
        "els => els.map(e => [e.dataset.position, e.querySelector('circle').getAttribute('cy')])")}
    assert y[15] < y[3]  # turn 7 (more cache) sits higher than turn 1
    _settle(page)
    page.locator("#usage").scroll_into_view_if_needed()
    _shot(page, "context-chart.png")
    page.locator("#context-chart a.point[data-position='27']").click()
    page.wait_for_url(f"**/conversations/{c.pk}/?at=27#p27")
    page.wait_for_function("() => document.activeElement && document.activeElement.id === 'p27'")
    assert errors == []
    context.close()


# ---- 4. full vs active by row -------------------------------------------------------------


def test_full_and_active_align_by_row_and_folded_rows_are_marked(live_server, logged_in_page):
    c = store.create_conversation(title="Aligned")
    for i in range(60):
        text = f"row {i} " + ("long line of text " * (30 if i % 7 == 0 else 1))
        store.append_message(conversation_id=c.pk, message={"kind": "note", "text": text})
    store.checkpoint_at(conversation_id=c.pk, position=20, summary="The first twenty rows, folded.")
    plain = store.create_conversation(title="Never folded")
    store.append_message(conversation_id=plain.pk, message={"kind": "note", "text": "only row"})
    context, page, errors = _open(logged_in_page)
    page.goto(f"{live_server.url}/conversations/{c.pk}/?at=40#p40")
    page.wait_for_function("() => document.activeElement && document.activeElement.id === 'p40'")
    page.evaluate("window.memoryuiAlign()")
    for position in (40, 45, 50, 55):
        left, right = page.locator(f"#p{position}").bounding_box(), page.locator(f"#a{position}").bounding_box()
        assert abs(left["y"] - right["y"]) <= 2, (position, left, right)
    # Scrolled to the top: the rows both panes show are level there too.
    page.goto(f"{live_server.url}/conversations/{c.pk}/")
    # Scrolled down to the first row both panes show: level there too (rows off screen are laid
    # out at an estimated height until seen, so the panes are levelled where the reader is).
    page.evaluate("document.getElementById('p21').scrollIntoView()")
    _settle(page)
    page.evaluate("window.memoryuiAlign()")
    for position in (21, 22, 28):
        left, right = page.locator(f"#p{position}").bounding_box(), page.locator(f"#a{position}").bounding_box()
        assert abs(left["y"] - right["y"]) <= 2, (position, left, right)
    # Rows the model no longer sees are marked in the full record, and only those.
    assert "is-folded" in page.locator("#p20").get_attribute("class")
    assert page.locator("#p3 .badge.folded").text_content() == "not seen by the model"
    assert "is-folded" not in page.locator("#p21").get_attribute("class")
    # Without a checkpoint the active view says it equals the record instead of repeating it.
    page.goto(f"{live_server.url}/conversations/{plain.pk}/")
    assert "equals the full record" in page.locator("#active-pane").inner_text()
    assert page.locator("#active-pane article.msg").count() == 0
    assert errors == []
    context.close()


# ---- 5. getting around --------------------------------------------------------------------


def test_latest_and_first_reach_either_end_of_a_long_session(live_server, logged_in_page):
    c = store.create_conversation(title="Long")
    for start in (0, 600):
        store.append_messages(conversation_id=c.pk,
                              messages=[{"kind": "note", "text": f"row {i}"} for i in range(start, start + 600)])
    context, page, errors = _open(logged_in_page)
    page.goto(f"{live_server.url}/conversations/{c.pk}/")
    page.get_by_role("link", name="↓ Latest").click()
    page.wait_for_url(f"**/conversations/{c.pk}/?at=1199#p1199")
    row = page.locator("#p1199")
    assert row.is_visible() and "is-here" in row.get_attribute("class")
    assert below_the_bar(page, "#p1199")
    page.get_by_role("link", name="↑ First").click()
    page.wait_for_function("() => !!document.getElementById('p0')")
    assert page.locator("#p0").is_visible() or page.evaluate("window.scrollY") == 0
    assert errors == []
    context.close()


# ---- 6. live follow you can see ----------------------------------------------------------


def test_live_follow_shows_its_state_pins_the_end_and_brings_checkpoints_and_the_ledger(live_server, logged_in_page):
    from playwright.sync_api import expect

    from conversations.ledger import store as ledger

    c = store.create_conversation(title="Watched")
    store.append_messages(conversation_id=c.pk, messages=[{"kind": "note", "text": f"row {i} " + "words " * 40}
                                                          for i in range(40)])
    context, page, errors = _open(logged_in_page)
    page.clock.install()  # the page's timers run in real time, and the test can move them on at once
    page.goto(f"{live_server.url}/conversations/{c.pk}/")
    live = page.locator("button[data-live]")
    expect(live).to_have_attribute("aria-pressed", "true")
    expect(live).to_contain_text("Live")
    states = []
    page.on("response", lambda r: states.append(r.status) if r.url.endswith("/state") else None)
    # Nothing changes: the polls are answered 304, empty.
    wait_for_polls(page, 3)  # the assertion is on what they answered
    assert states and set(states[1:]) <= {304}, states

    # The reader at the end stays at the end as rows arrive.
    page.get_by_role("link", name="↓ Latest").click()
    page.wait_for_url("**?at=39#p39")
    page.evaluate("window.__sameDocument = true")
    page.evaluate("window.scrollTo(0, document.scrollingElement.scrollHeight)")
    store.append_message(conversation_id=c.pk, message={"kind": "note", "text": "arrived at the end"})
    page.wait_for_selector("#p40")
    page.wait_for_function("() => { const r = document.getElementById('p40').getBoundingClientRect();"
                           " return r.bottom <= window.innerHeight && r.top >= 0; }")
    assert page.locator("button.new-rows").is_hidden()

    # A reader in the middle is told, and the button goes to the newest row.
    page.evaluate("window.scrollTo(0, 0)")
    for i in range(3):
        store.append_message(conversation_id=c.pk, message={"kind": "note", "text": f"while reading {i}"})
    marker = page.locator("button.new-rows")
    expect(marker).to_have_text("3 new rows ↓")
    marker.click()
    page.wait_for_function("() => document.activeElement && document.activeElement.id === 'p43'")

    # A checkpoint made through the store (as the API makes it) reaches the open page:
    # the fold, the rows the model no longer sees, the active view and the header.
    store.checkpoint_at(conversation_id=c.pk, position=41, summary="Everything up to the end, summed up.")
    page.wait_for_selector("#active-pane #ahandoff")
    expect(page.locator("#p41 .badge.folded")).to_have_count(1)
    expect(page.locator("#live-facts")).to_contain_text("after #41")
    assert page.locator("#active-equals").count() == 0
    # The ledger panel follows too.
    ledger.set_state(conversation_id=c.pk, state={"ticket": "T-1", "step": "refunded"}, expected_version=0)
    expect(page.locator("#ledger-slot #task-state")).to_contain_text("refunded")

    # Off: nothing more is fetched, and the button says so.
    live.click()
    expect(live).to_have_attribute("aria-pressed", "false")
    expect(live).to_contain_text("Paused")
    count = len(states)
    count_polls(page)
    store.append_message(conversation_id=c.pk, message={"kind": "note", "text": "while paused"})
    page.clock.run_for(2200)  # two poll intervals on the page's clock: none may be sent
    assert polls_sent(page) == 0 and len(states) == count and page.locator("#p44").count() == 0
    live.click()
    page.wait_for_selector("#p44")
    assert page.evaluate("window.__sameDocument") is True and errors == []
    context.close()


# ---- 7. phones: the conversation page --------------------------------------------------------


def test_on_a_phone_the_ledger_fits_and_the_messages_start_on_the_first_screen(live_server, logged_in_page):
    from playwright.sync_api import expect

    from conversations.ledger import store as ledger

    c = store.create_conversation(title="Order SU-88421: overcharged by the VAT rounding bug, a long title")
    for i in range(30):
        store.append_message(conversation_id=c.pk, message={"kind": "user" if i % 2 == 0 else "assistant",
                                                            "content": f"message {i}"})
    ledger.set_state(conversation_id=c.pk, state={"ticket": "T-40219", "order": "SU-88421",
                                                  "note": "a-very-long-unbroken-value-" * 6}, expected_version=0)
    for n in range(3):
        ledger.record_action(conversation_id=c.pk, idempotency_key=f"refund:T-40219:SU-88421:oak-shelf:{n}",
                             name="issue_refund", arguments={"amount_cents": 11800}, result={"refund_id": f"RF-{n}"})
    context, page, errors = _open(logged_in_page, PHONE)
    page.goto(f"{live_server.url}/conversations/{c.pk}/")
    # The first message begins on the first screen.
    first = page.locator("#p0").bounding_box()
    assert first["y"] < PHONE["height"], first
    # The ledger, opened: its heading shows, and nothing scrolls sideways.
    unfold(page, "#conv-panels")
    expect(page.locator("#ledger-title")).to_be_visible()
    assert page.evaluate("document.scrollingElement.scrollWidth <= window.innerWidth")
    for box in page.locator(".ledger-box").evaluate_all("els => els.map(e => e.getBoundingClientRect().right)"):
        assert box <= PHONE["width"] + 0.5
    page.evaluate("""() => window.scrollBy(0, document.getElementById('ledger-slot').getBoundingClientRect().top
        - document.querySelector('header.topbar').getBoundingClientRect().height - 60)""")
    _settle(page)
    _shot(page, "phone-ledger.png")
    # Tap targets: the permalink, the kind checkboxes, the row menu, First/Latest/Live.
    unfold(page, "#row-filters")
    for selector in ("#p2 a.pos", ".kind-check", "#p2 details.row-menu > summary", ".page-nav .button",
                     "button[data-live]"):
        box = page.locator(selector).first.bounding_box()
        assert box["height"] >= 44 and box["width"] >= 44, (selector, box)
    # A jump target clears the sticky top bar.
    page.goto(f"{live_server.url}/conversations/{c.pk}/?at=20#p20")
    page.wait_for_function("() => document.activeElement && document.activeElement.id === 'p20'")
    assert below_the_bar(page, "#p20")
    assert errors == []
    context.close()
