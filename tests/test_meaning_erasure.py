"""A deletion request erases a subject's vectors (derived personal data) and proves it;
pruning takes them with their rows; exports hold none."""

import pytest

from conversations import store
from conversations.embeddings import worker
from conversations.export import export_stream
from conversations.facts import store as facts_store
from conversations.facts.models import FactVector
from conversations.retention import erasure
from conversations.search import meaning
from conversations.search.models import MessageVector
from tests.retention_support import conversation, raw_bytes_of_database

pytestmark = pytest.mark.django_db(transaction=True)

SUBJECT = "cust:meaning-erasure-1"


def test_a_deletion_request_removes_counts_and_verifies_the_subjects_vectors():
    about = conversation(title="about", subject=SUBJECT, messages=0)
    for text in ("I want my money back for the kettle", "my nut allergy is severe", "ship it to Lyon"):
        store.append_message(conversation_id=about.pk, message={"kind": "user", "content": text})
    kept = conversation(title="kept", subject="cust:other", messages=0)
    store.append_message(conversation_id=kept.pk, message={"kind": "user", "content": "a refund for someone else"})
    fact = facts_store.propose_fact(subject=SUBJECT, text="Allergic to peanuts", importance=5, created_by="t")
    worker.run_until_done()
    theirs = [bytes(v)[:32] for v in MessageVector.objects.filter(conversation_id=about.pk)
              .values_list("vector", flat=True)]
    theirs.append(bytes(FactVector.objects.get(fact=fact).vector)[:32])
    assert len(theirs) == 4 and all(v in raw_bytes_of_database() for v in theirs)  # not vacuous

    receipt = erasure.execute_deletion(subject=SUBJECT, actor="user:boss")

    assert receipt.verification["status"] == "verified"
    assert receipt.counts["search_messagevector"] == 3 and receipt.counts["fact_vectors"] == 1
    assert receipt.verification["vectors_checked"] == 4
    assert not MessageVector.objects.filter(conversation_id=about.pk).exists()
    assert MessageVector.objects.filter(conversation_id=kept.pk).count() == 1
    data = raw_bytes_of_database()
    assert not any(v in data for v in theirs)
    meaning.forget_codes()
    hits = meaning.search("refund", filters=meaning.reads.Filters()).hits
    assert {h.conversation_id for h in hits} == {kept.pk}


def test_a_prune_takes_the_vectors_with_their_rows():
    from conversations.retention import pruning
    from tests.retention_support import age

    old = conversation(title="old", subject="cust:old", messages=0)
    recent = conversation(title="recent", subject="cust:recent", messages=0)
    for c in (old, recent):
        store.append_message(conversation_id=c.pk, message={"kind": "user", "content": "my money back please"})
    worker.run_until_done()
    assert MessageVector.objects.filter(conversation_id=old.pk).count() == 1  # not vacuous
    age(old, 100)
    pruning.prune_older_than(days=90)
    assert not MessageVector.objects.filter(conversation_id=old.pk).exists()
    assert MessageVector.objects.filter(conversation_id=recent.pk).count() == 1
    assert {str(h.conversation_id) for h in meaning.search("refund").hits} == {str(recent.pk)}


def test_an_export_holds_no_vector():
    about = conversation(title="about", subject=SUBJECT, messages=0)
    store.append_message(conversation_id=about.pk, message={"kind": "user", "content": "money back please"})
    worker.run_until_done()
    vector = bytes(MessageVector.objects.get(conversation_id=about.pk).vector)
    for fmt in ("json", "jsonl", "markdown"):
        exported = "".join(export_stream(about.pk, fmt).chunks)
        assert "money back please" in exported
        assert "vector" not in exported and vector.hex() not in exported


def test_vectors_embedded_while_a_deletion_marked_their_conversation_are_not_written(monkeypatch):
    """The embedder reads and embeds a batch outside its transaction: a deletion request or a
    prune that marks the conversation meanwhile must win, or the vectors (with the erased
    conversation's id) would be written back after the deletion removed them."""
    from conversations.models import Conversation
    from conversations.search import meaning_queue

    about = conversation(title="about", subject=SUBJECT, messages=0)
    kept = conversation(title="kept", subject="cust:other", messages=0)
    for c in (about, kept):
        store.append_message(conversation_id=c.pk, message={"kind": "user", "content": "a refund for the kettle"})
    embedded = meaning_queue._embedded

    def marked_meanwhile(embedder, rows):
        found = embedded(embedder, rows)
        Conversation.everywhere.filter(pk=about.pk).update(deleting=True)  # as the deletion's first step does
        return found

    monkeypatch.setattr(meaning_queue, "_embedded", marked_meanwhile)
    worker.run_until_done()
    assert not MessageVector.objects.filter(conversation_id=about.pk).exists()
    assert MessageVector.objects.filter(conversation_id=kept.pk).count() == 1
    assert meaning_queue.waiting() == 0  # its entry is dropped, not retried forever
