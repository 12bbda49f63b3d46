"""Personal data is declared on the models (`personal_data`, conversations/personal.py), and
erasure reads it there: every text-like column of our models is classified, and a column
declared personal is sampled and searched for without a line of erasure changing."""

import dataclasses

import pytest
from django.apps import apps
from django.db import models
from django.test.utils import isolate_apps

from conversations import personal, projects, store
from conversations.facts.models import Fact, FactAccess, FactEvent, FactVector
from conversations.ledger import store as ledger
from conversations.ledger.models import Action
from conversations.models import Conversation
from conversations.owned import owned_tables
from conversations.personal import PersonalData
from conversations.retention import erasure, erasure_verify
from conversations.retention.models import DeletionReceipt, ErasedRow
from tests.retention_support import conversation, raw_bytes_of_database

SUBJECT = "cust:personal-data-3c9e"
MARKER = "Philippa Okonkwo-Lindqvist, 9 Heron Quay, asked to move her delivery to Thursday"


def our_models() -> list[type[models.Model]]:
    return [m for m in apps.get_models() if m._meta.app_config.name.startswith("conversations")]


def undeclared(monkeypatch, model, name: str) -> None:
    """`model` as if nobody had declared `name` searched: moved from `text` to `not_searched`."""
    own = model.__dict__["personal_data"]
    monkeypatch.setattr(model, "personal_data", dataclasses.replace(
        own, text=tuple(n for n in own.text if n != name), not_searched=(*own.not_searched, name)))


def declared_searched(monkeypatch, model, name: str) -> None:
    """`model` as if its `name` had been declared `text` (a new column, say)."""
    own = model.__dict__["personal_data"]
    monkeypatch.setattr(model, "personal_data", dataclasses.replace(
        own, text=(*own.text, name), not_searched=tuple(n for n in own.not_searched if n != name),
        not_personal=tuple(n for n in own.not_personal if n != name)))


@pytest.mark.database_independent
def test_every_text_like_column_of_our_models_is_classified():
    walked = our_models()
    # Not vacuous: the tables that hold conversations' and subjects' data are all walked.
    expected = {o.model for o in owned_tables()} | {Conversation, Fact, FactEvent, FactAccess, FactVector,
                                                    DeletionReceipt, ErasedRow}
    assert expected <= set(walked)
    problems = [p for model in walked for p in personal.classification_problems(model)]
    assert problems == [], "\n".join(problems)


@pytest.mark.database_independent
def test_it_names_the_model_and_column_nobody_classified():
    with isolate_apps("conversations"):
        class Note(models.Model):
            body = models.TextField()
            kind = models.CharField(max_length=16)
            blob = models.BinaryField()
            count = models.IntegerField()

            personal_data = PersonalData(text=("kind",), not_personal=("kind", "gone"))

            class Meta:
                app_label = "conversations"

            def __str__(self):
                return self.kind

        problems = personal.classification_problems(Note)
    assert any("conversations.Note.body (TextField) is not classified" in p for p in problems)
    assert any("conversations.Note.blob (BinaryField) is not classified" in p for p in problems)
    assert any("conversations.Note.gone" in p and "no column" in p for p in problems)
    assert any("conversations.Note.kind" in p and "two classes" in p for p in problems)
    assert not any(".count" in p for p in problems)  # a number holds no text
    with pytest.raises(TypeError):
        PersonalData(text="body")


@pytest.mark.database_independent
def test_a_declaration_on_an_abstract_base_counts_for_every_model_built_on_it():
    with isolate_apps("conversations"):
        class Sealed(models.Model):
            seal = models.BinaryField()
            personal_data = PersonalData(not_personal=("seal",))

            class Meta:
                abstract = True
                app_label = "conversations"

        class Entry(Sealed):
            words = models.TextField()
            personal_data = PersonalData(text=("words",))

            class Meta:
                app_label = "conversations"

            def __str__(self):
                return self.words

        assert personal.classification_problems(Entry) == []
    assert personal.declared(Entry) == PersonalData(text=("words",), not_personal=("seal",))


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("declared", [True, False], ids=["declared", "undeclared"])
def test_a_deletion_searches_for_what_an_owned_tables_declared_column_held(monkeypatch, declared):
    about = conversation(title="t", subject=SUBJECT, messages=1)
    ledger.record_action(conversation_id=about.pk, idempotency_key="k-1", name="note", result={"note": MARKER})
    if not declared:
        undeclared(monkeypatch, Action, "result")
    searched = []
    real_verify = erasure_verify.verify

    def spy(needles, *args, **kwargs):
        searched.extend(n for n in needles if isinstance(n, str))
        return real_verify(needles, *args, **kwargs)

    monkeypatch.setattr(erasure_verify, "verify", spy)
    receipt = erasure.execute_deletion(subject=SUBJECT, actor="user:dpo")

    assert any(n in MARKER and len(n) >= erasure.SNIPPET_MIN for n in searched) is declared
    assert receipt.verification["status"] == "verified", receipt.verification
    assert MARKER.encode() not in raw_bytes_of_database()


@pytest.mark.django_db
def test_a_column_declared_personal_is_searched_in_the_data_that_stays(monkeypatch):
    # `meta` is declared personal but not searched: a marker in a kept row is not seen there.
    store.create_conversation(title="kept", meta={"note": MARKER})
    assert erasure_verify._strings_in_live_data([MARKER]) == set()

    declared_searched(monkeypatch, Conversation, "meta")

    # Found where a deleted row's copy would be set aside, not claimed: no erasure code changed.
    assert erasure_verify._strings_in_live_data([MARKER]) == {MARKER}
    with projects.scoped(projects.one(projects.DEFAULT_PROJECT_ID)):
        assert erasure_verify.set_aside_in_view({MARKER}) == {MARKER}
    with projects.scoped(projects.one(projects.DEFAULT_PROJECT_ID + 1)):
        assert erasure_verify.set_aside_in_view({MARKER}) == set()  # another project's row
