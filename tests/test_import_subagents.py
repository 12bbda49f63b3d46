"""A Claude Code subagent lands under the call that spawned it, on every door, in any order.

The session is the Claude Agent SDK sample (conversations/frameworks/samples.py) laid
out as Claude Code keeps it: <project>/<session>.jsonl and
<project>/<session>/subagents/agent-<id>.jsonl. Whatever door the two files come
through (manage.py import with a folder, with both files, one by one; the upload page
with several files, with a zip, one by one; POST /api/v1/imports; the SessionStore's
entries), and whichever arrives first, the subagent's conversation ends up a child
of the session, relation "subagent", at the row of the Task call whose result names
the agent.
"""

import io
import json
import zipfile
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command

from conversations.frameworks.samples import AGENT_ID, claude_agent_session
from conversations.imports import importer
from conversations.models import AuditEvent, Conversation, Message
from tests.api_support import Api, login_as, make_key
from tests.claude_sdk_support import write_session_files

pytestmark = pytest.mark.django_db

SUBPATH = f"subagents/agent-{AGENT_ID}"


@pytest.fixture
def sample():
    return claude_agent_session()


@pytest.fixture
def files(tmp_path, sample):
    """(session file, subagent file) under tmp_path/projects/<project>/."""
    main = write_session_files(tmp_path, sample)
    return main, main.with_suffix("") / f"{SUBPATH}.jsonl"


@pytest.fixture
def writer(client):
    return Api(client, make_key(["read", "write"], name="writer"))


def task_position(conversation) -> int:
    for position, content in Message.objects.filter(conversation=conversation, kind="assistant").order_by(
            "position").values_list("position", "content"):
        if any(c["name"] == "Task" for c in json.loads(content).get("tool_calls", [])):
            return position
    raise AssertionError("no Task call in the session")


def assert_linked(sample, namespace):
    main = Conversation.objects.get(namespace=namespace, external_id=sample.session_id)
    agent = Conversation.objects.get(namespace=namespace, external_id=f"{sample.session_id}/{SUBPATH}")
    assert main.parent_id is None
    assert (agent.parent_id, agent.parent_relation, agent.forked_from_position) == (
        main.pk, "subagent", task_position(main))
    assert Conversation.objects.count() == 2
    return main, agent


def run_import(*paths):
    out = io.StringIO()
    call_command("import", *[str(p) for p in paths], stdout=out, stderr=io.StringIO())
    return out.getvalue()


# ---- manage.py import ------------------------------------------------------------------------


def test_it_links_the_subagent_when_the_command_gets_the_folder(files, sample):
    run_import(files[0].parent)
    assert_linked(sample, sample.project_key)


@pytest.mark.parametrize("order", ["subagent first", "session first"])
def test_it_links_the_subagent_when_the_command_gets_both_files(files, sample, order):
    main, sub = files
    run_import(*((sub, main) if order == "subagent first" else (main, sub)))
    assert_linked(sample, sample.project_key)


@pytest.mark.parametrize("order", ["subagent first", "session first"])
def test_it_links_the_subagent_when_the_command_gets_the_files_one_by_one(files, sample, order):
    main, sub = files
    for path in ((sub, main) if order == "subagent first" else (main, sub)):
        run_import(path)
    assert_linked(sample, sample.project_key)


def test_a_session_file_given_alone_brings_its_subagents(files, sample):
    out = run_import(files[0])
    assert_linked(sample, sample.project_key)
    assert f"agent-{AGENT_ID}.jsonl" in out
    assert "meta.json" not in out  # the sidecar is no transcript


def test_a_subagent_that_came_first_waits_unlinked_and_its_session_links_it_once(files, sample):
    main, sub = files
    run_import(sub)
    waiting = Conversation.objects.get(external_id=f"{sample.session_id}/{SUBPATH}")
    assert (waiting.parent_id, waiting.parent_relation, waiting.forked_from_position) == (None, "", None)
    run_import(main)
    _main, agent = assert_linked(sample, sample.project_key)
    # The link made later is its own audit event; importing again changes nothing.
    linked = AuditEvent.objects.filter(action="conversation.linked", target_id=str(agent.pk))
    assert linked.count() == 1 and linked.get().detail["forked_from_position"] == agent.forked_from_position
    run_import(main)
    run_import(sub)
    assert AuditEvent.objects.filter(action="conversation.linked").count() == 1
    assert_linked(sample, sample.project_key)


def test_a_session_that_grows_the_call_later_fills_the_position_once(tmp_path, sample):
    """The session is imported before it holds the Task call: the subagent gets its parent,
    its position unknown; the grown session file fills the position."""
    main, sub = write_session_files(tmp_path, sample), None
    sub = main.with_suffix("") / f"{SUBPATH}.jsonl"
    lines = main.read_text().splitlines(keepends=True)
    task = next(i for i, line in enumerate(lines) if '"name": "Task"' in line or '"name":"Task"' in line)
    main.write_text("".join(lines[:task]))
    run_import(main)
    run_import(sub)
    agent = Conversation.objects.get(external_id=f"{sample.session_id}/{SUBPATH}")
    session = Conversation.objects.get(external_id=sample.session_id)
    assert (agent.parent_id, agent.forked_from_position) == (session.pk, None)
    main.write_text("".join(lines))
    run_import(main)
    assert_linked(sample, sample.project_key)
    assert AuditEvent.objects.filter(action="conversation.linked").count() == 1


# ---- POST /api/v1/imports (content) and the SessionStore's entries ------------------------------


@pytest.mark.parametrize("order", ["subagent first", "session first"])
def test_it_links_the_subagent_through_the_api_in_any_order(files, sample, writer, order):
    main, sub = files
    for path in ((sub, main) if order == "subagent first" else (main, sub)):
        answer = writer.post("/imports", {"content": path.read_text(), "namespace": "proj"})
        assert answer.status_code == 201, answer.content
    assert_linked(sample, "proj")
    if order == "subagent first":
        assert [x["parent_position"] for x in answer.json()["linked"]] == [task_position(
            Conversation.objects.get(external_id=sample.session_id))]


@pytest.mark.parametrize("order", ["subagent first", "session first"])
def test_it_links_the_subagent_through_the_entries_door_in_any_order(sample, writer, order):
    streams = [(sample.session_id, sample.entries), (f"{sample.session_id}/{SUBPATH}", sample.subagents[SUBPATH])]
    for key, entries in (streams[::-1] if order == "subagent first" else streams):
        for i in range(0, len(entries), 5):
            answer = writer.post("/imports", {"format": "claude-code", "namespace": "proj", "external_id": key,
                                              "entries": entries[i:i + 5]})
            assert answer.status_code in (200, 201), answer.content
    assert_linked(sample, "proj")


@pytest.mark.parametrize("first", ["file", "entries"])
def test_a_file_and_the_entries_door_place_the_subagent_alike(files, sample, writer, first):
    main, sub = files
    if first == "file":
        writer.post("/imports", {"content": sub.read_text(), "namespace": "proj"})
        for i in range(0, len(sample.entries), 6):
            writer.post("/imports", {"format": "claude-code", "namespace": "proj", "external_id": sample.session_id,
                                     "entries": sample.entries[i:i + 6]})
    else:
        writer.post("/imports", {"format": "claude-code", "namespace": "proj",
                                 "external_id": f"{sample.session_id}/{SUBPATH}",
                                 "entries": sample.subagents[SUBPATH]})
        writer.post("/imports", {"content": main.read_text(), "namespace": "proj"})
    assert_linked(sample, "proj")
