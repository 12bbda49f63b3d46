"""Beside each proposal: the subject's approved facts, likely duplicates flagged."""

import pytest

from conversations.facts import duplicates
from conversations.facts import store as facts

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("a, b, alike", [
    ("Prefers replacements over refunds", "prefers replacements over refunds.", True),
    ("Lives in Leeds", "Lives in Leeds, UK", True),
    ("Prefers a replacement rather than a refund", "Prefers replacements over refunds", True),
    ("Lives in Leeds", "Orders on Mondays", False),
    ("Prefers replacements over refunds", "Prefers email over phone calls", False),
    ("Is angry", "Is happy", False),
])
def test_similarity_flags_the_same_fact_in_other_words(a, b, alike):
    assert (duplicates.similarity(a, b) >= duplicates.DUPLICATE_AT) is alike
    assert duplicates.similarity(a, b) == duplicates.similarity(b, a)


def test_same_words_after_normalising_are_exactly_alike():
    assert duplicates.similarity("Café  owner!", "café owner") == 1.0
    assert duplicates.similarity("", "x") == 0.0


def approve(text, subject="cust:7", importance=5):
    f = facts.propose_fact(subject=subject, text=text, importance=importance, created_by="key:agent")
    return facts.approve_fact(fact_id=f.pk, actor="user:rev")


def test_it_lists_the_subjects_current_facts_duplicates_first():
    same = approve("Prefers replacements over refunds", importance=2)
    others = [approve(f"Other fact number {i}", importance=9) for i in range(7)]
    approve("Prefers replacements over refunds", subject="cust:8")  # another subject: never shown
    gone = approve("Prefers replacement over refund, always")
    facts.invalidate_fact(fact_id=gone.pk, actor="user:rev", reason="changed")  # not current: not shown
    proposal = facts.propose_fact(subject="cust:7", text="Prefers replacements over refunds.", importance=5,
                                  created_by="key:agent")
    lonely = facts.propose_fact(subject="cust:9", text="Orders on Mondays", importance=5, created_by="key:agent")
    beside = duplicates.beside([proposal, lonely])
    known = beside[proposal.pk]
    assert known.total == 8
    assert [k.fact.pk for k in known.duplicates] == [same.pk]
    assert known.shown[0].fact.pk == same.pk and known.shown[0].score == 1.0
    assert len(known.shown) == duplicates.SHOWN
    assert {k.fact.pk for k in known.shown[1:]} <= {o.pk for o in others}
    assert beside[lonely.pk].total == 0 and beside[lonely.pk].shown == []


def test_it_finds_a_duplicate_among_many_facts_of_one_subject():
    for i in range(300):
        approve(f"Bought item {i} in store {i % 17}", importance=9)
    dup = approve("Lives in Leeds", importance=1)
    proposal = facts.propose_fact(subject="cust:7", text="Lives in Leeds, UK", importance=5, created_by="key:agent")
    known = duplicates.beside([proposal])[proposal.pk]
    assert [k.fact.pk for k in known.duplicates] == [dup.pk]


def test_it_finds_a_duplicate_by_meaning_money_back_against_refund():
    known = approve("Asked for a refund on order 7")
    approve("Prefers email to phone calls")
    proposal = facts.propose_fact(subject="cust:7", text="Wants their money back for order 7", importance=5,
                                  created_by="agent")
    beside = duplicates.beside([proposal])[proposal.pk]
    assert [k.fact.pk for k in beside.duplicates] == [known.pk]
    assert beside.duplicates[0].by_meaning
