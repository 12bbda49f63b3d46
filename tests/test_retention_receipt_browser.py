"""In a real Chromium: an auditor's archive of last year is imported, the page says it is older
than the retention policy and offers the pin; the prune preview shows when each conversation
was received and when it was last active, and takes none of the fresh import."""

from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from conversations.models import Conversation
from conversations.roles import ADMIN
from tests.helpers import unfold
from tests.retention_support import conversation

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SESSION_FILE = Path(__file__).parent / "fixtures" / "formats" / "claude_code_session.jsonl"
SHOTS = Path(__file__).resolve().parent.parent / "docs" / "screenshots"


def _log_in(logged_in_page, path):
    return logged_in_page(ADMIN, path, username="auditor")


def _upload(page):
    page.set_input_files("input[name=file]", str(SESSION_FILE))
    page.fill("input[name=namespace]", "audit-archive")
    page.get_by_role("button", name="Preview").click()
    page.locator("#import-result h2", has_text="Preview").wait_for()


def test_the_import_page_says_the_archive_is_older_than_the_policy_and_pins_it(live_server, logged_in_page):
    from playwright.sync_api import expect

    page = _log_in(logged_in_page, "/admin/import/")
    _upload(page)
    notice = page.locator("#older-than-retention")
    expect(notice).to_contain_text("3 of these conversations are older, by their own dates, than the 90-day "
                                   "retention policy")
    expect(notice).to_contain_text("last activity 2025-11-02")
    pin = page.get_by_label("Pin these 3 conversations")
    expect(pin).not_to_be_checked()
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / "import-older-than-retention.png"), full_page=True)

    pin.check()
    page.get_by_role("button", name="Import 3 conversations now").click()
    page.locator("#import-result h2", has_text="Imported").wait_for()
    expect(page.locator("#pinned-count")).to_have_text("Pinned 3")
    assert Conversation.objects.filter(pinned=True).count() == 3

    page.get_by_role("link", name="Coupons crash checkout", exact=True).click()
    page.wait_for_url("**/conversations/*/")
    unfold(page, "#conv-panels")
    expect(page.locator("#last-activity")).to_contain_text("2025-11-02")
    expect(page.locator("#received-at")).to_contain_text(timezone.now().strftime("%Y-%m-%d"))
    expect(page.locator(".badge.pinned").first).to_be_visible()


def test_the_prune_preview_shows_both_dates_and_takes_nothing_just_imported(live_server, logged_in_page):
    from playwright.sync_api import expect

    stale = conversation(title="Received long ago", messages=2, age_days=120)
    page = _log_in(logged_in_page, "/admin/import/")
    _upload(page)
    page.get_by_role("button", name="Import 3 conversations now").click()  # no pin
    page.locator("#import-result h2", has_text="Imported").wait_for()
    imported = list(Conversation.objects.exclude(pk=stale.pk).values_list("pk", flat=True))
    assert len(imported) == 3 and not Conversation.objects.filter(pinned=True).exists()

    page.goto(live_server.url + "/admin/prune/?older_than_days=90")
    preview = page.locator("#prune-preview")
    expect(page.locator("#preview-conversations")).to_have_text("1")
    expect(preview.get_by_text("Received long ago")).to_be_visible()
    assert preview.get_by_text("Coupons crash checkout").count() == 0
    row = preview.locator("tbody tr")
    received = (timezone.now() - timedelta(days=120)).strftime("%Y-%m-%d")
    expect(row.locator("td.received")).to_contain_text(received)
    expect(row.locator("td.activity")).to_contain_text(received)
    expect(preview.locator("thead")).to_contain_text("Received")
    page.screenshot(path=str(SHOTS / "prune-preview-received.png"), full_page=True)

    page.locator("label.confirm-box input[type=checkbox]").check()
    page.get_by_role("button", name="Prune 1 conversation now").click()
    page.wait_for_url("**/admin/prune/runs/*/")
    expect(page.locator("#result-conversations")).to_have_text("1")
    assert Conversation.objects.filter(pk__in=imported).count() == 3
    assert not Conversation.objects.filter(pk=stale.pk).exists()
