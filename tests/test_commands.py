import io

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import CommandError

from conversations import demo, reads
from conversations.facts import recall as facts_recall
from conversations.facts.models import Fact, FactEvent
from conversations.message_schema import message_text
from conversations.models import Checkpoint, Conversation
from conversations.roles import roles_of

pytestmark = pytest.mark.django_db


def run(*args, **env):
    out = io.StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def test_load_demo_fills_an_empty_database_with_its_conversations():
    out = run("load_demo", "--coding-turns", "40")
    assert "Loaded 7 demonstration conversations" in out
    by_title = {c.title: c for c in Conversation.objects.all()}
    ticket = by_title["Order #48213: blender arrived cracked"]
    kinds = {i.kind for i in reads.list_messages(ticket.pk).items}
    assert {"system", "user", "assistant", "tool", "thought", "note"} <= kinds
    assert ticket.subject
    coding = next(c for c in by_title.values() if c.title.startswith("Refactor billing"))
    assert Checkpoint.objects.filter(conversation=coding).exists()
    journal = next(c for c in by_title.values() if c.title.startswith("Night shift"))
    assert {"note", "thought", "heard", "said", "did", "woke"} <= {
        i.kind for i in reads.list_messages(journal.pk).items}
    fork = next(c for c in by_title.values() if c.parent_id and c.parent_relation == "fork")
    assert fork.parent_id == ticket.pk


def test_load_demo_adds_facts_in_every_review_state_with_real_sources():
    run("load_demo", "--coding-turns", "40")
    ticket = Conversation.objects.get(title="Order #48213: blender arrived cracked")
    coding = Conversation.objects.get(title__startswith="Refactor billing")
    maria = {f.text: f for f in Fact.objects.about(demo.SUPPORT_SUBJECT)}
    states = {text: f.state() for text, f in maria.items()}
    assert states == {
        "Prefers store credit when a card refund fails": "current",
        "Customer since 2021": "superseded",
        "Customer since 2 March 2021; no refunds before order 48213": "current",
        "Refunds go to her card ending 4417": "invalidated",
        "Likely to return items often": "rejected",
        "Card ending 4417 is expired": "proposed",
    }
    assert maria["Customer since 2021"].superseded_by == maria[
        "Customer since 2 March 2021; no refunds before order 48213"]
    assert maria["Refunds go to her card ending 4417"].reason
    # Sources are the messages the facts came from.
    credit = maria["Prefers store credit when a card refund fails"]
    expired = maria["Card ending 4417 is expired"]
    assert credit.source_conversation_id == expired.source_conversation_id == ticket.pk
    messages = {i.position: i for i in reads.list_messages(ticket.pk).items}
    assert messages[credit.source_position].kind == "note"
    assert messages[expired.source_position].kind == "tool" and "4417" in message_text(
        messages[expired.source_position].message)
    assert list(Fact.objects.pending().filter(subject=demo.SUPPORT_SUBJECT)) == [expired]
    assert {f.fact.text for f in facts_recall.recall(subject=demo.SUPPORT_SUBJECT)} == {
        "Prefers store credit when a card refund fails", "Customer since 2 March 2021; no refunds before order 48213"}
    payments = {f.text: f for f in Fact.objects.about("team:payments")}
    assert {t: f.state() for t, f in payments.items()} == {
        "Run the billing tests before every commit": "current",
        "VAT is summed over an invoice's lines, then rounded once (ROUND_HALF_UP), never rounded per line": "current",
        "The /invoices endpoint returns 500 on an empty cart": "proposed",
    }
    for fact in payments.values():
        assert fact.source_conversation_id == coding.pk
        assert 0 <= fact.source_position < coding.next_position
    assert FactEvent.objects.filter(kind="superseded").count() == 1
    assert FactEvent.objects.filter(kind="invalidated").count() == 1


def test_load_demo_leaves_a_database_with_data_alone():
    run("load_demo", "--coding-turns", "5")
    out = run("load_demo", "--coding-turns", "5")
    assert "already exist" in out
    assert Conversation.objects.count() == 8  # seven, and the Claude Agent SDK session's subagent


def test_the_default_demo_has_a_few_thousand_messages_in_the_coding_session():
    run("load_demo")
    coding = Conversation.objects.get(title__startswith="Refactor billing")
    assert 2000 <= coding.next_position <= 6000


def test_bootstrap_loads_the_demo_into_an_empty_database(monkeypatch):
    monkeypatch.setenv("MEMORYUI_ADMIN_PASSWORD", "a-long-chosen-password")
    out = run("bootstrap", "--coding-turns", "20")
    assert "loading demonstration data" in out
    assert Conversation.objects.count() == 8


def test_bootstrap_creates_the_admin_once_and_prints_a_random_password(monkeypatch):
    monkeypatch.delenv("MEMORYUI_ADMIN_PASSWORD", raising=False)
    Conversation.objects.create(title="exists")  # skip the demo load
    out = run("bootstrap")
    password = out.split("with password:")[1].split()[0]
    user = get_user_model().objects.get(username="admin")
    assert user.check_password(password)
    assert "admin" in roles_of(user)
    again = run("bootstrap")
    assert password not in again and "with password" not in again
    assert get_user_model().objects.count() == 1


def test_bootstrap_takes_the_password_from_the_environment(monkeypatch):
    monkeypatch.setenv("MEMORYUI_ADMIN_PASSWORD", "a-long-chosen-password")
    Conversation.objects.create(title="exists")  # no demo load
    out = run("bootstrap")
    assert "a-long-chosen-password" not in out
    assert get_user_model().objects.get(username="admin").check_password("a-long-chosen-password")


@pytest.mark.parametrize("role", ["auditor", "reviewer", "admin"])
def test_create_user_gives_the_role(role):
    out = run("create_user", "sam", "--role", role)
    assert "Password (shown once)" in out
    assert role in roles_of(get_user_model().objects.get(username="sam"))


def test_create_user_changes_an_existing_users_role():
    run("create_user", "sam", "--role", "auditor", "--password", "pw-123456789")
    run("create_user", "sam", "--role", "reviewer")
    user = get_user_model().objects.get(username="sam")
    assert "reviewer" in roles_of(user) and "auditor" not in roles_of(user)
    assert user.check_password("pw-123456789")


def test_create_user_rejects_an_unknown_role():
    with pytest.raises(CommandError):
        call_command("create_user", "sam", "--role", "owner")


def test_load_demo_gives_the_refund_ticket_its_task_state_and_a_retried_refund():
    from conversations.ledger.models import Action, TaskStateEvent, WorkspaceSnapshot

    run("load_demo", "--coding-turns", "40")
    ticket = Conversation.objects.get(title="Order #48213: blender arrived cracked")
    state = TaskStateEvent.objects.current(ticket.pk)
    assert {"order", "item", "amount_eur", "decision"} <= set(state.state_json)
    assert state.state_json["decision"] == "refund" and state.version == 4
    refunds = list(Action.objects.of(ticket.pk).order_by("id"))
    assert [(a.name, a.status) for a in refunds] == [("issue_refund", "performed"),
                                                      ("issue_refund", "already_performed")]
    assert refunds[0].idempotency_key == refunds[1].idempotency_key == demo.REFUND_KEY
    assert refunds[1].original_id == refunds[0].id and refunds[1].position > refunds[0].position
    messages = {i.position: i for i in reads.list_messages(ticket.pk).items}
    assert "TimeoutError" in messages[refunds[0].position].message.content
    assert "already_performed" in messages[refunds[1].position].message.content
    fork = Conversation.objects.get(parent_id=ticket.pk)
    assert TaskStateEvent.objects.current(fork.pk).state_json["decision"] == "replacement offered"
    coding = Conversation.objects.get(title__startswith="Refactor billing")
    assert WorkspaceSnapshot.objects.of(coding.pk).count() == 5
