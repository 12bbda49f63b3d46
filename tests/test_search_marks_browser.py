"""A row opened from a search marks the searched words (static/js/search-marks.js), also
when the row is a tool result shown under its call in another row."""

import pytest

from conversations import store
from conversations.roles import AUDITOR

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_tool_result_under_its_call_gets_the_marks(live_server, logged_in_page):
    c = store.create_conversation(title="Refund run")
    store.append_message(conversation_id=c.pk, message={"kind": "user", "content": "Please refund order 7"})
    store.append_message(conversation_id=c.pk, message={
        "kind": "assistant", "content": "On it.",
        "tool_calls": [{"id": "t1", "name": "issue_refund", "arguments": {"order": 7}}]})
    store.append_message(conversation_id=c.pk, message={
        "kind": "tool", "tool_call_id": "t1", "name": "issue_refund", "content": "Refunded 49.00 EUR"})
    page = logged_in_page(AUDITOR)
    page.goto(live_server.url + f"/conversations/{c.pk}/?at=2&q=refund#p2")
    page.wait_for_selector('details.result[data-position="2"][data-search-marks], '
                           'article.msg[data-position="2"][data-search-marks]')
    marked = page.locator('details.result[data-position="2"] mark.search-mark, '
                          'article.msg[data-position="2"] .msg-body mark.search-mark').all_inner_texts()
    assert "Refunded" in marked
    # The user's row, not opened, is left alone.
    assert page.locator('article.msg[data-position="0"] mark.search-mark').count() == 0
