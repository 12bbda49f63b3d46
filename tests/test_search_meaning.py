"""Search by meaning (conversations/search/meaning.py) and its API: mode=meaning and mode=both."""

import pytest

from conversations import plugins, project_store, projects, store
from conversations.embeddings import worker
from conversations.search import meaning
from conversations.search.models import MessageVector
from tests.api_support import error_of

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("answer_shapes")]


@pytest.fixture(autouse=True)
def fresh_codes():
    meaning.forget_codes()
    yield
    meaning.forget_codes()


@pytest.fixture
def chat():
    c = store.create_conversation(title="Order 7", subject="customer:42")
    for text in ("Where is my parcel?", "I would like my money back for the broken kettle",
                 "Can you ship it to Lyon instead?", "Thanks, that is all for today"):
        store.append_message(conversation_id=c.pk, message={"kind": "user", "content": text})
    return c


def test_a_row_is_found_by_meaning_before_and_after_it_is_embedded(reader, chat):
    first = reader.get("/search", {"q": "refund", "mode": "meaning"}).json()["items"]
    assert first[0]["position"] == 1 and first[0]["matched"] == ["meaning"] and first[0]["score"] > 0.3
    assert worker.run_once() >= 4
    assert not MessageVector.objects.filter(conversation_id=chat.pk).count() < 4
    again = reader.get("/search", {"q": "refund", "mode": "meaning"}).json()["items"]
    assert [(i["position"], i["score"]) for i in again] == [(i["position"], i["score"]) for i in first]


def test_words_alone_do_not_find_a_paraphrase_and_both_says_which_found_it(reader, chat):
    worker.run_once()
    assert reader.get("/search", {"q": "refund"}).json()["items"] == []
    both = reader.get("/search", {"q": "kettle refund", "mode": "both"}).json()["items"]
    assert both[0]["position"] == 1 and set(both[0]["matched"]) == {"words", "meaning"}


def test_a_fork_borrows_its_parents_vectors_and_adopts_them_when_the_parent_goes(reader, chat):
    worker.run_once()
    fork = store.fork_conversation(conversation_id=chat.pk, position=2)
    assert worker.run_once() == 0  # the copies are not embedded again
    hit = reader.get("/search", {"q": "refund", "mode": "meaning"}).json()["items"][0]
    assert {c["id"] for c in hit["conversations"]} == {str(chat.pk), str(fork.pk)}
    inside = reader.get("/search", {"q": "refund", "mode": "meaning", "conversation": str(fork.pk)}).json()["items"]
    assert inside[0]["conversation_id"] == str(fork.pk) and inside[0]["position"] == 1
    _delete(chat)
    assert worker.run_once() >= 3
    meaning.forget_codes()
    after = reader.get("/search", {"q": "refund", "mode": "meaning"}).json()["items"]
    assert after[0]["conversation_id"] == str(fork.pk) and after[0]["position"] == 1


def _delete(conversation):
    plugins.delete_conversation(conversation_id=conversation.pk, actor="test")


def test_filters_and_pages_apply(reader, chat):
    other = store.create_conversation(title="Other", subject="customer:7")
    store.append_message(conversation_id=other.pk, message={"kind": "user", "content": "please refund my money"})
    worker.run_once()
    only = reader.get("/search", {"q": "refund", "mode": "meaning", "subject": "customer:7"}).json()["items"]
    assert {i["conversation_id"] for i in only} == {str(other.pk)}
    page = reader.get("/search", {"q": "refund", "mode": "meaning", "limit": 1}).json()
    assert len(page["items"]) == 1 and page["next"]
    rest = reader.client.get(page["next_url"], headers={"Authorization": f"Bearer {reader.key}"}).json()
    assert rest["items"] and rest["items"][0]["position"] != page["items"][0]["position"] or \
        rest["items"][0]["conversation_id"] != page["items"][0]["conversation_id"]


def test_a_bad_mode_is_a_400(reader, chat):
    r = reader.get("/search", {"q": "refund", "mode": "vibes"})
    assert r.status_code == 400 and error_of(r)["field"] == "mode"


def test_meaning_search_never_crosses_projects(reader, chat):
    other = project_store.create_project(slug="other", name="Other")
    with projects.scoped(projects.one(other.pk)):
        theirs = store.create_conversation(title="Theirs", subject="customer:42")
        store.append_message(conversation_id=theirs.pk, message={"kind": "user", "content": "money back please"})
    worker.run_once()
    with projects.scoped(projects.one(other.pk)):
        found = meaning.search("refund", filters=meaning.reads.Filters())
        assert {h.conversation_id for h in found.hits} == {theirs.pk}
    with projects.scoped(projects.one(projects.DEFAULT_PROJECT_ID)):
        found = meaning.search("refund", filters=meaning.reads.Filters())
        assert theirs.pk not in {h.conversation_id for h in found.hits} and found.hits


def test_the_page_finds_by_meaning_and_says_so(client, chat):
    from tests.api_support import login_as

    login_as(client, "auditor")
    r = client.get("/search/", {"q": "refund", "mode": "meaning"})
    assert r.status_code == 200
    html = r.content.decode()
    assert "money back for the broken kettle" in html and "by meaning" in html
    assert 'value="meaning" selected' in html
