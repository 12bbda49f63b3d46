"""In a real Chromium, by keyboard: a request filed in two phases, whose pending file (what its
window searches for) was lost before the window ran. Its receipt says "Erased" with its deadline;
the window is run from the receipt's own button; the receipt then says it was deleted but not
verified, and why, rather than waiting past its deadline for ever."""

import pytest

from conversations.retention import erasure, window
from conversations.roles import ADMIN
from tests.retention_support import conversation, in_two_phases

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _tab_to(page, name: str, most: int = 80) -> None:
    for _ in range(most):
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement && document.activeElement.textContent.trim()") == name:
            return
    raise AssertionError(f"no element named {name!r} is reached by Tab")


def test_a_receipt_whose_pending_file_was_lost_says_what_was_not_verified(live_server, logged_in_page, settings,
                                                                          tmp_path):
    from playwright.sync_api import expect

    in_two_phases(settings, tmp_path)
    conversation(title="beekeeping", subject="cust:sal", messages=3, text="Sal Moreno keeps bees {i}")
    receipt = erasure.execute_deletion(subject="cust:sal", actor="user:dpo")
    for path in window.pending_dir().glob("*.json"):
        path.unlink()

    page = logged_in_page(ADMIN, f"/admin/receipts/{receipt.pk}/", username="dpo")
    expect(page.locator("#verdict")).to_contain_text("Erased: the rows are deleted")
    _tab_to(page, "Clean and search the files now")
    page.keyboard.press("Enter")
    # The window ran for every request waiting: the list of receipts, with this one's verdict.
    page.wait_for_url("**/admin/receipts/")
    expect(page.get_by_role("row").filter(has_text="not_possible")).to_have_count(1)
    page.goto(f"{live_server.url}/admin/receipts/{receipt.pk}/")
    verdict = page.locator("#verdict")
    expect(verdict).to_contain_text("Deleted, but not verified")
    expect(verdict).to_contain_text("lost with the request's pending file")
    expect(verdict).to_contain_text("its texts were not searched for")
    assert window.overdue_count() == 0 and window.waiting_count() == 0
