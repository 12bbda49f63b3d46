"""The recall-by-meaning evaluation set (bench/meaning_set.py) is what its docstring says:
a paraphrase shares no content word with its fact, so full text cannot find it by a shared
word; and a named query shares only its name, which at least one other fact of the subject
holds too, so the name alone cannot pick the fact; an identifier's query shares only its
identifier, which no other fact holds. A query edited carelessly would
measure something else without anyone noticing."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))

from meaning_set import IDENTIFIERS, NAMED, SET, content_words, shared_words  # noqa: E402


def test_the_set_has_the_size_the_evaluation_promises():
    assert len(SET) == 8 and sum(len(items) for items in SET.values()) >= 100
    parts = (*SET.values(), *NAMED.values(), *IDENTIFIERS.values())
    assert all(len(items) == len({fact for fact, _ in items}) for items in parts)


@pytest.mark.parametrize("subject", sorted(SET))
def test_no_paraphrase_shares_a_content_word_with_its_fact(subject):
    shared = {fact: shared_words(fact, query) for fact, query in SET[subject] if shared_words(fact, query)}
    assert not shared


@pytest.mark.parametrize("subject", sorted(NAMED))
def test_a_named_query_shares_only_a_name_that_other_facts_hold_too(subject):
    facts = [fact for fact, _ in NAMED[subject]]
    for fact, query in NAMED[subject]:
        shared = shared_words(fact, query)
        assert shared, f"{query!r} names nothing of {fact!r}"
        for word in shared:
            others = [f for f in facts if f != fact and word in content_words(f)]
            assert others, f"{word!r} of {query!r} is in no other fact: the name alone would pick {fact!r}"


@pytest.mark.parametrize("subject", sorted(IDENTIFIERS))
def test_an_identifiers_query_shares_only_its_identifier_which_no_other_fact_holds(subject):
    facts = [fact for fact, _ in IDENTIFIERS[subject]]
    for fact, query in IDENTIFIERS[subject]:
        shared = shared_words(fact, query)
        assert len(shared) == 1, f"{query!r} shares {sorted(shared)} with {fact!r}, not one identifier"
        [word] = shared
        assert any(ch.isdigit() for ch in word), f"{word!r} of {query!r} is not an identifier"
        assert not [f for f in facts if f != fact and word in content_words(f)], f"{word!r} is in another fact"


def test_the_subjects_of_the_three_parts_are_distinct():
    assert not set(SET) & set(NAMED) and not set(SET) & set(IDENTIFIERS) and not set(NAMED) & set(IDENTIFIERS)


def test_the_folding_sees_a_shared_word_through_case_and_simple_endings():
    assert shared_words("Prefers refunds", "a REFUND") == {"refund"}
    assert shared_words("Ships orders daily", "ship an order") == {"ship", "order"}
    assert not shared_words("Allergic to peanuts", "nut allergy")
