"""Retention in a real Chromium: prune preview → run → result, and a deletion request to its receipt."""

import pytest

from conversations.demo import SUPPORT_SUBJECT, load_demo
from conversations.facts.models import Fact
from conversations.models import Conversation
from conversations.retention.models import DeletionReceipt
from conversations.roles import ADMIN
from tests.helpers import watch_refused_submit
from tests.retention_support import conversation, raw_bytes_of_database

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

def _log_in_as_admin(logged_in_page):
    return logged_in_page(ADMIN, "/admin/", username="root")

# How long a deletion request may take to answer before a test gives up on it.
ERASURE_WAIT_MS = 180_000


def test_an_admin_previews_and_runs_a_prune(live_server, logged_in_page):
    old = [conversation(title=f"Stale ticket {i}", messages=4, age_days=120) for i in range(3)]
    pinned = conversation(title="Pinned forever", messages=2, age_days=500, pinned=True)
    fresh = conversation(title="Fresh ticket", messages=2)
    page = _log_in_as_admin(logged_in_page)

    page.get_by_role("link", name="Prune", exact=True).first.click()
    page.wait_for_url("**/admin/prune/")
    page.fill("input[name=older_than_days]", "90")
    page.get_by_role("button", name="Preview").click()
    page.wait_for_url("**/admin/prune/?older_than_days=90")
    assert page.locator("#preview-conversations").inner_text() == "3"
    preview = page.locator("#prune-preview")
    assert preview.get_by_text("Stale ticket 0").is_visible()
    assert preview.get_by_text("Pinned forever").count() == 0 and preview.get_by_text("Fresh ticket").count() == 0

    # It asks first, with the preview's counts; the button alone does nothing.
    confirm = page.locator("label.confirm-box")
    assert "Delete 3 conversations with 12 messages" in confirm.inner_text()
    assert page.locator("#confirm-bytes").inner_text().strip() != ""
    refused = watch_refused_submit(page, "#prune-form input[name=confirm]")
    page.get_by_role("button", name="Prune 3 conversations now").click()
    page.wait_for_function(refused)  # the browser kept the form: it said the box is required
    assert "/admin/prune/?older_than_days=90" in page.url
    assert page.evaluate("document.querySelector('#prune-form input[name=confirm]').validity.valueMissing")
    assert Conversation.objects.filter(pk__in=[c.pk for c in old]).count() == 3
    confirm.locator("input[type=checkbox]").check()
    page.get_by_role("button", name="Prune 3 conversations now").click()
    page.wait_for_url("**/admin/prune/runs/*/")
    assert page.locator("#run-status").inner_text() == "finished"
    assert page.locator("#result-conversations").inner_text() == "3"
    # The database files are every project's: their size is a superuser's to see, and the page says so.
    assert page.locator("#prune-result").get_by_text("On disk after").count() == 0
    assert page.get_by_text("only a superuser sees it").is_visible()
    assert not Conversation.objects.filter(pk__in=[c.pk for c in old]).exists()
    assert Conversation.objects.filter(pk__in=[pinned.pk, fresh.pk]).count() == 2

    page.get_by_role("link", name="Audit log").click()
    page.wait_for_url("**/admin/audit/")
    assert page.get_by_text("prune.finished").first.is_visible()


def test_an_admin_carries_out_a_deletion_request_to_its_receipt(live_server, logged_in_page):
    about = conversation(title="Refund for Wilhelmina", subject="cust:wilhelmina-9", messages=3,
                         text="Wilhelmina Ashcombe-Vries message {i} about her parcel")
    kept = conversation(title="Someone else", subject="cust:other", messages=1)
    page = _log_in_as_admin(logged_in_page)

    page.get_by_role("link", name="Deletion requests").first.click()
    page.wait_for_url("**/admin/deletion-requests/")
    page.fill("input[name=subject]", "cust:wilhelmina-9")
    page.get_by_role("button", name="Preview").click()
    page.wait_for_url("**/admin/deletion-requests/preview/")
    assert page.locator("#count-conversations").inner_text() == "1"
    assert page.locator("#count-messages").inner_text() == "3"
    assert page.get_by_text("Refund for Wilhelmina").is_visible()
    assert Conversation.objects.filter(pk=about.pk).exists()

    page.check("input[name=confirm]")
    # The request answers once the text is gone from the files: on PostgreSQL that is a table
    # rewrite and WAL switches, which a loaded CI machine stretches well past the page's 15 s.
    page.click("#execute-deletion", timeout=ERASURE_WAIT_MS)
    page.wait_for_url("**/admin/receipts/*/", timeout=ERASURE_WAIT_MS)
    assert page.locator("#verdict").inner_text().startswith("Verified")
    receipt = DeletionReceipt.objects.get()
    assert receipt.verification["found"] is False
    assert "wilhelmina" not in page.locator("main").inner_text().lower()

    with page.expect_download() as download_info:
        page.get_by_role("link", name="Download JSON").click()
    download = download_info.value
    assert download.suggested_filename == f"deletion-receipt-{receipt.pk}.json"
    assert b"wilhelmina" not in open(download.path(), "rb").read().lower()

    page.get_by_role("link", name="Receipts").first.click()
    page.wait_for_url("**/admin/receipts/")
    # The list may still be arriving when the address has changed: wait for the row itself.
    page.get_by_text(str(receipt.pk)).wait_for(state="visible")
    assert not Conversation.objects.filter(pk=about.pk).exists()
    assert Conversation.objects.filter(pk=kept.pk).exists()
    assert b"Wilhelmina Ashcombe-Vries" not in raw_bytes_of_database()


def test_a_mistyped_subject_is_offered_the_stored_one_and_files_nothing_by_accident(live_server, logged_in_page):
    load_demo(coding_turns=12)
    held = Fact.objects.filter(subject=SUPPORT_SUBJECT).count()
    page = _log_in_as_admin(logged_in_page)
    page.get_by_role("link", name="Deletion requests").first.click()
    page.fill("input[name=subject]", "customer:maria.keller")
    page.get_by_role("button", name="Preview").click()
    page.wait_for_url("**/admin/deletion-requests/preview/")

    assert page.get_by_text("Nothing is stored about this").is_visible()
    assert page.get_by_role("button", name="Delete and verify").count() == 0
    suggestion = page.locator("#subject-suggestions li").first
    assert SUPPORT_SUBJECT in suggestion.inner_text()
    assert f"2 conversations, {held} facts" in suggestion.inner_text()

    suggestion.get_by_role("button", name=f"Preview {SUPPORT_SUBJECT}").click()
    page.get_by_text(SUPPORT_SUBJECT).first.wait_for()
    assert page.locator("#count-conversations").inner_text() == "2"
    assert page.locator("#count-facts").inner_text() == str(held)
    assert page.locator("#nothing-stored").count() == 0
    assert page.get_by_role("button", name="Delete and verify").is_visible()
    assert DeletionReceipt.objects.count() == 0


def test_a_receipt_that_nothing_is_stored_is_an_explicit_choice(live_server, logged_in_page):
    page = _log_in_as_admin(logged_in_page)
    page.get_by_role("link", name="Deletion requests").first.click()
    page.fill("input[name=subject]", "cust:never-seen")
    page.get_by_role("button", name="Preview").click()
    page.wait_for_url("**/admin/deletion-requests/preview/")
    assert page.get_by_text("No stored subject is close to it").is_visible()
    button = page.get_by_role("button", name="File a receipt that nothing is stored")
    button.click()
    assert page.evaluate("document.querySelector('#confirm input[name=confirm]').validity.valueMissing")
    assert DeletionReceipt.objects.count() == 0
    page.check("#confirm input[name=confirm]")
    button.click(timeout=ERASURE_WAIT_MS)
    page.wait_for_url("**/admin/receipts/*/", timeout=ERASURE_WAIT_MS)
    receipt = DeletionReceipt.objects.get()
    assert receipt.counts["conversations"] == 0
