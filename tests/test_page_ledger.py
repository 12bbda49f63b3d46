"""The conversation page shows the ledger: task state with its versions, the actions
(a retry linked to its original) placed in the timeline, and workspace snapshots."""

import re

import pytest

from conversations import store
from conversations.ledger import store as ledger
from conversations.ledger.models import WorkspaceSnapshot
from conversations.roles import AUDITOR
from tests.test_page_conversation import _login

pytestmark = pytest.mark.django_db

KEY = "refund:48213:problend-900:14900"
BASE = "1" * 40


@pytest.fixture
def ticket():
    c = store.create_conversation(title="Order 48213", subject="cust:7")
    say = lambda text: store.append_message(conversation_id=c.pk, message={"kind": "note", "text": text})  # noqa: E731
    say("blender arrived cracked")                                                  # 0
    ledger.record_snapshot(conversation_id=c.pk, position=1, repo="/srv/shop", commit="a" * 40, base=BASE,
                           files_changed=2, insertions=10, deletions=1)
    say("order looked up")                                                          # 1
    ledger.set_state(conversation_id=c.pk, state={"order": "48213", "amount_eur": 149.0}, expected_version=0)
    say("refund decided")                                                           # 2
    ledger.set_state(conversation_id=c.pk, state={"order": "48213", "amount_eur": 149.0, "decision": "refund"},
                     expected_version=1, actor="key:support-bot")
    first = ledger.record_action(conversation_id=c.pk, idempotency_key=KEY, name="issue_refund",
                                 result={"credit_id": "SC-99120"})
    say("timeout; retrying")                                                        # 3
    ledger.record_snapshot(conversation_id=c.pk, position=4, repo="/srv/shop", commit="b" * 40, base=BASE,
                           files_changed=3, insertions=25, deletions=4)
    say("the refund went through")                                                  # 4
    retry = ledger.record_action(conversation_id=c.pk, idempotency_key=KEY, name="issue_refund",
                                 result={"status": "already_performed"})
    return c, first.action, retry.attempt


def page(client, c, query=""):
    r = client.get(f"/conversations/{c.pk}/{query}")
    assert r.status_code == 200
    return r.content.decode()


def test_an_auditor_sees_the_task_state_with_its_history(client, ticket):
    c, _, _ = ticket
    _login(client, AUDITOR)
    html = page(client, c)
    panel = html[html.index('id="task-state"'):html.index('id="actions-ledger"')]
    assert "version 2" in panel
    assert re.search(r"<dt>decision</dt><dd>refund</dd>", panel)
    assert re.search(r"<dt>amount_eur</dt><dd>149.0</dd>", panel)
    assert 'id="state-v1"' in panel and 'id="state-v2"' in panel
    assert ('<code class="path">/decision</code> <span class="op add">added</span> '
            '<span class="val">refund</span>') in panel
    assert "key:support-bot" in panel


def test_the_ledger_shows_the_retry_linked_to_its_original(client, ticket):
    c, first, retry = ticket
    _login(client, AUDITOR)
    html = page(client, c)
    table = html[html.index('id="actions-ledger"'):html.index('id="workspace"')]
    assert table.count(KEY) == 2
    row = table[table.index(f'id="action-{retry.id}"'):]
    assert "already_performed" in row[:row.index("</tr>")]
    assert f'href="#action-{first.id}"' in row[:row.index("</tr>")]


def test_actions_state_changes_and_snapshots_sit_in_the_timeline_where_recorded(client, ticket):
    c, first, retry = ticket
    _login(client, AUDITOR)
    html = page(client, c)
    record = html[html.index('id="record"'):]
    order = [m.group(1) for m in re.finditer(r'id="(p\d+|t-action-\d+|t-state-v\d+|t-snapshot-\d+)"', record)]
    snap1, snap2 = (f"t-snapshot-{s.id}" for s in WorkspaceSnapshot.objects.of(c.pk).order_by("position"))
    assert order == ["p0", snap1, "p1", "t-state-v1", "p2", "t-state-v2", f"t-action-{first.id}", "p3", snap2, "p4",
                     f"t-action-{retry.id}"]
    mark = record[record.index(f'id="t-action-{retry.id}"'):]
    mark = mark[:mark.index("</div>")]
    assert "already_performed" in mark and f"#t-action-{first.id}" in mark


def test_a_snapshot_shows_its_restore_command_and_the_change_since_the_last(client, ticket):
    c, _, _ = ticket
    _login(client, AUDITOR)
    html = page(client, c)
    assert f"git -C /srv/shop stash apply refs/memoryui/{c.pk}/4" in html
    assert "since #1: +1 file, +15 insertions, +3 deletions" in html


def test_marks_are_drawn_once_across_pages(client, ticket, monkeypatch):
    from conversations import views

    c, first, retry = ticket
    monkeypatch.setattr(views, "ROW_PAGE", 2)
    _login(client, AUDITOR)
    seen = []
    for after in (-1, 1, 3):
        html = page(client, c, f"?after={after}")
        record = html[html.index('id="record"'):]
        seen += re.findall(r'id="(p\d+|t-action-\d+|t-state-v\d+|t-snapshot-\d+)"', record)
    assert len(seen) == len(set(seen)) == 11


def test_a_fork_page_shows_what_it_carried(client, ticket):
    c, first, _ = ticket
    fork = store.fork_conversation(conversation_id=c.pk, position=2)
    _login(client, AUDITOR)
    html = page(client, fork)
    assert "version 2" in html and "from the parent" in html
    assert html.count(KEY) == 2  # the panel row and the timeline mark of the one copied entry


def test_a_page_without_ledger_rows_says_so(client):
    c = store.create_conversation(title="quiet")
    _login(client, AUDITOR)
    html = page(client, c)
    assert "No task state, actions or workspace snapshots recorded." in html
    assert 'id="task-state"' not in html and 'id="workspace"' not in html


def test_a_follow_poll_brings_the_marks_recorded_after_the_row_it_follows(client, ticket):
    c, first, retry = ticket
    _login(client, AUDITOR)
    # The page shows rows 0–4 and the retry after #4. The harness now records a state change
    # after #4 (no new row yet) and a snapshot for the turn about to start at #5.
    ledger.set_state(conversation_id=c.pk, state={"order": "48213", "decision": "refund", "done": True},
                     expected_version=2)
    snap = ledger.record_snapshot(conversation_id=c.pk, position=5, repo="/srv/shop", commit="c" * 40, base=BASE,
                                  files_changed=1, insertions=1, deletions=0).snapshot
    follow = client.get(f"/conversations/{c.pk}/?after=4&follow=1", HTTP_HX_REQUEST="true",
                        HTTP_HX_TARGET="record-more").content.decode()
    order = re.findall(r'id="(p\d+|t-action-\d+|t-state-v\d+|t-snapshot-\d+)" data-after="(-?\d+)"', follow)
    # Every mark placed after #4, old or new: the page keeps those it already shows.
    assert order == [(f"t-action-{retry.id}", "4"), ("t-state-v3", "4"), (f"t-snapshot-{snap.id}", "4")]
    # Paging (no follow) still draws a mark on the page of the row it follows, once.
    more = client.get(f"/conversations/{c.pk}/?after=4", HTTP_HX_REQUEST="true",
                      HTTP_HX_TARGET="record-more").content.decode()
    assert "ledger-mark" not in more
