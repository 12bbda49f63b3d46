"""The facts store's invariants: recall's formula, the lifecycle, the database guards."""

import math
from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.db.utils import DatabaseError
from django.test import override_settings
from django.utils import timezone

from conversations.errors import Conflict, InvalidInput
from conversations.facts import recall as facts_recall
from conversations.facts import store as facts
from conversations.facts.models import Fact, FactEvent
from conversations.models import AuditEvent
from tests.helpers import approved_fact as approved

pytestmark = pytest.mark.django_db

T0 = timezone.now().replace(microsecond=0)


def set_times(fact, *, recorded_at=None, last_accessed_at=None, valid_from=None):
    # recorded_at is immutable (a database guard); tests move a fact in time
    # through its mutable last_accessed_at instead.
    fields = {k: v for k, v in {"last_accessed_at": last_accessed_at}.items() if v is not None}
    Fact.objects.filter(pk=fact.pk).update(**fields)


def ids(results):
    return [r.fact.pk for r in results]


# ---------------------------------------------------------------- formula


def test_it_computes_recency_from_hours():
    assert facts_recall.recency_of(T0, T0) == 1.0
    assert facts_recall.recency_of(T0, T0 + timedelta(hours=10)) == pytest.approx(0.995 ** 10)
    assert facts_recall.recency_of(T0 + timedelta(hours=1), T0) == 1.0  # never above 1


def test_it_normalises_min_max_and_equal_values_to_zero():
    assert facts_recall.normalise([2.0, 4.0, 3.0]) == [0.0, 1.0, 0.5]
    assert facts_recall.normalise([7.0, 7.0]) == [0.0, 0.0]
    assert facts_recall.normalise([1.0]) == [0.0]
    assert facts_recall.normalise([]) == []


def test_it_scores_by_recency_with_frozen_time():
    old = approved("old fact")
    new = approved("new fact")
    now = timezone.now() + timedelta(hours=100)
    set_times(old, last_accessed_at=now - timedelta(hours=50))
    set_times(new, last_accessed_at=now - timedelta(hours=2))
    got = facts_recall.recall(subject="cust:1", now=now)
    assert ids(got) == [new.pk, old.pk]
    assert got[0].parts.recency == 1.0 and got[1].parts.recency == 0.0
    # Equal importance and no query: those components rank nothing.
    assert got[0].parts.importance == 0.0 and got[0].parts.relevance == 0.0
    assert got[0].score == pytest.approx(1.0)


def test_it_normalises_recency_between_the_extremes():
    now = timezone.now() + timedelta(hours=100)
    a, b, c = approved("a"), approved("b"), approved("c")
    for f, h in ((a, 0), (b, 10), (c, 40)):
        set_times(f, last_accessed_at=now - timedelta(hours=h))
    got = {r.fact.pk: r.parts.recency for r in facts_recall.recall(subject="cust:1", now=now)}
    lo, hi, mid = 0.995 ** 40, 1.0, 0.995 ** 10
    assert got[b.pk] == pytest.approx((mid - lo) / (hi - lo))


def test_it_scores_importance_over_tenths():
    low, high, mid = approved("x", importance=2), approved("y", importance=10), approved("z", importance=6)
    now = timezone.now()
    for f in (low, high, mid):
        set_times(f, last_accessed_at=now)
    got = facts_recall.recall(subject="cust:1", now=now)
    assert ids(got) == [high.pk, mid.pk, low.pk]
    assert [r.parts.importance for r in got] == pytest.approx([1.0, 0.5, 0.0])


def test_it_ranks_by_relevance_to_the_query():
    a = approved("Prefers replacement over refund")
    b = approved("Lives in Leeds with two cats")
    c = approved("Asked about a refund once")
    now = timezone.now()
    for f in (a, b, c):
        set_times(f, last_accessed_at=now)
    got = facts_recall.recall(subject="cust:1", query="refund replacement", now=now)
    assert ids(got)[0] == a.pk
    assert ids(got)[-1] == b.pk
    parts = {r.fact.pk: r.parts.relevance for r in got}
    assert parts[a.pk] == 1.0 and parts[b.pk] == 0.0 and 0.0 < parts[c.pk] < 1.0


def test_it_survives_fts_syntax_in_a_query():
    approved("Likes tea")
    got = facts_recall.recall(subject="cust:1", query='tea" OR NEAR( * AND -:')
    assert len(got) == 1


def test_it_applies_the_weights_from_settings():
    recent_unimportant = approved("r", importance=1)
    old_important = approved("o", importance=10)
    now = timezone.now() + timedelta(hours=10)
    set_times(recent_unimportant, last_accessed_at=now)
    set_times(old_important, last_accessed_at=now - timedelta(hours=200))
    with override_settings(MEMORYUI_RECALL_WEIGHTS={"recency": 3, "importance": 1, "relevance": 1}):
        got = facts_recall.recall(subject="cust:1", now=now)
        assert ids(got) == [recent_unimportant.pk, old_important.pk]
        assert got[0].score == pytest.approx(3.0)
    with override_settings(MEMORYUI_RECALL_WEIGHTS={"recency": 1, "importance": 2, "relevance": 1}):
        # The first recall reinforced both (last access = now): recency ties now.
        got = facts_recall.recall(subject="cust:1", now=now + timedelta(hours=1))
        assert ids(got) == [old_important.pk, recent_unimportant.pk]
        assert got[0].score == pytest.approx(2.0)


def test_it_reinforces_what_it_returns():
    a, b = approved("a", importance=9), approved("b", importance=1)
    now = timezone.now() + timedelta(hours=5)
    Fact.objects.filter(pk__in=[a.pk, b.pk]).update(last_accessed_at=now - timedelta(hours=1))
    got = facts_recall.recall(subject="cust:1", limit=1, now=now, actor="key:agent")
    assert ids(got) == [a.pk]
    a.refresh_from_db()
    b.refresh_from_db()
    assert (a.access_count, a.last_accessed_at) == (1, now)
    assert (b.access_count, b.last_accessed_at) == (0, now - timedelta(hours=1))
    assert got[0].fact.access_count == 1
    event = FactEvent.objects.get(fact=a, kind="recalled")
    assert (event.actor, event.at) == ("key:agent", now)
    assert not FactEvent.objects.filter(fact=b, kind="recalled").exists()
    # Reinforcement raises recency: a recalled fact outranks an equal one not recalled.
    c = approved("c", importance=9)
    later = now + timedelta(hours=1)
    Fact.objects.filter(pk=c.pk).update(last_accessed_at=now - timedelta(hours=30))
    assert ids(facts_recall.recall(subject="cust:1", limit=2, now=later))[0] == a.pk


def test_it_keeps_subjects_apart():
    approved("mine", subject="cust:1")
    approved("theirs", subject="cust:2")
    assert [r.fact.text for r in facts_recall.recall(subject="cust:1", query="theirs mine")] == ["mine"]


def test_it_rejects_bad_recall_arguments():
    for kw in ({"subject": ""}, {"subject": "x", "limit": 0}, {"subject": "x", "limit": 1000},
               {"subject": "x", "query": 5}):
        with pytest.raises(InvalidInput):
            facts_recall.recall(**kw)


# ---------------------------------------------------------------- lifecycle


def test_it_never_recalls_a_proposal():
    facts.propose_fact(subject="cust:1", text="p", importance=5, created_by="k")
    assert facts_recall.recall(subject="cust:1") == []


def test_it_never_recalls_a_rejected_fact():
    f = facts.propose_fact(subject="cust:1", text="p", importance=5, created_by="k")
    facts.reject_fact(fact_id=f.pk, actor="user:rev", reason="hearsay")
    assert facts_recall.recall(subject="cust:1") == []
    assert FactEvent.objects.get(fact=f, kind="rejected").reason == "hearsay"


def test_it_never_recalls_an_expired_fact():
    f = approved("short-lived", retention_days=1)
    assert ids(facts_recall.recall(subject="cust:1")) == [f.pk]
    later = timezone.now() + timedelta(days=2)
    assert facts_recall.recall(subject="cust:1", now=later) == []
    assert facts.expire_due(now=later) == 1
    assert facts.expire_due(now=later) == 0  # one event, however often it runs
    assert FactEvent.objects.filter(fact=f, kind="expired").count() == 1


def test_it_sets_a_default_expiry_and_lets_the_caller_override_it():
    with override_settings(MEMORYUI_FACT_RETENTION_DAYS=10):
        f = facts.propose_fact(subject="s", text="t", importance=1, created_by="k")
    assert (f.expires_at - f.recorded_at).days == 10
    g = facts.propose_fact(subject="s", text="t", importance=1, created_by="k", retention_days=3)
    assert (g.expires_at - g.recorded_at).days == 3
    with pytest.raises(InvalidInput):
        facts.propose_fact(subject="s", text="t", importance=1, created_by="k", retention_days=3,
                           expires_at=timezone.now() + timedelta(days=1))


def test_it_drops_an_invalidated_fact_from_its_invalid_at():
    f = approved("lives in Leeds")
    at = timezone.now() + timedelta(days=3)
    facts.invalidate_fact(fact_id=f.pk, actor="key:agent", reason="moving", invalid_at=at)
    assert ids(facts_recall.recall(subject="cust:1", now=at - timedelta(seconds=1))) == [f.pk]
    assert facts_recall.recall(subject="cust:1", now=at) == []
    with pytest.raises(Conflict):
        facts.invalidate_fact(fact_id=f.pk, actor="key:agent", reason="again", invalid_at=at)
    assert FactEvent.objects.filter(fact=f, kind="invalidated").count() == 1


def test_it_follows_a_supersession_chain():
    a = approved("lives in Leeds")
    b = facts.supersede_fact(fact_id=a.pk, actor="user:rev", text="lives in York", reason="moved")
    c = facts.supersede_fact(fact_id=b.pk, actor="user:rev", text="lives in York, Clifton", reason="more exact")
    assert ids(facts_recall.recall(subject="cust:1")) == [c.pk]
    a.refresh_from_db()
    b.refresh_from_db()
    assert (a.superseded_by_id, b.superseded_by_id, c.superseded_by_id) == (b.pk, c.pk, None)
    assert a.text == "lives in Leeds" and a.reason == "moved"
    with pytest.raises(Conflict):
        facts.supersede_fact(fact_id=a.pk, actor="user:rev", text="x", reason="y")


def test_it_edits_and_approves_by_superseding_the_proposal():
    p = facts.propose_fact(subject="cust:1", text="likes tee", importance=4, created_by="key:t")
    new = facts.edit_and_approve(fact_id=p.pk, actor="user:rev", text="likes tea", importance=6)
    p.refresh_from_db()
    assert p.text == "likes tee" and p.superseded_by_id == new.pk
    assert (new.status, new.text, new.importance, new.category) == ("approved", "likes tea", 6, p.category)
    assert not Fact.objects.pending().exists()
    assert ids(facts_recall.recall(subject="cust:1")) == [new.pk]
    assert AuditEvent.objects.filter(action="fact.edited_and_approved", target_id=str(p.pk)).exists()


def test_it_reviews_only_proposals():
    f = approved("x")
    for action in (
        lambda: facts.approve_fact(fact_id=f.pk, actor="u"),
        lambda: facts.reject_fact(fact_id=f.pk, actor="u", reason="r"),
        lambda: facts.edit_and_approve(fact_id=f.pk, actor="u", text="y"),
    ):
        with pytest.raises(Conflict):
            action()
    assert FactEvent.objects.filter(fact=f).count() == 2


def test_it_needs_a_reason_to_reject():
    f = facts.propose_fact(subject="cust:1", text="p", importance=5, created_by="k")
    with pytest.raises(InvalidInput):
        facts.reject_fact(fact_id=f.pk, actor="u", reason="  ")
    f.refresh_from_db()
    assert f.status == "proposed"


def test_it_audits_reviews_without_fact_text():
    f = facts.propose_fact(subject="cust:1", text="secret words", importance=5, created_by="k")
    facts.approve_fact(fact_id=f.pk, actor="user:rev")
    event = AuditEvent.objects.get(action="fact.approved")
    assert (event.actor, event.target_id) == ("user:rev", str(f.pk))
    assert "secret" not in str(event.detail) and "cust:1" not in str(event.detail)


def test_it_shows_what_was_on_record_and_what_was_true():
    a = approved("lives in Leeds")
    t1 = timezone.now()
    b = facts.supersede_fact(fact_id=a.pk, actor="u", text="lives in York", reason="typo")
    c = approved("has a cat")
    t2 = timezone.now()
    facts.invalidate_fact(fact_id=c.pk, actor="u", reason="cat died", invalid_at=t2)
    assert set(Fact.objects.on_record_at(t1)) == {a}
    assert set(Fact.objects.on_record_at(t2)) == {b, c}
    assert set(Fact.objects.on_record_at(timezone.now())) == {b}
    # Valid time as known now: the cat stopped being true at t2.
    assert c in set(Fact.objects.believed_true_at(t2 - timedelta(microseconds=1)))
    assert c not in set(Fact.objects.believed_true_at(t2))


# ---------------------------------------------------------------- forgetting


@override_settings(MEMORYUI_FORGET_THRESHOLD=0.1, MEMORYUI_FACT_STRENGTH_CAP=3)
def test_it_lists_forgetting_candidates_by_retention():
    now = timezone.now() + timedelta(days=1)
    stale, fresh, strong = approved("stale"), approved("fresh"), approved("strong")
    Fact.objects.filter(pk=stale.pk).update(last_accessed_at=now - timedelta(days=5))
    Fact.objects.filter(pk=fresh.pk).update(last_accessed_at=now - timedelta(hours=1))
    # S = 1 + 50 capped at 3: after 5 days R = e^(−5/3) ≈ 0.19 stays above 0.1.
    Fact.objects.filter(pk=strong.pk).update(last_accessed_at=now - timedelta(days=5), access_count=50)
    found = facts_recall.forgetting_candidates(now=now)
    assert [f.pk for f, _ in found] == [stale.pk]
    assert found[0][1] == pytest.approx(math.exp(-5))
    facts.keep_fact(fact_id=stale.pk, actor="user:rev")
    assert facts_recall.forgetting_candidates(now=timezone.now() + timedelta(hours=1)) == []
    assert FactEvent.objects.filter(fact=stale, kind="kept").count() == 1


# ---------------------------------------------------------------- database guards


def _raw(sql, params=()):
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute(sql, params)


def test_the_database_refuses_to_update_a_fact_event():
    f = approved("x")
    with pytest.raises(DatabaseError):
        _raw("UPDATE facts_factevent SET reason = 'rewritten' WHERE fact_id = %s", [f.pk])
    with pytest.raises(DatabaseError):
        _raw("UPDATE facts_factevent SET kind = 'approved'")


def test_the_database_refuses_to_delete_a_fact_event():
    f = approved("x")
    with pytest.raises(DatabaseError):
        _raw("DELETE FROM facts_factevent WHERE fact_id = %s", [f.pk])
    assert FactEvent.objects.filter(fact=f).count() == 2


def test_the_database_refuses_to_edit_a_facts_words_or_delete_it():
    f = approved("x")
    with pytest.raises(DatabaseError):
        _raw("UPDATE facts_fact SET text = 'y' WHERE id = %s", [f.pk])
    with pytest.raises(DatabaseError):
        _raw("UPDATE facts_fact SET importance = 9 WHERE id = %s", [f.pk])
    with pytest.raises(DatabaseError):
        _raw("DELETE FROM facts_fact WHERE id = %s", [f.pk])
    f.refresh_from_db()
    assert (f.text, f.importance) == ("x", 5)


def test_the_expire_command_records_each_expiry_once(capsys):
    from datetime import timedelta as td

    from django.core.management import call_command

    f = approved("short", retention_days=1)
    Fact.objects.filter(pk=f.pk).update(expires_at=timezone.now() - td(seconds=1))
    call_command("expire_facts")
    call_command("expire_facts")
    assert "0 fact(s)" in capsys.readouterr().out
    event = FactEvent.objects.get(fact=f, kind="expired")
    assert event.actor == "system:expire_facts"


def test_it_returns_tuples_a_caller_can_unpack():
    f = approved("x")
    [(fact, score, parts, matched)] = facts_recall.recall(subject="cust:1")
    assert fact.pk == f.pk and score == 0.0 and matched == ()
    assert (parts.recency, parts.importance, parts.relevance) == (0.0, 0.0, 0.0)


@pytest.mark.parametrize("scope", ["one project", "every project"])
def test_recalls_candidates_come_from_an_index_in_one_project_or_in_every_one(scope):
    """A recall reads its subject's facts from an index, whether the caller acts in one project
    (a project's key) or in all of them (an all-projects key naming none), never the whole table."""
    from conversations import projects
    from conversations.facts.models import APPROVED
    from conversations.facts.recall import _hours_since_last_reference

    # A store of some size, its statistics gathered: the planners choose by them, and on a
    # table of a few rows any plan is as good as another.
    now = timezone.now()
    Fact.objects.bulk_create(
        Fact(project_id=projects.DEFAULT_PROJECT_ID, subject=f"cust:{n % 200}", subject_norm=f"cust:{n % 200}",
             text=f"fact {n}", category="preference", importance=5, status=APPROVED, valid_from=now,
             recorded_at=now, reviewed_at=now, reviewed_by="t", created_by="t")
        for n in range(4000))
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    chosen = projects.one(projects.DEFAULT_PROJECT_ID) if scope == "one project" else projects.EVERY
    with projects.scoped(chosen):
        qs = (Fact.objects.recallable(now).about("cust:7").annotate(hours=_hours_since_last_reference(now))
              .values_list("id", "importance", "hours", "vector__vector"))
        sql, params = qs.query.sql_with_params()
        with connection.cursor() as cursor:
            cursor.execute(("EXPLAIN QUERY PLAN " if connection.vendor == "sqlite" else "EXPLAIN ") + sql, params)
            plan = " / ".join(str(row[-1]) for row in cursor.fetchall())
    # An index that leads with the subject (or with the project, then the subject).
    expected = ("fact_recall_idx", "fact_subject_status_idx") if scope == "one project" else (
        "fact_recall_any_project_idx",)
    assert "SCAN facts_fact " not in plan + " " and "Seq Scan on facts_fact " not in plan + " " \
        and any(name in plan for name in expected), plan
