"""A person uploads a session and its subagent together on the import page, and finds the
subagent under the Task call that spawned it."""

import pytest

from conversations.frameworks.samples import AGENT_ID, claude_agent_session
from conversations.models import Conversation
from conversations.roles import ADMIN
from tests.claude_sdk_support import write_session_files
from tests.helpers import unfold

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]



def test_an_admin_uploads_a_session_with_its_subagent_in_one_go(live_server, logged_in_page, tmp_path):
    from playwright.sync_api import expect  # imported here: without playwright the `page` fixture says so

    sample = claude_agent_session()
    main = write_session_files(tmp_path, sample)
    sub = main.with_suffix("") / "subagents" / f"agent-{AGENT_ID}.jsonl"
    page = logged_in_page(ADMIN, "/admin/import/", username="ada")

    # The subagent first: the order of the files does not matter.
    page.set_input_files("input[name=file]", [str(sub), str(main)])
    page.fill("input[name=namespace]", "billing")
    page.get_by_role("button", name="Preview").click()
    page.locator("#import-result h2", has_text="Preview").wait_for()
    assert "2 files" in page.locator("#import-result h2").inner_text()
    assert page.locator("#preview-created").inner_text() == "2"
    expect(page.locator("#import-result")).to_contain_text("under its session in these files")
    assert not Conversation.objects.exists()  # a preview writes nothing

    page.get_by_role("button", name="Import 2 conversations now").click()
    page.locator("#import-result h2", has_text="Imported").wait_for()
    session = Conversation.objects.get(namespace="billing", external_id=sample.session_id)
    agent = Conversation.objects.get(namespace="billing", external_id=f"{sample.session_id}/subagents/agent-{AGENT_ID}")
    assert (agent.parent_id, agent.parent_relation) == (session.pk, "subagent")
    assert agent.forked_from_position is not None

    page.get_by_role("link", name=session.title, exact=True).click()
    page.wait_for_url("**/conversations/*/")
    unfold(page, "#conv-panels")
    tree = page.locator(".fork-tree")
    expect(tree).to_contain_text(f"spawned at #{agent.forked_from_position}")
    page.locator(".fork-tree a", has_text=f"Subagent {AGENT_ID}").click()
    page.wait_for_url(f"**/conversations/{agent.pk}/")
    assert f"subagent, spawned at #{agent.forked_from_position}" in page.locator("nav.crumbs").inner_text()
