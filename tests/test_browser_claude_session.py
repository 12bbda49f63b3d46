"""A person reads a Claude Agent SDK session that reached memoryui through the SDK's own
SessionStore door: the compaction as a fold, the subagent under its session.

Saves docs/screenshots/claude-sdk-*.png, which the closing note of the framework issue shows.
"""

from pathlib import Path

import pytest
from claude_agent_sdk import import_session_to_store

from conversations.frameworks.samples import AGENT_ID, claude_agent_session
from conversations.models import Conversation
from conversations.roles import AUDITOR
from tests.api_support import make_key
from tests.claude_sdk_support import Stores, run_async, write_session_files
from tests.helpers import unfold

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SHOTS = Path(__file__).resolve().parent.parent / "docs" / "screenshots"


def test_an_auditor_reads_a_claude_agent_sdk_session_with_its_fold_and_subagent(live_server, logged_in_page, tmp_path,
                                                                                 monkeypatch):
    from playwright.sync_api import expect  # imported here: without playwright the `page` fixture says so

    sample = claude_agent_session()
    write_session_files(tmp_path, sample)
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path))
    stores = Stores(live_server.url, make_key(["read", "write"], name="claude-agent-sdk"))

    async def replay():
        await import_session_to_store(sample.session_id, stores(prefix=""), batch_size=6)
        await stores.close()

    run_async(replay())
    session = Conversation.objects.get(namespace=sample.project_key, external_id=sample.session_id)

    page = logged_in_page(AUDITOR, f"/conversations/{session.pk}/", username="iris")
    # Tall enough for every row: rows off screen are not laid out (content-visibility), nor shot.
    page.set_viewport_size({"width": 1400, "height": 3600})
    # Rows that came on screen are laid out at the next frame; their text is not there before.
    page.evaluate("() => new Promise(done => requestAnimationFrame(() => requestAnimationFrame(done)))")

    assert page.locator("h1").inner_text() == "Invoice export fails on discount lines"
    record = page.locator("#record")
    # Batches of 6 split msg_01B between its text (entry 5) and its Task call (entry 6): the text was
    # written at the end of its batch (a reply without calls is not held open, or a session's last
    # answer would wait for the next batch), so the call is a continuation row (#5) that requests merge.
    assert record.locator(".fold").count() == 1 and "Fold after #11" in record.locator(".fold").inner_text()
    # Rows below the first screen are laid out a frame after the viewport grew (content-visibility):
    # wait for what a person reads rather than read it once.
    for seen in ("The nightly invoice export fails", "A discount line probably has a negative amount", "Grep",
                 "Task", "42 passed", "All 42 export tests pass"):
        expect(record).to_contain_text(seen, use_inner_text=True)
    text = record.inner_text()
    assert "This session is being continued" not in text.split("Fold after")[0]  # the summary is the fold's
    unfold(page, "#conv-panels")
    tree = page.locator(".fork-tree")
    assert "subagent" in tree.inner_text() and "spawned at #5" in tree.inner_text()
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / "claude-sdk-session.png"), full_page=True)

    page.set_viewport_size({"width": 1400, "height": 1300})
    page.locator(".fork-tree a", has_text=f"Subagent {AGENT_ID}").click()
    page.wait_for_url("**/conversations/*/")
    assert "subagent, spawned at #5" in page.locator("nav.crumbs").inner_text()
    assert "NEGATIVE amount" in page.locator("#record").inner_text()
    page.screenshot(path=str(SHOTS / "claude-sdk-subagent.png"), full_page=True)
