import pytest
from django.db import connection, transaction

from conversations.facts import erasure
from conversations.facts import store as facts
from conversations.facts.models import Fact, FactAccess, FactEvent

pytestmark = pytest.mark.django_db


def _fts_hits(word):
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute("SELECT count(*) FROM facts_fact_fts WHERE facts_fact_fts MATCH %s", [word])
        else:
            cursor.execute(
                "SELECT count(*) FROM facts_fact WHERE text_tsv @@ plainto_tsquery('english', %s)",
                [word],
            )
        return cursor.fetchone()[0]


@pytest.fixture
def two_subjects():
    a = facts.propose_fact(subject="cust:a", text="Prefers zebrafish deliveries", importance=5, created_by="key:t")
    facts.approve_fact(fact_id=a.pk, actor="user:r")
    facts.supersede_fact(fact_id=a.pk, actor="user:r", text="Prefers zebrafish on Mondays", reason="more exact")
    facts.propose_fact(subject="cust:a", text="Lives near the harbour", importance=3, created_by="key:t")
    facts.record_access(actor="user:r", subject="cust:a")
    b = facts.propose_fact(subject="cust:b", text="Likes zebrafish too", importance=4, created_by="key:t")
    facts.record_access(actor="user:r", subject="cust:b")
    return a, b


def test_it_previews_counts_and_samples(two_subjects):
    preview = erasure.preview_subject("cust:a")
    assert preview["facts"] == 3
    assert preview["fact_events"] == 5  # proposed, approved, superseded; approved (new); proposed
    assert preview["access_log"] == 1
    assert "Prefers zebrafish deliveries" in preview["sample_texts"]


def test_it_erases_one_subject_inside_the_callers_transaction(two_subjects):
    before = erasure.preview_subject("cust:a")
    with transaction.atomic():
        result = erasure.erase_subject("cust:a")
    assert result == {k: before[k] for k in ("facts", "fact_events", "access_log", "fact_vectors")}
    assert not Fact.objects.about("cust:a").exists()
    assert not FactEvent.objects.of_subject("cust:a").exists()
    assert not FactAccess.objects.filter(subject="cust:a").exists()
    assert Fact.objects.about("cust:b").count() == 1
    assert FactAccess.objects.filter(subject="cust:b").count() == 1
    assert _fts_hits("harbour") == 0
    assert _fts_hits("zebrafish") == 1


def test_it_rolls_back_with_the_caller(two_subjects):
    with pytest.raises(RuntimeError):
        with transaction.atomic():
            erasure.erase_subject("cust:a")
            raise RuntimeError("receipt failed")
    assert Fact.objects.about("cust:a").count() == 3
    assert _fts_hits("harbour") == 1


def test_it_erases_a_subject_with_nothing():
    assert erasure.erase_subject("nobody") == {"facts": 0, "fact_events": 0, "access_log": 0, "fact_vectors": 0}
