"""In a real Chromium: an admin opens the Verification page after one conversation was edited
with raw SQL behind the triggers' back and another was erased by a deletion request; the page
shows the first as tampered at its position and the second as erased with its receipt.
Screenshot: docs/screenshots/verification.png."""

from pathlib import Path

import pytest
from django.db import connection

from conversations import store
from conversations.models import Message
from conversations.retention import erasure
from conversations.roles import ADMIN

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SHOTS = Path(__file__).resolve().parent.parent / "docs" / "screenshots"
MSG = Message._meta.db_table


def edit_behind_the_triggers(conversation_id, position: int, content: str) -> None:
    """UPDATE a message with its no-update trigger out of the way, then put the trigger back."""
    db_id = Message._meta.get_field("conversation").get_db_prep_value(conversation_id, connection)
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(f"ALTER TABLE {MSG} DISABLE TRIGGER message_no_update")
        else:
            cursor.execute("SELECT sql FROM sqlite_master WHERE type = 'trigger' AND name = 'message_no_update'")
            trigger_sql = cursor.fetchone()[0]
            cursor.execute("DROP TRIGGER message_no_update")
        cursor.execute(f"UPDATE {MSG} SET content = %s WHERE conversation_id = %s AND position = %s",
                       [content, db_id, position])
        if connection.vendor == "postgresql":
            cursor.execute(f"ALTER TABLE {MSG} ENABLE TRIGGER message_no_update")
        else:
            cursor.execute(trigger_sql)


def test_the_verification_page_shows_a_tampered_and_an_erased_conversation(live_server, logged_in_page):
    fine = store.create_conversation(title="Order 1182: refund approved")
    store.append_messages(conversation_id=fine.pk, messages=[
        {"kind": "user", "content": "Where is my refund?"}, {"kind": "assistant", "content": "It was approved."}])
    edited = store.create_conversation(title="Order 2291: delivery complaint")
    store.append_messages(conversation_id=edited.pk, messages=[
        {"kind": "user", "content": "The parcel never came."},
        {"kind": "assistant", "content": "I have sent a replacement."},
        {"kind": "user", "content": "Thank you."}])
    gone = store.create_conversation(title="Support chat", subject="ann@example.com")
    store.append_message(conversation_id=gone.pk, message={"kind": "user", "content": "Please forget me."})
    receipt = erasure.execute_deletion(subject="ann@example.com", actor="user:boss")
    edit_behind_the_triggers(edited.pk, 1, '{"kind":"assistant","content":"No replacement is due."}')

    page = logged_in_page(ADMIN, "/admin/verification/", username="boss")
    tampered = page.locator("tr[data-state=tampered]")
    tampered.wait_for()
    assert "Order 2291" in tampered.inner_text() and "tampered at #1" in tampered.inner_text()
    erased = page.locator("tr[data-state=erased]")
    assert str(receipt.pk) in erased.inner_text() and "erased, chain verified" in erased.inner_text()
    assert page.locator("tr[data-state=verified]", has_text="Order 1182").count() == 1
    assert page.get_by_text("tampering found").is_visible()
    page.screenshot(path=str(SHOTS / "verification.png"), full_page=True)
