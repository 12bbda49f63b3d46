"""The Python client's `import_file`: a file sent to `POST /imports` as the body itself, its
options in the query string, against a live server (pytest-django's live_server).

A path is streamed from disk, a block at a time, on every try; bytes are sent as they are.
"""

import asyncio
import threading
from pathlib import Path

import pytest

from conversations.models import Conversation, Message
from memoryui_client import AsyncMemoryui, InvalidInput, Memoryui
from tests.api_support import make_key
from tests.test_client import FAST, DropFirstResponse
from tests.test_import_session_files import CHILD, PARENT, opencode_database

pytestmark = pytest.mark.django_db(transaction=True)

SESSION = Path(__file__).parent / "fixtures" / "formats" / "claude_code_session.jsonl"


@pytest.fixture
def key():
    return make_key(["read", "write"], name="import-file-test")


def stored() -> set:
    return {str(pk) for pk in Conversation.objects.values_list("pk", flat=True)}


def check_created(answer: dict) -> None:
    """What the answer says was created is what the store holds, the main conversation whole."""
    created = {c["id"]: c["messages"] for c in answer["created"]}
    assert set(created) == stored() and answer["conversation_id"] in created
    main = answer["conversation_id"]
    assert created[main] == Message.objects.of(main).count() > 0


def test_it_imports_a_file_streamed_from_disk_and_the_same_file_again_creates_nothing(live_server, key):
    with Memoryui(live_server.url, api_key=key, retries=FAST) as mui:
        first = mui.import_file(SESSION, namespace="from-disk", subject="customer:7")
        again = mui.import_file(str(SESSION), namespace="from-disk", subject="customer:7")

    assert first["format"] == "claude-code"
    check_created(first)
    conversation = Conversation.objects.get(pk=first["conversation_id"])
    assert (conversation.namespace, conversation.subject) == ("from-disk", "customer:7")
    assert (again["unchanged"], again["created"], again["conversation_id"]) == (True, [], first["conversation_id"])
    check_created(first)


def test_it_imports_an_opencode_database_from_a_path_or_as_bytes_alike(live_server, key, tmp_path):
    db = opencode_database(tmp_path / "opencode.db")
    with Memoryui(live_server.url, api_key=key, retries=FAST) as mui:
        mui.import_file(db, namespace="from-path")
        mui.import_file(db.read_bytes(), namespace="as-bytes", content_type="application/vnd.sqlite3")

    for namespace in ("from-path", "as-bytes"):
        parent = Conversation.objects.get(namespace=namespace, external_id=PARENT)
        child = Conversation.objects.get(namespace=namespace, external_id=CHILD)
        assert (child.parent_id, child.parent_relation) == (parent.pk, "subagent")
        assert Message.objects.of(parent.pk).count() > 0


def test_a_dry_run_in_the_query_string_writes_nothing_and_a_bad_option_is_refused(live_server, key):
    with Memoryui(live_server.url, api_key=key, retries=FAST) as mui:
        dry = mui.import_file(SESSION.read_bytes(), namespace="dry", dry_run=True)
        with pytest.raises(InvalidInput) as refused:
            mui.import_file(SESSION, format="no-such-format")

    assert dry["dry_run"] is True and dry["messages"] > 0
    assert not Conversation.objects.filter(namespace="dry").exists()
    assert refused.value.field == "format"


def test_a_lost_answer_sends_the_file_again_from_its_start_under_the_same_key(live_server, key):
    transport = DropFirstResponse()
    with Memoryui(live_server.url, api_key=key, retries=FAST, transport=transport) as lossy:
        answer = lossy.import_file(SESSION, namespace="lossy")

    assert transport.dropped == 1 and len(transport.sent) == 2
    assert len({r.headers["Idempotency-Key"] for r in transport.sent}) == 1
    assert [r.headers["Content-Length"] for r in transport.sent] == [str(SESSION.stat().st_size)] * 2
    check_created(answer)


def test_the_async_client_streams_the_file_too(live_server, key):
    async def run():
        async with AsyncMemoryui(live_server.url, api_key=key, retries=FAST) as mui:
            return await mui.import_file(SESSION, namespace="async")

    # In a thread of its own: Playwright's sync API may hold an event loop in this one.
    out = []
    thread = threading.Thread(target=lambda: out.append(asyncio.run(run())))
    thread.start()
    thread.join(60)
    assert out
    check_created(out[0])
