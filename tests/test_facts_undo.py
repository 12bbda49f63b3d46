"""Undoing a review: a new event and an audit row, never an edit in place or a delete,
and only while nothing has happened to the fact since the decision."""

import pytest
from django.db import connection

from conversations.errors import Conflict
from conversations.facts import recall as facts_recall
from conversations.facts import store as facts
from conversations.facts.models import Fact, FactEvent
from conversations.models import AuditEvent

pytestmark = pytest.mark.django_db


def propose(text="Prefers replacements over refunds", subject="cust:1"):
    return facts.propose_fact(subject=subject, text=text, importance=5, created_by="key:agent")


def kinds(fact):
    return list(FactEvent.objects.filter(fact=fact).order_by("id").values_list("kind", flat=True))


def test_undoing_an_approval_puts_the_proposal_back_in_the_queue():
    p = propose()
    facts.approve_fact(fact_id=p.pk, actor="user:rita")
    approval = FactEvent.objects.get(fact=p, kind="approved")
    back = facts.undo_review(fact_id=p.pk, actor="user:rita")
    assert (back.pk, back.status, back.reviewed_at, back.reviewed_by) == (p.pk, "proposed", None, "")
    assert list(Fact.objects.pending()) == [back]
    assert facts_recall.recall(subject="cust:1") == []
    # The approval stays in the history; the undo is one more event pointing at it.
    assert kinds(p) == ["proposed", "approved", "proposed"]
    undo = FactEvent.objects.filter(fact=p).latest("id")
    assert (undo.actor, undo.reason, undo.detail) == ("user:rita", "review undone",
                                                      {"undoes": approval.pk, "undone": "approved"})
    audit = AuditEvent.objects.get(action="fact.review_undone")
    assert (audit.target_type, audit.target_id, audit.detail["undone"]) == ("fact", str(p.pk), "approved")
    # It can be decided again, differently.
    facts.reject_fact(fact_id=p.pk, actor="user:rita", reason="on second thoughts, hearsay")
    assert Fact.objects.get(pk=p.pk).status == "rejected"


def test_undoing_a_rejection_clears_its_reason_but_keeps_it_in_the_history():
    p = propose()
    facts.reject_fact(fact_id=p.pk, actor="user:rita", reason="hearsay")
    back = facts.undo_review(fact_id=p.pk, actor="user:sam")
    assert (back.status, back.reason) == ("proposed", "")
    assert FactEvent.objects.get(fact=p, kind="rejected").reason == "hearsay"
    assert FactEvent.objects.filter(fact=p).latest("id").detail["undone"] == "rejected"


@pytest.mark.parametrize("by", ["proposal", "replacement"])
def test_undoing_an_edit_withdraws_the_new_fact_and_restores_the_proposal(by):
    p = propose("Lives in Leds")
    new = facts.edit_and_approve(fact_id=p.pk, actor="user:rita", text="Lives in Leeds")
    back = facts.undo_review(fact_id=(p if by == "proposal" else new).pk, actor="user:rita")
    assert back.pk == p.pk
    assert list(Fact.objects.pending()) == [back]
    assert (back.superseded_by_id, back.superseded_at) == (None, None)
    withdrawn = Fact.objects.get(pk=new.pk)
    assert (withdrawn.status, withdrawn.text) == ("rejected", "Lives in Leeds")  # kept on record, never recalled
    assert facts_recall.recall(subject="cust:1") == []
    assert kinds(withdrawn) == ["approved", "rejected"]
    assert kinds(p) == ["proposed", "superseded", "proposed"]
    assert FactEvent.objects.filter(fact=p).latest("id").detail == {
        "undoes": FactEvent.objects.get(fact=p, kind="superseded").pk, "undone": "edited", "withdrawn_fact": new.pk}
    # Nothing more to undo on either fact.
    for fact in (p, withdrawn):
        with pytest.raises(Conflict):
            facts.undo_review(fact_id=fact.pk, actor="user:rita")


def test_a_recalled_fact_cannot_be_undone_only_invalidated():
    p = propose()
    facts.approve_fact(fact_id=p.pk, actor="user:rita")
    assert len(facts_recall.recall(subject="cust:1")) == 1
    with pytest.raises(Conflict) as exc:
        facts.undo_review(fact_id=p.pk, actor="user:rita")
    assert "recalled" in exc.value.message and "invalidate" in exc.value.message
    assert Fact.objects.get(pk=p.pk).status == "approved"
    assert not AuditEvent.objects.filter(action="fact.review_undone").exists()


def test_an_edit_whose_new_fact_was_recalled_cannot_be_undone():
    p = propose("Lives in Leds")
    facts.edit_and_approve(fact_id=p.pk, actor="user:rita", text="Lives in Leeds")
    facts_recall.recall(subject="cust:1")
    with pytest.raises(Conflict):
        facts.undo_review(fact_id=p.pk, actor="user:rita")


def test_there_is_nothing_to_undo_on_a_proposal_or_a_superseded_fact():
    p = propose()
    with pytest.raises(Conflict) as exc:
        facts.undo_review(fact_id=p.pk, actor="user:rita")
    assert "waiting for review" in exc.value.message
    facts.approve_fact(fact_id=p.pk, actor="user:rita")
    facts.supersede_fact(fact_id=p.pk, actor="user:rita", text="Prefers store credit", reason="changed")
    # A supersession on the subject page is not a review: neither fact can be "undone".
    for fact in Fact.objects.all():
        with pytest.raises(Conflict):
            facts.undo_review(fact_id=fact.pk, actor="user:rita")


def test_undo_is_an_event_not_an_edit_the_database_would_refuse_one():
    p = propose()
    facts.approve_fact(fact_id=p.pk, actor="user:rita")
    facts.undo_review(fact_id=p.pk, actor="user:rita")
    # The guards still stand: the history cannot be rewritten to hide the undo.
    from django.db import transaction
    from django.db.utils import DatabaseError
    with pytest.raises(DatabaseError), transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("UPDATE facts_factevent SET kind = 'approved' WHERE fact_id = %s", [p.pk])
