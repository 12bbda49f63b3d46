"""The review queue in a real Chromium: log in, approve, reject, edit-and-approve,
and the queue moves without a page load."""

import pytest

from conversations import store
from conversations.facts import store as facts
from conversations.facts.models import Fact, FactEvent
from conversations.roles import REVIEWER

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_it_reviews_the_queue_without_reloading(live_server, logged_in_page):
    c = store.create_conversation(title="Order 7", subject="cust:7")
    for text in ("hello", "I always take a replacement, never a refund", "thanks"):
        store.append_message(conversation_id=c.pk, message={"kind": "user", "content": text})
    good = facts.propose_fact(subject="cust:7", text="Prefers replacements over refunds", importance=7,
                              category="preference", created_by="key:agent", source_conversation_id=c.pk,
                              source_position=1)
    bad = facts.propose_fact(subject="cust:7", text="Is angry", importance=3, created_by="key:agent")
    typo = facts.propose_fact(subject="cust:7", text="Lives in Leds", importance=4, created_by="key:agent")
    keyed = facts.propose_fact(subject="cust:7", text="Orders on Mondays", importance=2, created_by="key:agent")

    page = logged_in_page(REVIEWER, "/facts/", username="rita")
    assert page.locator("#queue-count").inner_text() == "4"
    assert "never a refund" in page.locator(f"#fact-{good.pk} .source-context").inner_text()
    page.evaluate("window.__sameDocument = true")

    page.click(f"#fact-{good.pk} button.approve")
    page.locator(f"#fact-{good.pk}").wait_for(state="detached")
    assert page.locator("#queue-count").inner_text() == "3"

    page.fill(f"#fact-{bad.pk} input[name=reason]", "opinion, not a fact")
    page.press(f"#fact-{bad.pk} input[name=reason]", "Enter")
    page.locator(f"#fact-{bad.pk}").wait_for(state="detached")

    page.click(f"#fact-{typo.pk} .edit-approve summary")
    # A blank text passes the browser's `required` but not the store: the item
    # comes back in place with the error, nothing is written.
    page.fill(f"#fact-{typo.pk} textarea[name=text]", "   ")
    page.click(f"#fact-{typo.pk} .edit-approve button")
    page.locator(f"#fact-{typo.pk} [role=alert]").wait_for()
    assert "text must not be blank" in page.locator(f"#fact-{typo.pk} [role=alert]").inner_text()
    assert Fact.objects.count() == 4
    page.fill(f"#fact-{typo.pk} textarea[name=text]", "Lives in Leeds")
    page.click(f"#fact-{typo.pk} .edit-approve button")
    page.locator(f"#fact-{typo.pk}").wait_for(state="detached")

    # Keyboard: j focuses the (only) remaining item, a approves it.
    page.locator("h1").click()
    page.keyboard.press("j")
    page.keyboard.press("a")
    page.locator(f"#fact-{keyed.pk}").wait_for(state="detached")
    assert Fact.objects.get(pk=keyed.pk).status == "approved"

    assert page.locator("#queue-count").inner_text() == "0"
    assert "Approved fact" in page.locator("#queue-status").inner_text()
    assert page.evaluate("window.__sameDocument") is True  # no page load happened

    assert Fact.objects.get(pk=good.pk).status == "approved"
    assert FactEvent.objects.get(fact=bad, kind="rejected").reason == "opinion, not a fact"
    edited = Fact.objects.get(pk=typo.pk).superseded_by
    assert (edited.text, edited.status) == ("Lives in Leeds", "approved")

    page.goto(live_server.url + "/facts/")
    assert page.locator(".queue-item").count() == 0
