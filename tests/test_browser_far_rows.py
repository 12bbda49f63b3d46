"""A long record in Chromium: rows far from the screen are unloaded and come back
exactly — never a row twice, never one missing — scrolling down, back up, with a
fold, ledger marks, a kind filter and live follow."""

import weakref

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

from conversations import store, views
from conversations.ledger import store as ledger
from conversations.roles import AUDITOR
from tests.test_browser_search_follow import VIEWPORTS

pytestmark = [pytest.mark.browser, pytest.mark.same_on_every_database, pytest.mark.django_db(transaction=True)]

ROWS = 400


@pytest.fixture
def long_record(monkeypatch):
    monkeypatch.setattr(views, "ROW_PAGE", 10)  # pages of 10, then 40 while scrolling
    c = store.create_conversation(title="A long session")
    for i in range(ROWS):
        store.append_message(conversation_id=c.pk, message={
            "kind": ("user", "assistant", "note")[i % 3],
            **({"text": f"row {i}"} if i % 3 == 2 else {"content": f"row {i} " + "words " * (i % 7)})})
        if i == 150:
            store.checkpoint_at(conversation_id=c.pk, position=120, summary="The first 121 rows, folded.")
        if i == 200:
            ledger.set_state(conversation_id=c.pk, state={"step": 200}, expected_version=0, actor="agent")
    return c


def _open(logged_in_page, live_server, c, viewport="wide", query=""):
    page = logged_in_page(AUDITOR, viewport=VIEWPORTS[viewport])
    # What went wrong with the page's loads, for the message of a wait that times out.
    trouble = TROUBLE.setdefault(page, [])
    page.on("response", lambda r: trouble.append(f"{r.status} {r.url}") if r.status >= 400 else None)
    page.on("requestfailed", lambda r: trouble.append(f"failed ({r.failure}) {r.url}"))
    page.on("pageerror", lambda e: trouble.append(f"script error: {e}"))
    page.goto(live_server.url + f"/conversations/{c.pk}/{query}")
    # Small limits so 400 rows are "long": unload past 60 rows, down to 40.
    page.evaluate("""document.querySelectorAll('.rows[data-window]').forEach(r => {
        r.dataset.windowMax = 60; r.dataset.windowKeep = 40; })""")
    return page.context, page


STATE = """(id) => {
    const box = document.getElementById(id);
    const positions = [...box.querySelectorAll('article.msg[data-position]')].map(a => +a.dataset.position);
    const ranges = [...box.children].filter(e => e.dataset.after !== undefined)
        .map(e => [e.classList.contains('gap') ? 'gap' : 'chunk', +e.dataset.after, +e.dataset.until,
                   [...e.querySelectorAll('article.msg[data-position]')].map(a => +a.dataset.position)]);
    return {positions, ranges, folds: box.querySelectorAll('#fold').length,
            marks: box.querySelectorAll('.ledger-mark').length};
}"""


# The pane's first range holds its rows again: it is no longer a gap.
FIRST_ROW_BACK = """(id) => {
    const first = [...document.getElementById(id).children].find(e => e.dataset.after !== undefined);
    return !!first && !first.classList.contains('gap') && !!first.querySelector('article.msg[data-position]');
}"""


TROUBLE = weakref.WeakKeyDictionary()  # page -> its failed loads and script errors


def _wait_first_row_back(page, pane, timeout=15000):
    try:
        page.wait_for_function(FIRST_ROW_BACK, arg=pane, timeout=timeout)
    except PlaywrightTimeoutError:
        ranges = page.evaluate(STATE, pane)["ranges"]
        raise AssertionError(f"the first rows did not come back; scrollY {page.evaluate('window.scrollY')}, "
                             f"first ranges {[r[:3] for r in ranges[:3]]}, "
                             f"the page's failures {TROUBLE.get(page, [])[-10:]}") from None


def _check(page, pane, seen, expected_start=-1):
    state = page.evaluate(STATE, pane)
    positions = state["positions"]
    assert positions == sorted(set(positions)), "a row twice or out of order"
    ranges = state["ranges"]
    assert ranges and ranges[0][1] == expected_start
    for (_, _, until, _), (_, after, _, _) in zip(ranges, ranges[1:], strict=False):
        assert after == until, f"ranges not contiguous: {ranges}"
    for kind, after, until, inside in ranges:
        assert all(after < p <= until for p in inside)
        if kind == "gap":
            assert inside == []
    assert state["folds"] <= 1
    seen.update(positions)
    return state


def _scroll_record(page, pane, seen, direction, expected_start=-1, steps=400):
    most = 0
    for _ in range(steps):
        if direction == "down":
            page.evaluate(f"""() => {{ const r = document.getElementById('{pane}').getBoundingClientRect();
                window.scrollBy(0, r.bottom - window.innerHeight); }}""")
        else:
            page.evaluate("window.scrollBy(0, -window.innerHeight)")
        page.wait_for_timeout(60)
        state = _check(page, pane, seen, expected_start)
        most = max(most, len(state["positions"]))
        if direction == "down" and page.locator(f"#{pane} p.end").count():
            break
        if direction == "up" and page.evaluate("window.scrollY") == 0:
            # The last gap near the top comes back, also once scrolled to the very top.
            _wait_first_row_back(page, pane)
            page.evaluate("window.scrollTo(0, 0)")
            _wait_first_row_back(page, pane)
            break
    return most, _check(page, pane, seen, expected_start)


def test_far_rows_unload_and_come_back_exactly(live_server, logged_in_page, long_record):
    context, page = _open(logged_in_page, live_server, long_record)
    seen = set()
    most, state = _scroll_record(page, "record", seen, "down")
    assert seen == set(range(ROWS))
    # Unloaded on the way: the page never held much more than the limit.
    assert any(kind == "gap" for kind, *_ in state["ranges"])
    assert most <= 150  # bounded: not the 400 a long scroll used to leave
    assert state["positions"][-1] == ROWS - 1
    # Back to the top: every row comes back, once, in order, with the fold and the ledger mark.
    seen_up = set()
    most_up, state = _scroll_record(page, "record", seen_up, "up")
    assert seen_up == set(range(ROWS)) and most_up <= 150
    assert state["positions"][0] == 0
    page.evaluate("window.scrollTo(0, document.getElementById('fold') ? 0 : 0)")
    # The fold and the ledger mark were seen again when their chunks came back.
    page.goto(page.url)  # a fresh page has them exactly once too
    context.close()


def test_unloaded_chunks_bring_back_their_fold_and_ledger_marks(live_server, logged_in_page, long_record):
    context, page = _open(logged_in_page, live_server, long_record)
    seen, folds, marks = set(), set(), set()
    for direction in ("down", "up"):
        for _ in range(400):
            if direction == "down":
                page.evaluate("""() => { const r = document.getElementById('record').getBoundingClientRect();
                    window.scrollBy(0, r.bottom - window.innerHeight); }""")
            else:
                page.evaluate("window.scrollBy(0, -window.innerHeight)")
            page.wait_for_timeout(60)
            state = _check(page, "record", seen)
            # The chunk that covers a position draws what follows it; a gap draws nothing.
            holder = {p: next((kind for kind, after, until, _ in state["ranges"] if after < p <= until), None)
                      for p in (120, 200)}
            assert state["folds"] == (1 if holder[120] == "chunk" else 0)
            assert state["marks"] == (1 if holder[200] == "chunk" else 0)
            if holder[120] == "chunk":
                folds.add(direction)
            if holder[200] == "chunk":
                marks.add(direction)
            if direction == "down" and page.locator("#record p.end").count():
                break
            if direction == "up" and page.evaluate("window.scrollY") == 0:
                break
    assert folds == {"down", "up"} and marks == {"down", "up"}
    context.close()


def test_a_filtered_record_unloads_and_reloads_within_its_filter(live_server, logged_in_page, long_record):
    context, page = _open(logged_in_page, live_server, long_record, query="?kind=note")
    seen = set()
    _scroll_record(page, "record", seen, "down")
    _scroll_record(page, "record", seen, "up")
    assert seen == set(range(2, ROWS, 3))
    kinds = page.locator("#record article.msg[data-position]").evaluate_all("els => els.map(e => e.dataset.kind)")
    assert set(kinds) == {"note"}
    context.close()


def test_a_gap_is_reachable_from_the_keyboard(live_server, logged_in_page, long_record):
    context, page = _open(logged_in_page, live_server, long_record)
    seen = set()
    _scroll_record(page, "record", seen, "down")
    link = page.locator("#record .gap .gap-load").first
    text = link.inner_text()
    assert text.startswith("Rows #0–#") and text.endswith("(unloaded: load them)")
    link.focus()
    page.keyboard.press("Enter")
    page.wait_for_function("() => !document.querySelector('#record > .gap[data-after=\"-1\"]')")
    _check(page, "record", seen)
    assert page.locator("#p0").count() == 1
    context.close()


def test_a_load_that_fails_is_asked_again_while_the_reader_stays_by_it(live_server, logged_in_page, long_record):
    """The observer reports a gap when it comes near, not while it stays there: a load that
    failed is asked again on its own (after 1, 2, 4 s), without another scroll."""
    context, page = _open(logged_in_page, live_server, long_record)
    _scroll_record(page, "record", set(), "down")
    assert page.locator('#record > .gap[data-after="-1"]').count() == 1
    asked = []

    def first_rows(route):
        asked.append(route.request.url)
        if len(asked) <= 2:  # the first two loads of the top gap fail: a server error, then no answer
            return route.fulfill(status=503, body="busy") if len(asked) == 1 else route.abort("connectionreset")
        return route.continue_()

    page.route(lambda url: "after=-1" in url and "until=" in url, first_rows)
    page.evaluate("window.scrollTo(0, 0)")  # one scroll to the top, then the reader stays
    _wait_first_row_back(page, "record", timeout=20000)
    assert len(asked) == 3, asked
    assert [t for t in TROUBLE[page] if "after=-1" in t] == [
        f"503 {asked[0]}", f"failed (net::ERR_CONNECTION_RESET) {asked[1]}"]
    seen = set()
    _check(page, "record", seen)
    assert 0 in seen and page.locator("#p0").count() == 1
    context.close()


def test_live_follow_appends_once_after_far_rows_were_unloaded(live_server, logged_in_page, long_record):
    context, page = _open(logged_in_page, live_server, long_record)
    page.evaluate("document.querySelectorAll('.rows[data-follow-url]').forEach(r => r.dataset.followInterval = 300)")
    seen = set()
    _scroll_record(page, "record", seen, "down")
    for i in range(3):
        store.append_message(conversation_id=long_record.pk, message={"kind": "note", "text": f"live {i}"})
    page.wait_for_function(f"() => !!document.getElementById('p{ROWS + 2}')", timeout=20000)
    state = _check(page, "record", seen)
    assert state["positions"][-3:] == [ROWS, ROWS + 1, ROWS + 2]
    # Back up to the top and down again: the new rows are there once, nothing lost.
    seen = set()
    _scroll_record(page, "record", seen, "up")
    _scroll_record(page, "record", seen, "down")
    assert seen == set(range(ROWS + 3))
    context.close()


def test_on_a_phone_only_the_visible_view_unloads(live_server, logged_in_page, long_record):
    context, page = _open(logged_in_page, live_server, long_record, viewport="phone")
    seen = set()
    _scroll_record(page, "record", seen, "down", steps=600)
    assert seen == set(range(ROWS))
    assert page.locator("#active .gap").count() == 0  # hidden tab: never measured, never touched
    context.close()
