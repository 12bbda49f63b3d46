"""A person imports a Claude Code session with a compaction, a rewind and a subagent, then reads it.

Saves docs/screenshots/import-*.png, which the closing note of the import issue shows.
"""

from pathlib import Path

import pytest

from conversations.models import Conversation
from conversations.roles import ADMIN
from tests.helpers import unfold

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

FIX = Path(__file__).parent / "fixtures" / "formats" / "claude_code_session.jsonl"
SHOTS = Path(__file__).resolve().parent.parent / "docs" / "screenshots"


def test_an_admin_imports_a_session_and_reads_its_fold_fork_and_subagent(live_server, logged_in_page):
    from playwright.sync_api import expect  # imported here: without playwright the `page` fixture says so

    page = logged_in_page(ADMIN, "/admin/import/", username="ada")

    page.set_input_files("input[name=file]", str(FIX))
    page.fill("input[name=namespace]", "-home-dev-shop")
    page.get_by_role("button", name="Preview").click()
    page.locator("#import-result h2", has_text="Preview").wait_for()
    assert page.locator("#preview-created").inner_text() == "3"
    assert not Conversation.objects.exists()  # a preview writes nothing
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / "import-preview.png"), full_page=True)

    page.get_by_role("button", name="Import 3 conversations now").click()
    page.locator("#import-result h2", has_text="Imported").wait_for()
    page.get_by_role("link", name="Coupons crash checkout", exact=True).click()
    page.wait_for_url("**/conversations/*/")

    # Tall enough for every row: rows off screen are not laid out (content-visibility), nor shot;
    # they are laid out a frame after the viewport grew, so wait for the last one.
    page.set_viewport_size({"width": 1400, "height": 2800})
    expect(page.locator("#record")).to_contain_text("Added tests/test_coupon.py::test_expired_raises.",
                                                    use_inner_text=True)
    # The session: the fold after #7, the rewind as a fork at #5, the subagent under the fork.
    assert page.locator("#record .fold").count() == 1
    assert "Fold after #7" in page.locator("#record .fold").inner_text()
    unfold(page, "#conv-panels")
    tree = page.locator(".fork-tree")
    assert "at #5" in tree.inner_text() and "subagent" in tree.inner_text()
    page.screenshot(path=str(SHOTS / "import-session.png"), full_page=True)

    page.set_viewport_size({"width": 1400, "height": 900})
    unfold(page, "#conv-panels")
    page.locator(".fork-tree a", has_text="Subagent 7f3a9c").click()
    page.wait_for_url("**/conversations/*/")
    crumbs = page.locator("nav.crumbs").inner_text()
    assert "subagent, spawned at #8" in crumbs
    page.screenshot(path=str(SHOTS / "import-subagent.png"), full_page=True)

    # The abandoned branch: the shared rows up to #5, then the prompt the person rewound from,
    # the Task call that spawned the subagent, and its result.
    page.locator("nav.crumbs a", has_text="rewind at #5").click()
    page.wait_for_url("**/conversations/*/")
    page.set_viewport_size({"width": 1400, "height": 2400})
    record = page.locator("#record")
    for seen in ("Fix it with a guard clause.", "Task", "tests/test_coupon.py covers expiry and stacking."):
        expect(record).to_contain_text(seen, use_inner_text=True)
    assert "at #5" in page.locator("nav.crumbs").inner_text()
    page.screenshot(path=str(SHOTS / "import-fork.png"), full_page=True)
