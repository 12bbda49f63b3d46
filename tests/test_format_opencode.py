"""OpenCode sessions: storage files and database rows put together into one document per
session, steps as replies, tool parts as calls and results, a compaction as a checkpoint, a
task's child session named by its call. Pure parsing."""

import json
from pathlib import Path

import pytest

from conversations import formats
from conversations.formats import opencode
from conversations.formats.base import FormatError
from tests.drop_support import texts_of, unplaced
from tests.provider_oracle import invalid_renderings

pytestmark = pytest.mark.database_independent

STORAGE = Path(__file__).parent / "fixtures" / "formats" / "opencode" / "storage"
PARENT, CHILD = "ses_5a1b2c3d4ffeAbCdEfGhIjKlMn", "ses_5a1b2c9e0ffeSubAgentTaskXy"


def records():
    found = {"session": [], "message": [], "part": []}
    for path in sorted(STORAGE.rglob("*.json")):
        obj = json.loads(path.read_text())
        kind = opencode.kind_of(obj)
        if kind:
            found[kind].append(obj)
    return found


def documents() -> dict:
    found = records()
    return {d["info"]["id"]: d for d in opencode.assemble(found["session"], found["message"], found["part"])}


def rows(plan):
    return [r.message for r in plan.conversation("main").rows]


def test_storage_records_are_put_together_per_session_in_id_order():
    docs = documents()
    assert list(docs) == [PARENT, CHILD]
    parts = [p["id"] for m in docs[PARENT]["messages"] for p in m["parts"]]
    assert parts == sorted(parts)
    assert formats.detect(json.dumps(docs[PARENT])) == "opencode"


def test_each_step_is_its_reasoning_then_one_reply_with_its_calls_then_their_results():
    plan = formats.parse(json.dumps(documents()[PARENT]))
    kinds = [m["kind"] for m in rows(plan)]
    assert kinds[:9] == ["user", "thought", "assistant", "tool", "tool", "assistant", "tool", "tool", "assistant"]
    first = rows(plan)[2]
    assert [c["name"] for c in first["tool_calls"]] == ["read", "task"]
    assert first["meta"]["usage"] == {"input_tokens": 5200, "output_tokens": 244, "cache_read_input_tokens": 3000,
                                      "cache_creation_input_tokens": 800}
    assert first["meta"]["opencode"]["cost"] == 0.0123 and first["meta"]["model"] == "claude-sonnet-4-5"
    assert first["meta"]["opencode"]["spawned"] == [CHILD]
    assert rows(plan)[7]["is_error"] is True and "timed out" in rows(plan)[7]["content"]
    assert rows(plan)[0]["content"][1]["type"] == "image"


def test_a_compaction_is_a_checkpoint_before_the_request_with_the_summarys_text():
    plan = formats.parse(json.dumps(documents()[PARENT]))
    [fold] = plan.conversation("main").folds
    assert fold.position == 8 and fold.summary.startswith("Summary: invoice totals")
    assert "Summary: invoice totals" not in json.dumps(rows(plan))


def test_a_failed_reply_with_nothing_to_show_is_a_harness_row():
    last = rows(formats.parse(json.dumps(documents()[PARENT])))[-1]
    assert last["content"] == ("<local-command-stderr>MessageAbortedError: The operation was aborted."
                               "</local-command-stderr>")


def test_a_child_session_is_a_subagent_naming_its_parent():
    plan = formats.parse(json.dumps(documents()[CHILD]))
    main = plan.conversation("main")
    assert main.relation == "subagent" and main.meta["opencode"]["parent_session"] == PARENT
    assert plan.source_key == CHILD


def test_database_rows_make_the_same_documents_as_the_storage():
    found = records()

    def row(obj, *drop):
        return {k: v for k, v in obj.items() if k not in drop}

    sessions = [{"id": s["id"], "project_id": s["projectID"], "parent_id": s.get("parentID"), "slug": s.get("slug", ""),
                 "directory": s["directory"], "title": s["title"], "version": s["version"],
                 "time_created": s["time"]["created"], "time_updated": s["time"]["updated"]} for s in found["session"]]
    messages = [{"id": m["id"], "session_id": m["sessionID"], "data": json.dumps(row(m, "id", "sessionID"))}
                for m in found["message"]]
    parts = [{"id": p["id"], "message_id": p["messageID"], "session_id": p["sessionID"],
              "data": json.dumps(row(p, "id", "sessionID", "messageID"))} for p in found["part"]]
    docs = opencode.assemble(*opencode.database_records(sessions, messages, parts))
    from_storage = documents()
    for doc in docs:
        assert [r.text for r in formats.parse(json.dumps(doc)).conversation("main").rows] == \
            [r.text for r in formats.parse(json.dumps(from_storage[doc["info"]["id"]])).conversation("main").rows]


def test_nothing_is_dropped_and_every_view_is_valid():
    for sid, doc in documents().items():
        plan = formats.parse(json.dumps(doc))
        assert not plan.all_problems(), sid
        assert not unplaced(plan, texts_of(doc)), sid
        assert not invalid_renderings(None, rows(plan)), sid


def test_a_document_that_is_no_session_is_refused():
    with pytest.raises(FormatError):
        opencode.parse('{"info": {"id": "x"}}')
