"""Admin pages in Chromium at a desktop and a phone: pruning asks to confirm the
preview's counts before it runs, and the audit log links what each event acted on
and reads on a 390 px screen without scrolling sideways."""

import pytest

from conversations import api_keys, store
from conversations.facts import store as facts
from conversations.models import Conversation
from conversations.retention import erasure
from conversations.roles import ADMIN
from tests.helpers import watch_refused_submit
from tests.retention_support import conversation

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

VIEWPORTS = {"wide": {"width": 1440, "height": 900}, "phone": {"width": 390, "height": 844}}


def _admin_page(logged_in_page, viewport):
    page = logged_in_page(ADMIN, "/admin/", username="root", viewport=VIEWPORTS[viewport])
    return page.context, page


def _no_sideways_scroll(page):
    assert page.evaluate("document.scrollingElement.scrollWidth <= window.innerWidth"), \
        page.evaluate("document.scrollingElement.scrollWidth")


@pytest.mark.parametrize("viewport", ["wide", "phone"])
def test_prune_asks_to_confirm_the_preview_counts(live_server, logged_in_page, viewport):
    old = [conversation(title=f"Stale {i}", messages=3, age_days=120) for i in range(2)]
    context, page = _admin_page(logged_in_page, viewport)
    page.goto(live_server.url + "/admin/prune/?older_than_days=90")
    box = page.locator("label.confirm-box")
    assert page.locator("#confirm-conversations").inner_text() == "2"
    assert page.locator("#confirm-messages").inner_text() == "6"
    assert page.locator("#confirm-bytes").inner_text() == page.locator(".facts-grid dd").nth(3).inner_text()
    assert "cannot be undone" in box.inner_text()
    _no_sideways_scroll(page)
    button = page.get_by_role("button", name="Prune 2 conversations now")
    refused = watch_refused_submit(page, "label.confirm-box input[type=checkbox]")
    button.click()  # not confirmed: the browser keeps the form, nothing runs
    page.wait_for_function(refused)
    assert Conversation.objects.filter(pk__in=[c.pk for c in old]).count() == 2

    # Another conversation ages in while the admin reads: the run shows the new counts.
    late = conversation(title="Stale late", messages=1, age_days=120)
    box.locator("input[type=checkbox]").check()
    button.click()
    page.wait_for_load_state("load")
    assert page.locator("[role=alert]").inner_text().startswith("The preview changed since you confirmed it")
    assert page.locator("#confirm-conversations").inner_text() == "3"
    assert Conversation.objects.filter(pk__in=[c.pk for c in old] + [late.pk]).count() == 3
    page.locator("label.confirm-box input[type=checkbox]").check()
    page.get_by_role("button", name="Prune 3 conversations now").click()
    page.wait_for_url("**/admin/prune/runs/*/")
    assert page.locator("#result-conversations").inner_text() == "3"
    assert not Conversation.objects.filter(pk__in=[c.pk for c in old] + [late.pk]).exists()
    context.close()


@pytest.mark.parametrize("viewport", ["wide", "phone"])
def test_the_audit_log_links_its_targets_and_reads_on_a_phone(live_server, logged_in_page, viewport):
    kept = store.create_conversation(title="Kept ticket")
    store.append_message(conversation_id=kept.pk, message={"kind": "user", "content": "hello"})
    store.checkpoint_at(conversation_id=kept.pk, position=0, summary="greeting", actor="user:root")
    fact = facts.propose_fact(subject="cust:1", text="likes tea", importance=3, created_by="key:agent")
    facts.approve_fact(fact_id=fact.pk, actor="user:root")
    key, _ = api_keys.create_api_key(name="support-bot-with-a-rather-long-name", scopes=["read", "write"],
                                  created_by="user:root")
    doomed = store.create_conversation(title="Doomed")
    receipt = erasure.delete_one_conversation(conversation_id=doomed.pk, actor="user:root")
    context, page = _admin_page(logged_in_page, viewport)
    page.goto(live_server.url + "/admin/audit/")
    _no_sideways_scroll(page)
    table = page.locator("table.audit")
    assert table.evaluate("t => t.scrollWidth <= t.clientWidth + 1")  # no scrolling inside either
    if viewport == "phone":
        # Each event is a card: its cells stacked, each with its label.
        cell = table.locator("tbody tr").first.locator("td").nth(2)
        assert cell.evaluate("td => getComputedStyle(td, '::before').content") == '"Action"'
        heights = table.locator("tbody tr").first.locator("td").evaluate_all(
            "tds => tds.map(td => td.getBoundingClientRect().x)")
        assert len(set(round(x) for x in heights)) == 1
    for href in (f"/conversations/{kept.pk}/", f"/facts/{fact.pk}/", f"/keys/#key-{key.pk}",
                 f"/admin/receipts/{receipt.pk}/"):
        link = page.locator(f'table.audit a[href="{href}"]').first
        assert link.is_visible(), href
        box = link.bounding_box()
        assert box["x"] >= 0 and box["x"] + box["width"] <= VIEWPORTS[viewport]["width"], href
    # The erased conversation is named, not linked.
    assert page.locator("table.audit").get_by_text(str(doomed.pk)).first.is_visible()
    assert page.locator(f'table.audit a[href="/conversations/{doomed.pk}/"]').count() == 0
    page.locator(f'table.audit a[href="/conversations/{kept.pk}/"]').first.click()
    page.wait_for_url(f"**/conversations/{kept.pk}/")
    page.go_back()
    page.locator(f'table.audit a[href="/facts/{fact.pk}/"]').first.click()
    page.wait_for_url(f"**/facts/subject/{fact.pk}/#fact-{fact.pk}")
    context.close()
