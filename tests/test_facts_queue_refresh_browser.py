"""The review queue keeps up with the reviewer, in Chromium: after a decision
the next proposals' "Approved about…" lists and duplicate checks say what is approved
now, without a reload; the focus moves on; Esc leaves a field; j/k always work."""

import pytest

from conversations.facts import store as facts
from tests.test_facts_queue_browser import _focused_id, _open

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _wait_focus(page, element_id):
    page.wait_for_function(f"() => document.activeElement && document.activeElement.id === '{element_id}'")


@pytest.mark.parametrize("viewport", ["wide", "phone"])
def test_a_decision_refreshes_the_next_proposals_and_the_keys_keep_working(logged_in_page, viewport):
    known = facts.propose_fact(subject="cust:7", text="Lives in Leeds", importance=6, created_by="key:agent")
    facts.approve_fact(fact_id=known.pk, actor="user:rev")
    first = facts.propose_fact(subject="cust:7", text="Prefers email to phone", importance=4, created_by="key:agent")
    again = facts.propose_fact(subject="cust:7", text="Prefers email to phone", importance=4, created_by="key:agent")
    other = facts.propose_fact(subject="cust:8", text="Has two dogs", importance=4, created_by="key:agent")
    last = facts.propose_fact(subject="cust:7", text="Pays by card", importance=4, created_by="key:agent")
    page = _open(logged_in_page, viewport)
    page.evaluate("window.__sameDocument = true")
    item = page.locator(f"#fact-{again.pk}")
    assert item.locator(".duplicate-flag").count() == 0
    assert item.locator("h3").inner_text().startswith("Approved about cust:7 (1 current")

    # a on the first proposal: it is approved, the focus moves to the next one, and that one
    # now lists it and is flagged as its duplicate, as a reload would show.
    page.locator("h1").click()
    page.keyboard.press("j")
    assert _focused_id(page) == f"fact-{first.pk}"
    page.keyboard.press("a")
    page.locator(f"#fact-{first.pk}").wait_for(state="detached")
    _wait_focus(page, f"fact-{again.pk}")
    item.locator(".duplicate-flag").wait_for()
    assert item.locator(".duplicate-flag").inner_text().startswith("Likely duplicate of")
    assert item.locator(f".known.is-duplicate[data-fact='{first.pk}']").is_visible()
    assert item.locator("h3").inner_text().startswith("Approved about cust:7 (2 current")
    later = page.locator(f"#fact-{last.pk}")
    assert later.locator(f".known[data-fact='{first.pk}']").count() == 1
    # Another subject's proposal is left as it was.
    assert page.locator(f"#fact-{other.pk} .known[data-fact='{first.pk}']").count() == 0

    # r puts the focus in the reason field; Esc leaves it for the proposal, and j/k work again.
    page.keyboard.press("r")
    assert page.evaluate("document.activeElement.name") == "reason"
    page.keyboard.type("dup")
    page.keyboard.press("Escape")
    _wait_focus(page, f"fact-{again.pk}")
    page.keyboard.press("j")
    assert _focused_id(page) == f"fact-{other.pk}"
    page.keyboard.press("k")
    assert _focused_id(page) == f"fact-{again.pk}"

    # e opens the edit form; Esc leaves the text box too.
    page.keyboard.press("e")
    assert page.evaluate("document.activeElement.name") == "text"
    page.keyboard.press("Escape")
    _wait_focus(page, f"fact-{again.pk}")

    # The reject goes through from its field; the focus moves on to the next proposal, and
    # after a click beside the queue j/k go on from there, not from the top.
    page.keyboard.press("r")
    page.keyboard.press("Enter")  # the reason typed before Esc is still there
    page.locator(f"#fact-{again.pk}").wait_for(state="detached")
    _wait_focus(page, f"fact-{other.pk}")
    page.locator("p.hint").click()
    assert _focused_id(page) != f"fact-{other.pk}"
    page.keyboard.press("j")
    assert _focused_id(page) == f"fact-{last.pk}"
    page.keyboard.press("k")
    assert _focused_id(page) == f"fact-{other.pk}"
    assert facts.Fact.objects.get(pk=again.pk).status == "rejected"
    assert page.evaluate("window.__sameDocument") is True
