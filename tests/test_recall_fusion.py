"""Recall's fusion of meaning and words (conversations/facts/recall.py, the default "lift"),
on both databases: a paraphrase is found by meaning, a rare shared word (a ticket number)
lifts its fact past neighbours the vectors barely tell apart, facts sharing the same words
keep the order their meaning gives them, and a word's rarity is counted among the caller's
own candidates, never another project's facts."""

import math

import pytest
from django.utils import timezone

from conversations import projects
from conversations.facts import recall as facts_recall
from conversations.facts import store as facts
from conversations.project_store import create_project
from tests.helpers import approved_fact as approved

pytestmark = pytest.mark.django_db


def test_a_paraphrase_is_found_by_meaning_and_says_so():
    refund = approved("Asked for a refund")
    approved("Lives in Lyon, France")
    approved("Allergic to peanuts")
    [first, *_] = facts_recall.recall(subject="cust:1", query="money back")
    assert first.fact.pk == refund.pk and first.matched == ("meaning",)
    [first, *_] = facts_recall.recall(subject="cust:1", query="peanuts")
    assert first.fact.text == "Allergic to peanuts" and set(first.matched) == {"words", "meaning"}


def test_a_rare_shared_word_lifts_its_fact_past_its_neighbours():
    """Hosts with sequential names, two of each kind: only the number tells a host from its
    neighbours, and only one fact holds it. Each query names the host and says the rest in
    other words. The vectors alone take a neighbour for some of them; the lift for none."""
    kinds = ("runs out of disk every Friday", "holds the billing database", "is owned by the payments team",
             "sends alerts to the night rota")
    hosts = {f"srv{4471 + n}": approved(f"Server srv{4471 + n} {kinds[n // 2]}", subject="hosts:ops")
             for n in range(8)}
    queries = {"srv4471": "srv4471 storage fills up weekly", "srv4472": "weekly full storage on srv4472",
               "srv4473": "srv4473 stores invoice records", "srv4474": "invoice records live on srv4474",
               "srv4475": "who maintains srv4475", "srv4476": "srv4476 belongs to checkout engineers",
               "srv4477": "srv4477 pages the overnight on-call", "srv4478": "overnight on-call gets srv4478 warnings"}
    now = timezone.now()
    missed_by_meaning = 0
    for host, query in queries.items():
        alone = facts_recall.recall(subject="hosts:ops", query=query, limit=3, now=now, fusion="meaning")
        missed_by_meaning += alone[0].fact.pk != hosts[host].pk
        got = facts_recall.recall(subject="hosts:ops", query=query, limit=3, now=now)
        assert got[0].fact.pk == hosts[host].pk, (query, [r.fact.text for r in got])
        assert "words" in got[0].matched and got[0].parts.words == 1.0
    assert missed_by_meaning >= 1  # else this test does not exercise the lift


def test_facts_holding_the_same_words_keep_the_order_their_meaning_gives_them():
    """Every Marco fact holds "Marco": the words lift them alike, so among them the fusion's
    order is the vectors' order, and each is ahead of every fact that does not name him."""
    for text in ("Marco works from Milan", "Marco is on leave in August", "Marco speaks Italian and Spanish",
                 "Marco handles shipping complaints", "Lena works from Berlin", "Lena speaks German and French"):
        approved(text, subject="team:support")
    now = timezone.now()
    for query in ("Marco languages", "where is Marco based", "Marco deals with delivery grievances"):
        by_meaning = facts_recall.recall(subject="team:support", query=query, limit=6, now=now, fusion="meaning")
        lifted = facts_recall.recall(subject="team:support", query=query, limit=6, now=now)
        marco = [r.fact.pk for r in by_meaning if r.fact.text.startswith("Marco")]
        assert [r.fact.pk for r in lifted if r.fact.text.startswith("Marco")] == marco, query
        assert [r.fact.text.startswith("Marco") for r in lifted][:4] == [True] * 4, query
        # Recency and importance are the same for all (same `now`, same importance): the
        # fusion's relevance among the Marco facts is the cosines' order, not flipped by them.
        assert [r.parts.words for r in lifted][:4] == [1.0] * 4


def test_a_words_rarity_is_counted_among_the_callers_candidates_only():
    """The rarity of a word is ln((N + 1) / (holders + 0.5)) over this subject's current facts
    in this project: stems match (refunds / refund), other subjects and projects' facts do
    not count, nor do proposals."""
    a, b = create_project(slug="lift-a"), create_project(slug="lift-b")
    with projects.scoped(projects.one(a.pk)):
        mine = [approved(text) for text in ("Wants a refund", "Lives in Lyon", "Refund was paid twice")]
        facts.propose_fact(subject="cust:1", text="refund pending review", importance=5, created_by="key:t")
        approved("refund of another subject", subject="cust:2")
    with projects.scoped(projects.one(b.pk)):
        for n in range(6):
            approved(f"refund number {n}")
    with projects.scoped(projects.one(a.pk)):
        ids = [f.pk for f in mine]
        rarity = facts_recall._rarity_of_shared_words("cust:1", ["refunds", "Lyon", "Tokyo"], ids)
    held_by_two, held_by_one = math.log(4 / 2.5), math.log(4 / 1.5)
    assert rarity == pytest.approx({mine[0].pk: held_by_two, mine[1].pk: held_by_one, mine[2].pk: held_by_two})
