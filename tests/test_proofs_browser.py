"""In a real Chromium: an admin finds what is held about a subject, downloads the ZIP, and the
file verifies offline against the public key the Signing keys page shows."""

from pathlib import Path

import pytest
from memoryui_verify import verify_path

from conversations import store
from conversations.models import AuditEvent
from conversations.roles import ADMIN

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SHOTS = Path(__file__).resolve().parent.parent / "docs" / "screenshots"


def test_an_admin_exports_a_subject_and_the_file_verifies_with_the_pages_key(live_server, logged_in_page, settings,
                                                                             tmp_path):
    settings.DATA_DIR = tmp_path
    settings.MEMORYUI_SIGNING_KEY_FILE = ""
    for title, subject in [("Refund for order 7", "customer:7"), ("Address change", "CUSTOMER:7")]:
        c = store.create_conversation(title=title, subject=subject)
        store.append_message(conversation_id=c.pk, message={"kind": "user", "content": f"{title}, please."})
    page = logged_in_page(ADMIN, "/admin/proofs/signing-keys/", username="dpo")
    public_key = page.locator("tr", has_text="current").locator("code.public-key").inner_text().strip()
    page.screenshot(path=str(SHOTS / "signing-keys.png"), full_page=True)

    page.get_by_role("link", name="Subject export").click()
    page.fill("input[name=subject]", "Customer:7")
    page.get_by_role("button", name="Find what is held").click()
    page.get_by_text("2 conversations, 2 messages, 0 facts").wait_for()
    page.screenshot(path=str(SHOTS / "subject-export.png"), full_page=True)
    with page.expect_download() as info:
        page.get_by_role("button", name="Download").click()
    download = tmp_path / info.value.suggested_filename
    info.value.save_as(download)

    report = verify_path(download, pinned_keys=[public_key])
    assert report.ok, report.as_dict()
    assert len(report.conversations) == 2 and report.files_checked == 7 + 2 * 2  # JSONL and Markdown each
    assert {e.action for e in AuditEvent.objects.filter(actor="user:dpo")} >= {"subject.export_requested",
                                                                              "subject.exported"}
