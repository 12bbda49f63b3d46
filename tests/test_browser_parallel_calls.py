"""A person reads a Claude Code reply with three parallel tool calls: one row, its text,
its three calls and its usage once, then the three results.

Saves docs/screenshots/parallel-tool-calls.png, which the closing note of the issue shows.
"""

from pathlib import Path

import pytest

from conversations.imports import entry_appends, entry_streams
from conversations.roles import AUDITOR
from tests.test_one_reply_one_row import session_entries, session_text

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SHOTS = Path(__file__).resolve().parent.parent / "docs" / "screenshots"


def test_an_auditor_reads_a_reply_with_three_parallel_calls_as_one_row(live_server, logged_in_page):
    from playwright.sync_api import expect  # imported here: without playwright the `page` fixture says so

    # Its three calls came in batches through the SessionStore door, cut between the calls.
    entries = session_entries()
    for batch in (entries[:3], entries[3:5], entries[5:]):
        entry_appends.append_entries(format="claude-code", namespace="-srv-ops", external_id=batch[0]["sessionId"],
                                entries=batch)
    conversation_id = entry_streams.load_entries(format="claude-code", namespace="-srv-ops",
                                            external_id=entries[0]["sessionId"])[0]
    assert session_text()  # the same lines a file import stores as one row (tests/test_one_reply_one_row.py)

    page = logged_in_page(AUDITOR, f"/conversations/{conversation_id}/", username="noor")
    page.set_viewport_size({"width": 1400, "height": 1500})
    page.evaluate("() => new Promise(done => requestAnimationFrame(() => requestAnimationFrame(done)))")

    record = page.locator("#record")
    expect(record).to_contain_text("All three are up.", use_inner_text=True)
    rows = record.locator("article")
    assert rows.count() == 6  # user, the reply, three results, the answer
    reply = rows.nth(1)
    text = reply.inner_text()
    assert "Checking all three." in text
    for service in ("api", "billing", "search"):
        assert f"toolu_{service}" in text
    # The usage on one row per reply (this one and the answer), not on a row per call.
    assert rows.filter(has_text="input 210").count() == 2 and "input 210" in text
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / "parallel-tool-calls.png"), full_page=True)
