"""The audit pages in a real Chromium: what an auditor and an admin do, end to end.

Few tests on purpose (they run on both databases in CI); each walks a whole flow.
They also save the screenshots the README shows.
"""

import json
from pathlib import Path

import pytest

from conversations import demo, store, views
from conversations.models import Conversation
from conversations.roles import ADMIN, AUDITOR
from tests.helpers import unfold

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SHOTS = Path(__file__).resolve().parent.parent / "docs" / "screenshots"
def _shot(page, name, **kw):
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / name), **kw)


def test_an_admin_audits_forks_checkpoints_and_exports(live_server, logged_in_page, monkeypatch):
    monkeypatch.setattr(views, "ROW_PAGE", 25)
    ticket, coding, journal, fork, *_doors = demo.load_demo(coding_turns=12)
    store.checkpoint_at(conversation_id=ticket.pk, position=8, created_by="agent:support-bot",
                        summary="Customer Maria Keller: ProBlend 900 (order 48213, 149 EUR) arrived cracked; "
                                "she wants a refund. The card refund failed because card 4417 expired.")
    page = logged_in_page(ADMIN, username="ada")  # every page needs a login: "/" sends to the form

    # The list, newest activity first.
    rows = page.locator("table.conversations tbody tr")
    assert rows.count() == 8  # the four, and one through each framework door (one with its subagent)
    assert page.locator("table.conversations").get_by_text("blender arrived cracked").first.is_visible()
    _shot(page, "list.png")

    # A conversation with a checkpoint: the fold in both views.
    page.get_by_role("link", name="Order #48213: blender arrived cracked", exact=True).click()
    page.wait_for_url(f"**/conversations/{ticket.pk}/")
    assert page.locator("#record-pane #fold").is_visible()
    assert page.locator("#active-pane #ahandoff").is_visible()
    assert page.locator("#active-pane article.msg[data-position]").first.get_attribute("data-position") == "9"
    # The permalink of the fold's row: the page opens a few rows above it, so the shot shows the fold.
    page.locator("dl.facts").get_by_role("link", name="after #8").click()
    page.wait_for_url("**?at=8#p8")
    assert page.locator("#p8.is-here").is_visible()
    page.set_viewport_size({"width": 1400, "height": 1150})
    page.evaluate("window.scrollTo(0, 0)")
    _shot(page, "conversation-wide.png")
    page.set_viewport_size({"width": 1400, "height": 900})

    # What the model saw before the refund call (row 7).
    page.locator("#p7 details.row-menu > summary").click()  # the row's actions, in one menu
    page.locator("#p7").get_by_role("link", name="What the model saw").click()
    page.wait_for_url(f"**/conversations/{ticket.pk}/saw/7/")
    assert page.locator("#saw article.msg").count() == 7  # rows 0-6: the checkpoint came later
    assert page.locator("#w7").get_by_text("issue_refund").is_visible()
    # The shot from the top: the size of the context and the legend above the rows.
    page.evaluate("window.scrollTo(0, 0)")
    _shot(page, "model-saw.png")

    # Narrow screen: the two views become tabs, without JavaScript.
    page.set_viewport_size({"width": 720, "height": 1000})
    page.goto(live_server.url + f"/conversations/{ticket.pk}/")
    assert page.locator("#record-pane").is_visible() and not page.locator("#active-pane").is_visible()
    _shot(page, "conversation-narrow.png")
    page.locator("label[for=tab-active]").click()
    assert page.locator("#active-pane").is_visible() and not page.locator("#record-pane").is_visible()
    page.set_viewport_size({"width": 1400, "height": 900})

    # Filter by kind (htmx swaps the views and keeps the URL shareable).
    unfold(page, "#row-filters")
    page.locator("form.toolbar label.kind-tool input").check()
    page.get_by_role("button", name="Apply").click()
    page.wait_for_url("**kind=tool**")
    kinds = page.locator("#record-pane article.msg").evaluate_all("els => els.map(e => e.dataset.kind)")
    assert kinds == ["tool"] * 4  # the lookup, the expired card, the timeout, the retry

    # Scroll to load more: the coding session has more rows than one page.
    page.goto(live_server.url + f"/conversations/{coding.pk}/")
    record_rows = page.locator("#record article.msg")
    assert record_rows.count() == 25
    page.locator("#record-more").scroll_into_view_if_needed()
    page.wait_for_function("() => document.querySelectorAll('#record article.msg').length >= 50")
    positions = record_rows.evaluate_all("els => els.map(e => +e.dataset.position)")
    assert positions[:50] == list(range(50))

    # Fork at position 3 and land on a 4-message child with its lineage.
    page.goto(live_server.url + f"/conversations/{ticket.pk}/")
    page.locator("#p3 details.row-menu > summary").click()  # the row's actions, in one menu
    page.locator("#p3").get_by_role("link", name="Fork from here").click()
    page.fill("input[name=title]", "Branch at the lookup")
    page.get_by_role("button", name="Fork").click()
    child = Conversation.objects.get(title="Branch at the lookup")
    page.wait_for_url(f"**/conversations/{child.pk}/")
    assert page.locator("#record article.msg").count() == 4
    crumbs = page.locator("nav.crumbs")
    assert "at #3" in crumbs.inner_text()
    assert crumbs.get_by_role("link", name="Order #48213: blender arrived cracked").count() == 1

    # Checkpoint here (admin): the new fold shows at once in both views.
    page.locator("#p2 details.row-menu > summary").click()  # the row's actions, in one menu
    page.locator("#p2").get_by_role("link", name="Checkpoint here").click()
    page.fill("textarea[name=summary]", "Damaged blender; order looked up.")
    page.get_by_role("button", name="Create checkpoint").click()
    page.wait_for_url(f"**/conversations/{child.pk}/?at=2*")
    assert page.locator("#record-pane #fold").is_visible()
    assert page.locator("#active-pane #ahandoff").get_by_text("Damaged blender; order looked up.").is_visible()
    assert page.locator("#active-pane article.msg[data-position]").evaluate_all(
        "els => els.map(e => +e.dataset.position)") == [3]

    # Each export format downloads with a filename and the right content.
    page.goto(live_server.url + f"/conversations/{ticket.pk}/")
    contents = {}
    for label, ext in [("JSON", "json"), ("JSONL", "jsonl"), ("Markdown", "md")]:
        with page.expect_download() as info:
            page.locator(".conv-actions").get_by_role("link", name=label, exact=True).click()
        download = info.value
        assert download.suggested_filename == f"conversation-{ticket.pk}.{ext}"
        contents[ext] = Path(download.path()).read_text()
    data = json.loads(contents["json"])
    assert len(data["messages"]) == 17 and data["checkpoints"][0]["message_position"] == 8
    lines = [json.loads(line) for line in contents["jsonl"].splitlines()]
    assert [m["position"] for m in lines if "record" not in m] == list(range(17))
    # Then the ledger: four task-state versions and the refund with its retry.
    assert [m["record"] for m in lines if "record" in m] == (["checkpoint"] + ["task_state_event"] * 4
                                                               + ["action"] * 2 + ["signed_head"])
    assert "Fold: checkpoint at position 8" in contents["md"]


PAYLOADS = [
    "<script>window.__pwned=1</script>",
    '<img src=x onerror="window.__pwned=1;alert(1)">',
    "[click me](javascript:window.__pwned=1)",
    '"><svg onload="window.__pwned=1">',
]


def test_script_payloads_never_run(live_server, logged_in_page):
    bad = " ".join(PAYLOADS)
    convo = store.create_conversation(title=bad, subject=bad)
    messages = [
        {"kind": "user", "content": bad},
        {"kind": "user", "content": [{"type": "text", "text": bad}, {"type": "image", "source": bad}]},
        {"kind": "assistant", "content": bad, "tool_calls": [{"id": bad, "name": bad, "arguments": {bad: bad}}],
         "meta": {"model": bad, bad: bad}},
        {"kind": "tool", "tool_call_id": bad, "name": bad, "content": bad, "is_error": True},
        {"kind": "system", "content": bad + "\n" * 40 + bad},  # long: collapsed behind an expander
    ] + [{"kind": k, "text": bad} for k in ("note", "thought", "heard", "said", "did", "woke")]
    for m in messages:
        store.append_message(conversation_id=convo.pk, message=m)
    # After the tool result: a fold never splits a call from it.
    store.checkpoint_at(conversation_id=convo.pk, position=3, summary=bad)
    child = store.fork_conversation(conversation_id=convo.pk, position=5, title=bad)

    page = logged_in_page(AUDITOR, username="otto")
    dialogs = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    for path in ["/", f"/?q={convo.pk}", f"/conversations/{convo.pk}/", f"/conversations/{child.pk}/",
                 f"/conversations/{convo.pk}/saw/9/", f"/conversations/{convo.pk}/fork/4/"]:
        page.goto(live_server.url + path)
        page.wait_for_load_state("load")
        # Open every expander, so nothing stays hidden from the check.
        page.evaluate("document.querySelectorAll('details').forEach(d => { d.open = true; })")
        assert page.evaluate("typeof window.__pwned") == "undefined", path
        assert page.locator("a[href^='javascript:' i]").count() == 0, path
        assert page.locator("script:not([src])").count() == 0, path
    # The payloads are there, as text.
    page.goto(live_server.url + f"/conversations/{convo.pk}/")
    assert page.locator("#p0 .msg-body").get_by_text("<script>window.__pwned=1</script>", exact=False).count() == 1
    assert page.locator("h1").inner_text().startswith("<script>")
    assert dialogs == []
