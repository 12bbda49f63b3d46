"""Claude Code subagents of the newer layouts land under what spawned them, on every door, in any order.

The fixture is a session laid out as newer Claude Code versions keep one:
<project>/<session>.jsonl, an `Agent` call whose result names the agent only in its text
(subagents/agent-b7c8d9e0.jsonl), a workflow whose two agents live in
subagents/workflows/<run>/ with `.meta.json` sidecars naming the `Workflow` call, and a
compaction agent (subagents/agent-acompact-…) that wrote the checkpoint's summary. Each
lands at its call's row (the compaction agent: at its checkpoint), with no problem reported.
"""

import io
import json
import zipfile
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.test import Client

from conversations.imports import importer
from conversations.models import Checkpoint, Conversation, Message
from tests.api_support import Api, login_as, make_key

pytestmark = pytest.mark.django_db
ROOT = Path(__file__).parent / "fixtures" / "formats" / "claude_code_layouts"
PROJECT = ROOT / "-home-mira-atlas"
SESSION = "6e2f4a8c-1b3d-4f5e-9a7b-2c4d6e8f0a1b"
MAIN = PROJECT / f"{SESSION}.jsonl"
SUB = PROJECT / SESSION / "subagents"
AGENT = SUB / "agent-b7c8d9e0.jsonl"
COMPACT = SUB / "agent-acompact-9a8b7c.jsonl"
WORKFLOW = [SUB / "workflows" / "run_7f3a" / f"agent-{a}.jsonl" for a in ("c1d2e3f4", "d5e6f7a8")]
SUBAGENTS = [AGENT, COMPACT, *WORKFLOW]


def call_position(main, call_id: str) -> int:
    for position, content in Message.objects.filter(conversation=main, kind="assistant").order_by(
            "position").values_list("position", "content"):
        if any(c["id"] == call_id for c in json.loads(content).get("tool_calls", [])):
            return position
    raise AssertionError(call_id)


def assert_all_linked(namespace=PROJECT.name):
    main = Conversation.objects.get(namespace=namespace, external_id=SESSION)
    fold = Checkpoint.objects.get(conversation=main)
    expected = {"b7c8d9e0": call_position(main, "toolu_01AgentMap"),
                "c1d2e3f4": call_position(main, "toolu_01Workflow"),
                "d5e6f7a8": call_position(main, "toolu_01Workflow"),
                "acompact-9a8b7c": fold.message_position}
    for agent, position in expected.items():
        sub = Conversation.objects.get(namespace=namespace, external_id=f"{SESSION}/subagents/agent-{agent}")
        assert (sub.parent_id, sub.parent_relation, sub.forked_from_position) == (main.pk, "subagent", position), agent
    assert Conversation.objects.count() == 5


def run(*paths) -> str:
    out = io.StringIO()
    call_command("import", *[str(p) for p in paths], stdout=out, stderr=out)
    return out.getvalue()


def test_the_command_links_every_layout_from_the_folder_with_no_problem():
    out = run(ROOT)
    assert_all_linked()
    assert "0 problem(s), 0 failure(s)" in out


@pytest.mark.parametrize("order", ["subagents first", "session first"])
def test_the_command_links_every_layout_file_by_file_in_either_order(order):
    files = SUBAGENTS + [MAIN] if order == "subagents first" else [MAIN] + SUBAGENTS
    for path in files:
        out = run(path)
        assert "problem" not in out.split("\n")[0] or "0 problem(s)" in out
    assert_all_linked()


def test_the_page_links_every_layout_from_a_zip_of_the_project_folder():
    page = Client()
    login_as(page, "admin")
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for f in sorted(PROJECT.rglob("*")):
            if f.is_file():
                z.write(f, str(Path(PROJECT.name) / f.relative_to(PROJECT)))
    html = page.post("/admin/import/", {"file": SimpleUploadedFile("atlas.zip", buf.getvalue()),
                                        "format": "auto"}).content.decode()
    assert "Problems</h3>" not in html
    tokens = [t.split('"')[0] for t in html.split('name="token" value="')[1:]]
    names = [t.split('"')[0] for t in html.split('name="name" value="')[1:]]
    page.post("/admin/import/", {"token": tokens, "name": names, "confirm": "1", "format": "auto"})
    assert_all_linked()


def test_the_api_links_them_with_the_sidecar_sent_beside_the_content():
    api = Api(Client(), make_key(["read", "write"]))
    for path in [*SUBAGENTS, MAIN]:
        meta = path.with_name(path.name[: -len(".jsonl")] + ".meta.json")
        body = {"content": path.read_text(), "namespace": PROJECT.name}
        if meta.exists():
            body["sidecar"] = json.loads(meta.read_text())
        answer = api.post("/imports", body).json()
        assert not answer["problems"], (path.name, answer["problems"])
    assert_all_linked()


def test_the_session_store_door_links_them_from_entries_and_agent_metadata():
    api = Api(Client(), make_key(["read", "write"]))
    for path in [*SUBAGENTS, MAIN]:
        entries = [json.loads(line) for line in path.read_text().splitlines()]
        meta = path.with_name(path.name[: -len(".jsonl")] + ".meta.json")
        if meta.exists():
            entries.append({**json.loads(meta.read_text()), "type": "agent_metadata"})
        key = SESSION if path == MAIN else f"{SESSION}/subagents/agent-{path.stem.removeprefix('agent-')}"
        answer = api.post("/imports", {"entries": entries, "namespace": PROJECT.name, "external_id": key}).json()
        assert not answer["problems"], (path.name, answer["problems"])
    assert_all_linked()


def test_a_subagent_file_whose_lines_say_no_sidechain_is_still_its_sessions_subagent(tmp_path):
    """Lines without isSidechain (as the Agent tool writes them in newer versions): the path
    says it is a subagent of the session."""
    folder = tmp_path / PROJECT.name / SESSION / "subagents"
    folder.mkdir(parents=True)
    lines = [{**json.loads(line), "isSidechain": False} for line in AGENT.read_text().splitlines()]
    (folder / AGENT.name).write_text("".join(json.dumps(o) + "\n" for o in lines))
    (tmp_path / PROJECT.name / MAIN.name).write_text(MAIN.read_text())
    run(tmp_path / PROJECT.name)
    sub = Conversation.objects.get(external_id=f"{SESSION}/subagents/agent-b7c8d9e0")
    main = Conversation.objects.get(external_id=SESSION)
    assert (sub.parent_id, sub.forked_from_position) == (main.pk, call_position(main, "toolu_01AgentMap"))


def test_the_compaction_agent_reports_no_problem_of_its_own():
    result = importer.import_path(str(COMPACT))
    assert not result.problems and result.created[0]["relation"] == "subagent"
