"""The search index forgets what a deletion request deletes, down to the bytes of its files."""

import pytest
from django.db import connection

from conversations import store
from conversations.retention import erasure
from tests.retention_support import conversation, raw_bytes_of_database
from tests.search_support import fresh_word, index_bytes, into_the_index, waiting_rows

pytestmark = pytest.mark.django_db(transaction=True)

SUBJECT = "cust:search-erasure-1"
TERM = fresh_word()


@pytest.mark.parametrize("where", ["waiting", "indexed"])
def test_a_deletion_request_leaves_no_term_in_the_index_or_its_files(where):
    about = conversation(title="about", subject=SUBJECT, messages=0)
    store.append_message(conversation_id=about.pk, message={"kind": "user", "content": f"my code word is {TERM}"})
    kept = conversation(title="kept", subject="cust:other", messages=0)
    store.append_message(conversation_id=kept.pk, message={"kind": "user", "content": "a refund for someone else"})
    from conversations.search.reads import search_messages

    assert [h.position for h in search_messages(TERM).hits] == [0]
    if where == "indexed":
        into_the_index()
        assert [h.position for h in search_messages(TERM).hits] == [0]
        assert TERM.encode() in index_bytes()  # the check below is not vacuous: the index held it
    else:  # SQLite: still waiting to enter the index, which never held it
        assert waiting_rows() == (2 if connection.vendor == "sqlite" else 0)

    receipt = erasure.execute_deletion(subject=SUBJECT, actor="user:boss")

    assert receipt.verification["status"] == "verified"
    assert search_messages(TERM).hits == []
    assert [h.conversation_id for h in search_messages("refund").hits] == [kept.pk]
    assert TERM.encode() not in index_bytes()
    assert TERM.encode() not in raw_bytes_of_database()
    assert waiting_rows() == (1 if where == "waiting" and connection.vendor == "sqlite" else 0)
