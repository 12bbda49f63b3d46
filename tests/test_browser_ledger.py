"""The ledger beside the transcript in a real Chromium: an agent's harness writes task state,
a retried refund and workspace snapshots through the Python client (a real git repository in
a temporary directory); an auditor reads them on the conversation page. Saves the screenshot
the README shows."""

import re
import subprocess

import pytest

from conversations.roles import AUDITOR
from tests.api_support import make_key
from tests.conftest import skip_or_fail
from tests.helpers import unfold, wait_for_polls
from tests.test_browser_ui import _shot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

KEY = "refund:T-40219:SU-88421:oak-shelf:11800"


def git(repo, *args):
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True).stdout


@pytest.fixture
def shop_repo(tmp_path):
    try:
        git(tmp_path, "init", "-q", "-b", "main")
    except (FileNotFoundError, subprocess.CalledProcessError):
        skip_or_fail("git is not installed")
    git(tmp_path, "config", "user.email", "dev@example.com")
    git(tmp_path, "config", "user.name", "Dev")
    (tmp_path / "tax.py").write_text("def vat(lines):\n    return sum(round(l * 0.19, 2) for l in lines)\n")
    git(tmp_path, "add", ".")
    git(tmp_path, "commit", "-q", "-m", "billing")
    return tmp_path


def test_an_auditor_reads_the_task_state_the_retried_refund_and_the_workspace(live_server, logged_in_page, shop_repo):
    from memoryui_client import Memoryui

    with Memoryui(live_server.url, api_key=make_key(["read", "write"], name="support-bot")) as mui:
        cid = mui.create(title="Order SU-88421: overcharged by the VAT rounding bug", subject="customer:4711")["id"]

        def say(message):
            return mui.append(cid, message)["position"]

        say({"kind": "user", "content": "I was charged 118.04 for the oak shelf, the price was 118.00."})
        say({"kind": "assistant", "content": "Looking at the order and the invoice code.",
             "tool_calls": [{"id": "c1", "name": "lookup_order", "arguments": {"order": "SU-88421"}}]})
        say({"kind": "tool", "tool_call_id": "c1", "name": "lookup_order",
             "content": '{"order": "SU-88421", "item": "oak shelving unit", "charged_cents": 11804}'})
        version = mui.set_state(cid, {"ticket": "T-40219", "order": "SU-88421", "item": "oak shelving unit",
                                      "amount_cents": 11800}, expected_version=0)["version"]
        # Before the coding turn: the workspace as it was (clean, so no snapshot), then the fix.
        assert mui.snapshot_workspace(cid, shop_repo, position=3) is None
        (shop_repo / "tax.py").write_text("def vat(lines):\n    return round(sum(lines) * 0.19, 2)\n")
        say({"kind": "assistant", "content": "VAT was rounded per line; it is now rounded once per invoice."})
        first_snapshot = mui.snapshot_workspace(cid, shop_repo, position=4)
        (shop_repo / "test_tax.py").write_text("from tax import vat\n\ndef test_once():\n    assert vat([0.5] * 3)"
                                               " == 0.29\n")
        say({"kind": "did", "text": "Added a regression test for the rounding."})
        second_snapshot = mui.snapshot_workspace(cid, shop_repo, position=5)
        version = mui.set_state(cid, {"ticket": "T-40219", "order": "SU-88421", "item": "oak shelving unit",
                                      "amount_cents": 11800, "decision": "refund the 4 cents and fix the rounding"},
                                expected_version=version)["version"]
        refund = {"order": "SU-88421", "amount_cents": 4}
        say({"kind": "assistant", "content": "Refunding the difference.",
             "tool_calls": [{"id": "c2", "name": "issue_refund", "arguments": refund}]})
        say({"kind": "tool", "tool_call_id": "c2", "name": "issue_refund", "is_error": True,
             "content": "TimeoutError: payments did not answer within 10 s"})
        first = mui.record_action(cid, key=KEY, name="issue_refund", arguments=refund,
                                  result={"refund_id": "RF-77120", "status": "ok"})
        say({"kind": "assistant", "content": "Timed out; retrying with the same key.",
             "tool_calls": [{"id": "c3", "name": "issue_refund", "arguments": refund}]})
        say({"kind": "tool", "tool_call_id": "c3", "name": "issue_refund",
             "content": '{"status": "already_performed", "refund_id": "RF-77120"}'})
        retry = mui.record_action(cid, key=KEY, name="issue_refund", arguments=refund,
                                  result={"status": "already_performed", "refund_id": "RF-77120"})
        mui.set_state(cid, {"ticket": "T-40219", "order": "SU-88421", "item": "oak shelving unit",
                            "amount_cents": 11800, "decision": "refund the 4 cents and fix the rounding",
                            "refund": "RF-77120"}, expected_version=version)
        say({"kind": "assistant", "content": "Refunded 0.04 (RF-77120) and fixed the invoice rounding."})
    assert retry["status"] == "already_performed" and retry["action"]["id"] == first["action"]["id"]

    page = logged_in_page(AUDITOR, username="audrey")
    page.set_viewport_size({"width": 1400, "height": 1500})
    page.goto(f"{live_server.url}/conversations/{cid}/")

    unfold(page, "#conv-panels")  # the task state and actions fold with the other panels
    state = page.locator("#task-state")
    assert "version 3" in state.locator("h3").inner_text()
    assert state.locator("dl.state").get_by_text("RF-77120").is_visible()
    state.locator("details.state-history summary").click()
    assert state.locator("ol.versions > li").count() == 3
    assert state.locator("ol.versions > li").first.get_by_text("RF-77120").is_visible()

    ledger_rows = page.locator("#actions-ledger tbody tr")
    assert ledger_rows.count() == 2
    assert ledger_rows.nth(1).locator(".badge.status").inner_text() == "already_performed"
    ledger_rows.nth(1).get_by_role("link", name=re.compile("entry")).click()
    page.wait_for_url(f"**#action-{first['action']['id']}")

    # In the full record: each entry right after the tool result it was written from.
    record = page.locator("#record")
    marks = record.locator(".ledger-mark, article.msg")
    order = [m.get_attribute("id") for m in marks.all()]
    assert order.index(f"t-action-{first['action']['id']}") == order.index("p6") + 1
    assert order.index(f"t-action-{retry['attempt']['id']}") == order.index("p8") + 1
    snapshot_mark = record.locator(f"#t-snapshot-{second_snapshot['id']}")
    assert order.index(f"t-snapshot-{second_snapshot['id']}") == order.index("p5") - 1
    assert second_snapshot["restore"] in snapshot_mark.locator("code.cmd").inner_text()
    assert "since #4: +1 file" in snapshot_mark.inner_text()
    assert first_snapshot["ref"] == f"refs/memoryui/{cid}/4"

    page.evaluate("window.scrollTo(0, 0)")
    _shot(page, "ledger.png", full_page=True)


def test_live_follow_places_ledger_marks_recorded_after_the_rows_they_follow(live_server, logged_in_page):
    from conversations import store
    from conversations.ledger import store as ledger

    c = store.create_conversation(title="Order SU-90112: refund while someone watches")
    say = lambda text: store.append_message(conversation_id=c.pk, message={"kind": "note", "text": text})  # noqa: E731
    for text in ("customer asks for a refund", "order looked up", "refund sent to payments"):
        say(text)                                                                       # 0, 1, 2
    page = logged_in_page(AUDITOR, username="audrey")
    page.goto(f"{live_server.url}/conversations/{c.pk}/")
    page.evaluate("document.querySelectorAll('.rows[data-follow-url]').forEach(r => r.dataset.followInterval = 300)")
    page.evaluate("window.__sameDocument = true")
    record = "#record"

    def order():
        return page.locator(f"{record} .ledger-mark, {record} article.msg").evaluate_all("els => els.map(e => e.id)")

    # The harness records the refund after the tool returned: no new row, the mark still shows, after #2.
    first = ledger.record_action(conversation_id=c.pk, idempotency_key=KEY, name="issue_refund",
                                 result={"refund_id": "RF-1"}).action
    page.wait_for_selector(f"#t-action-{first.id}", timeout=15000)
    assert order() == ["p0", "p1", "p2", f"t-action-{first.id}"]
    # A snapshot for the turn about to start, then the row, then its state change and a retry.
    snap = ledger.record_snapshot(conversation_id=c.pk, position=3, repo="/srv/shop", commit="d" * 40,
                                  base="e" * 40, files_changed=1, insertions=2, deletions=0).snapshot
    say("payments timed out; retried")                                                   # 3
    ledger.set_state(conversation_id=c.pk, state={"order": "SU-90112", "refund": "RF-1"}, expected_version=0)
    retry = ledger.record_action(conversation_id=c.pk, idempotency_key=KEY, name="issue_refund",
                                 result={"status": "already_performed"}).attempt
    page.wait_for_selector(f"#t-action-{retry.id}", timeout=15000)
    wait_for_polls(page, 3)  # a few more polls: nothing is added twice
    assert order() == ["p0", "p1", "p2", f"t-action-{first.id}", f"t-snapshot-{snap.id}", "p3", "t-state-v1",
                       f"t-action-{retry.id}"]
    assert page.locator(f"#t-action-{retry.id}").get_by_role("link", name=re.compile("entry after #2")).count() == 1
    assert page.evaluate("window.__sameDocument") is True  # never reloaded
