"""The review queue in Chromium: focus goes on to the next proposal, the status line
stays in sight with its undo, Ctrl+Enter submits an edit, known facts and likely
duplicates beside each proposal; from the keyboard and without JavaScript."""

import pytest

from conversations.facts import store as facts
from conversations.facts.models import Fact, FactEvent
from conversations.models import AuditEvent
from conversations.roles import REVIEWER

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

VIEWPORTS = {"wide": {"width": 1440, "height": 900}, "phone": {"width": 390, "height": 844}}


def _queue(n=5):
    known = facts.propose_fact(subject="cust:7", text="Lives in Leeds", importance=6, created_by="key:agent")
    facts.approve_fact(fact_id=known.pk, actor="user:rev")
    texts = ["Orders on Mondays", "Lives in Leeds, UK", "Is angry", "Prefers email", "Pays by card",
             "Has two dogs"][:n]
    return known, [facts.propose_fact(subject="cust:7", text=t, importance=4, created_by="key:agent") for t in texts]


def _open(logged_in_page, viewport="wide", js=True):
    """The review queue, as a signed-in reviewer."""
    return logged_in_page(REVIEWER, "/facts/", viewport=VIEWPORTS[viewport], java_script_enabled=js)


def _focused_id(page):
    return page.evaluate("document.activeElement && document.activeElement.id")


def _undo_ready(page):
    """The Undo form arrives in an out-of-band swap; clicked before htmx has processed it,
    it submits as a plain form and the page reloads (the no-JavaScript path)."""
    page.wait_for_function("() => { const f = document.querySelector('#queue-status form');"
                           " return !!(f && f['htmx-internal-data'] && f['htmx-internal-data'].initHash); }")


def _status_in_sight(page, viewport):
    """The status line is inside the window, below the top bar, and nothing covers it."""
    status = page.locator("#queue-status")
    box = status.bounding_box()
    bar = page.locator("header.topbar").bounding_box()
    height = VIEWPORTS[viewport]["height"]
    assert box["y"] >= bar["y"] + bar["height"] and box["y"] + box["height"] <= height
    assert box["x"] >= 0 and box["x"] + box["width"] <= VIEWPORTS[viewport]["width"]
    assert page.evaluate("""() => { const s = document.getElementById('queue-status');
        const r = s.getBoundingClientRect();
        return s.contains(document.elementFromPoint(r.x + r.width / 2, r.y + r.height / 2)); }""")


@pytest.mark.parametrize("viewport", ["wide", "phone"])
def test_from_the_keyboard_focus_goes_on_and_undo_brings_a_proposal_back(logged_in_page, viewport):
    known, (mondays, leeds, angry, email, card) = _queue()
    page = _open(logged_in_page, viewport)
    page.evaluate("window.__sameDocument = true")
    # Beside each proposal: what is approved already, and the likely duplicate flagged.
    item = page.locator(f"#fact-{leeds.pk}")
    assert item.locator(".duplicate-flag").inner_text().startswith("Likely duplicate of")
    assert item.locator(f".known.is-duplicate[data-fact='{known.pk}']").is_visible()
    assert page.locator(f"#fact-{mondays.pk} .duplicate-flag").count() == 0
    assert page.locator(f"#fact-{mondays.pk} .known[data-fact='{known.pk}']").is_visible()

    # j j j: the third proposal; a approves it and the focus goes to the fourth, not the first.
    page.locator("h1").click()
    for _ in range(3):
        page.keyboard.press("j")
    assert _focused_id(page) == f"fact-{angry.pk}"
    page.keyboard.press("a")
    page.locator(f"#fact-{angry.pk}").wait_for(state="detached")
    page.wait_for_function(f"() => document.activeElement.id === 'fact-{email.pk}'")
    assert page.locator("#queue-count").inner_text() == "4"
    assert page.locator("#queue-status .note").inner_text() == f"Approved fact {angry.pk}."
    # Scrolled down to the end of the queue, the status is still in sight.
    page.evaluate("window.scrollTo(0, document.scrollingElement.scrollHeight)")
    _status_in_sight(page, viewport)

    # u undoes it: back in its place, focused, and the store has an undo event.
    page.keyboard.press("u")
    page.wait_for_function(f"() => document.activeElement && document.activeElement.id === 'fact-{angry.pk}'")
    order = page.locator("#queue-items .queue-item").evaluate_all("els => els.map(e => +e.dataset.fact)")
    assert order == [mondays.pk, leeds.pk, angry.pk, email.pk, card.pk]
    assert page.locator("#queue-status .note").inner_text() == \
        f"Review of fact {angry.pk} undone: it is back in the queue."
    assert page.locator("#queue-status button").count() == 0
    assert page.locator("#queue-count").inner_text() == "5"
    assert Fact.objects.get(pk=angry.pk).status == "proposed"
    assert FactEvent.objects.filter(fact=angry).latest("id").detail["undone"] == "approved"
    assert AuditEvent.objects.filter(action="fact.review_undone", target_id=str(angry.pk)).exists()

    # r: reject with a reason (Enter); the focus goes to the next proposal.
    page.keyboard.press("r")
    page.keyboard.type("opinion, not a fact")
    page.keyboard.press("Enter")
    page.locator(f"#fact-{angry.pk}").wait_for(state="detached")
    page.wait_for_function(f"() => document.activeElement.id === 'fact-{email.pk}'")
    _status_in_sight(page, viewport)

    # e: edit, and Ctrl+Enter submits the edit form.
    page.keyboard.press("e")
    page.keyboard.press("Control+a")
    page.keyboard.type("Prefers email to phone calls")
    page.keyboard.press("Control+Enter")
    page.locator(f"#fact-{email.pk}").wait_for(state="detached")
    page.wait_for_function(f"() => document.activeElement.id === 'fact-{card.pk}'")
    edited = Fact.objects.get(pk=email.pk).superseded_by
    assert (edited.text, edited.status) == ("Prefers email to phone calls", "approved")
    assert page.locator("#queue-status .note").inner_text() == \
        f"Approved fact {edited.pk} as an edit of proposal {email.pk}."

    # Clicking Undo (not the key) takes back the edit: the new fact is withdrawn.
    _undo_ready(page)
    page.locator("#queue-status").get_by_role("button", name="Undo").click()
    page.wait_for_function(f"() => document.activeElement && document.activeElement.id === 'fact-{email.pk}'")
    assert Fact.objects.get(pk=edited.pk).status == "rejected"
    assert page.evaluate("window.__sameDocument") is True
    if viewport == "phone":
        assert page.evaluate("document.scrollingElement.scrollWidth <= window.innerWidth")


def test_a_refused_edit_keeps_the_focus_on_its_field(logged_in_page):
    _, (mondays, leeds) = _queue(2)
    page = _open(logged_in_page)
    page.click(f"#fact-{mondays.pk} .edit-approve summary")
    page.fill(f"#fact-{mondays.pk} textarea[name=text]", "   ")
    page.press(f"#fact-{mondays.pk} textarea[name=text]", "Control+Enter")
    page.locator(f"#fact-{mondays.pk} [role=alert]").wait_for()
    field = f"#fact-{mondays.pk} textarea[name=text]"
    page.wait_for_function(f"() => document.activeElement === document.querySelector('{field}')")
    assert Fact.objects.get(pk=mondays.pk).status == "proposed"


def test_without_javascript_the_next_proposal_is_focused_and_undo_works(logged_in_page):
    _, (mondays, leeds, angry) = _queue(3)
    page = _open(logged_in_page, js=False)
    page.locator(f"#fact-{leeds.pk} button.approve").first.click()
    page.wait_for_url(f"**/facts/?reviewed={leeds.pk}#fact-{angry.pk}")
    assert page.locator("#queue-status .note").inner_text() == f"Approved fact {leeds.pk}."
    assert _focused_id(page) == f"fact-{angry.pk}"
    _status_in_sight(page, "wide")
    page.locator("#queue-status").get_by_role("button", name="Undo").click()
    page.wait_for_url(f"**/facts/?reviewed={leeds.pk}#fact-{leeds.pk}")
    assert _focused_id(page) == f"fact-{leeds.pk}"
    assert "back in the queue" in page.locator("#queue-status").inner_text()
    assert Fact.objects.get(pk=leeds.pk).status == "proposed"
    # Ctrl+Enter is an enhancement; without JavaScript the edit form's button submits.
    page.click(f"#fact-{mondays.pk} .edit-approve summary")
    page.fill(f"#fact-{mondays.pk} textarea[name=text]", "Orders on Mondays and Fridays")
    page.click(f"#fact-{mondays.pk} .edit-approve button")
    page.wait_for_url(f"**/facts/?reviewed={mondays.pk}#fact-{leeds.pk}")
    assert Fact.objects.get(pk=mondays.pk).superseded_by.text == "Orders on Mondays and Fridays"


def test_typing_straight_after_an_undo_keeps_the_focus_where_the_reviewer_types(logged_in_page):
    """The proposal an undo brings back asks for the focus once; htmx settles the swap a
    moment later and must not pull the focus back from the field the reviewer went on to.
    The settle delay is stretched so that moment is certain to come after the key press."""
    _known, (_mondays, _leeds, angry, email, _card) = _queue()
    page = _open(logged_in_page)
    page.evaluate("htmx.config.defaultSettleDelay = 400")
    page.locator(f"#fact-{angry.pk}").focus()
    page.keyboard.press("a")
    page.locator(f"#fact-{angry.pk}").wait_for(state="detached")
    page.wait_for_function(f"() => document.activeElement.id === 'fact-{email.pk}'")
    _undo_ready(page)
    page.keyboard.press("u")
    page.wait_for_function(f"() => document.activeElement && document.activeElement.id === 'fact-{angry.pk}'")
    # By the time the proposal has the focus, htmx has made its forms its own: a reason sent
    # now goes through htmx, not as a plain form that reloads the page.
    assert page.evaluate(f"""() => {{ const f = document.querySelector('#fact-{angry.pk} form.reject-form');
        return !!(f['htmx-internal-data'] && f['htmx-internal-data'].initHash); }}""")
    page.keyboard.press("r")
    page.keyboard.type("opinion")
    page.wait_for_timeout(800)
    reason = f"#fact-{angry.pk} input[data-key=r]"
    assert page.evaluate(f"document.activeElement === document.querySelector('{reason}')")
    assert page.locator(reason).input_value() == "opinion"
