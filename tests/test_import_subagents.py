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
from tests.api_support import login_as
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


# ---- the upload page: several files, a zip, one by one ---------------------------------------


@pytest.fixture
def admin(client, settings, tmp_path):
    settings.DATA_DIR = tmp_path / "data"
    settings.DATA_DIR.mkdir(mode=0o700)
    login_as(client, "admin")
    return client


def preview(client, *uploads, namespace="proj"):
    response = client.post("/admin/import/", {"file": list(uploads), "format": "auto", "namespace": namespace})
    return response, response.content.decode()


def confirm_all(client, html, namespace="proj"):
    tokens = [part.split('"')[0] for part in html.split('name="token" value="')[1:]]
    names = [part.split('"')[0] for part in html.split('name="name" value="')[1:]]
    response = client.post("/admin/import/", {"token": tokens, "name": names, "confirm": "1", "format": "auto",
                                              "namespace": namespace})
    assert response.status_code == 200, response.content.decode()[-3000:]
    return response.content.decode()


def upload_of(path: Path) -> SimpleUploadedFile:
    return SimpleUploadedFile(path.name, path.read_bytes())


def zip_of(folder: Path, name="project.zip", *, root: Path | None = None) -> SimpleUploadedFile:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as z:
        for f in sorted(folder.rglob("*")):
            if f.is_file():
                z.write(f, str(f.relative_to(root or folder.parent)))
    return SimpleUploadedFile(name, buffer.getvalue())


def uploads_left(settings) -> list[Path]:
    return sorted((Path(settings.DATA_DIR) / "uploads").glob("*"))


@pytest.mark.parametrize("order", ["subagent first", "session first"])
def test_the_page_takes_several_files_at_once_and_links_the_subagent(admin, files, sample, order):
    main, sub = files
    response, html = preview(admin, *[upload_of(p) for p in ((sub, main) if order == "subagent first"
                                                                  else (main, sub))])
    assert response.status_code == 200, html[-3000:]
    assert 'id="preview-created">2<' in html and "2 files" in html and "Import 2 conversations now" in html
    assert "under its session in these files" in html
    assert not Conversation.objects.exists()
    confirm_all(admin, html)
    assert_linked(sample, "proj")


@pytest.mark.parametrize("order", ["subagent first", "session first"])
def test_the_page_links_the_subagent_uploaded_one_by_one(admin, files, sample, order):
    main, sub = files
    for path in ((sub, main) if order == "subagent first" else (main, sub)):
        _response, html = preview(admin, upload_of(path))
        if path == main and order == "subagent first":
            assert "Links 1 subagent imported before" in html
        if path == sub and order == "subagent first":
            assert "waiting for its session" in html
        confirm_all(admin, html)
    assert_linked(sample, "proj")


@pytest.mark.parametrize("layout", ["the project folder", "inside the project folder"])
def test_the_page_takes_a_zip_of_a_project_folder(admin, files, sample, settings, layout):
    project = files[0].parent
    upload = zip_of(project) if layout == "the project folder" else zip_of(project, f"{sample.project_key}.zip",
                                                                           root=project)
    response, html = preview(admin, upload, namespace="")
    assert response.status_code == 200, html[-3000:]
    assert "Import 2 conversations now" in html
    # Each transcript waits as an upload of its own, private; the sidecar .meta.json is no transcript.
    waiting = [p for p in uploads_left(settings) if p.suffix == ".upload"]
    assert len(waiting) == 2 and all(p.stat().st_mode & 0o777 == 0o600 for p in waiting)
    confirm_all(admin, html, namespace="")
    assert_linked(sample, sample.project_key)  # the namespace is the project folder's, as for the folder itself
    assert not [p for p in uploads_left(settings) if p.suffix == ".upload"]


def _hostile_zip(kind: str) -> SimpleUploadedFile:
    buffer = io.BytesIO()
    line = b'{"type":"user","uuid":"u1","sessionId":"s1","parentUuid":null,"message":{"role":"user","content":"hi"}}\n'
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as z:
        if kind == "traversal":
            z.writestr("proj/s1.jsonl", line)
            z.writestr("../../escaped.jsonl", line)
        elif kind == "absolute":
            z.writestr("/etc/s1.jsonl", line)
        elif kind == "symlink":
            info = zipfile.ZipInfo("proj/link.jsonl")
            info.external_attr = (0o120777 << 16)
            z.writestr(info, "/etc/passwd")
        elif kind == "too many members":
            for i in range(2001):
                z.writestr(f"proj/s{i}.jsonl", line)
        elif kind == "bomb":
            z.writestr("proj/s1.jsonl", line + b" " * (8 * 1024 * 1024))  # ~8 KB packed, 8 MB unpacked
        elif kind == "not a zip":
            pass
    data = buffer.getvalue() if kind != "not a zip" else b"PK\x03\x04 this is not really a zip"
    return SimpleUploadedFile("hostile.zip", data)


@pytest.mark.parametrize("kind,status,says", [
    ("traversal", 422, "not inside the archive"), ("absolute", 422, "not inside the archive"),
    ("symlink", 422, "symbolic link"), ("too many members", 422, "at most 2000"),
    ("bomb", 413, "unpacks to"), ("not a zip", 422, "cannot be read as a zip"),
])
def test_a_hostile_zip_is_refused_with_a_clear_4xx_and_nothing_written(admin, settings, tmp_path, monkeypatch, kind,
                                                                        status, says):
    from conversations.imports import views

    monkeypatch.setattr(views, "MAX_UPLOAD", 1024 * 1024)  # the page's limit, small enough to test in memory
    response, html = preview(admin, _hostile_zip(kind))
    assert response.status_code == status and says in html, html[-2000:]
    assert not uploads_left(settings)
    assert not (tmp_path / "escaped.jsonl").exists() and not (Path(settings.DATA_DIR) / "escaped.jsonl").exists()
    assert not Conversation.objects.exists()


def test_a_batch_that_unpacks_past_the_limit_stops_mid_copy_and_leaves_nothing(admin, settings, monkeypatch):
    from conversations.imports import views

    monkeypatch.setattr(views, "MAX_UPLOAD", 4096)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("proj/a.jsonl", b"{}\n" * 1000)  # 3,000 bytes: the zip alone is under the limit
    plain = SimpleUploadedFile("first.jsonl", b"{}\n" * 500)  # 1,500 bytes, copied first
    response, html = preview(admin, plain, SimpleUploadedFile("p.zip", buffer.getvalue()))
    assert response.status_code == 413 and "more than the upload limit" in html, html[-2000:]
    assert not uploads_left(settings)  # the plain file's upload and the partial copy are both gone


# ---- a file that reuses a session id without continuing it -----------------------------------


def session_file(session: str, prefix: str, prompts: list[str]) -> str:
    lines, parent = [], None
    for i, prompt in enumerate(prompts):
        for kind, body in (("user", {"role": "user", "content": prompt}),
                           ("assistant", {"id": f"{prefix}-m{i}", "role": "assistant",
                                          "content": [{"type": "text", "text": f"On it: {prompt}"}]})):
            uid = f"{prefix}-{kind[0]}{i}"
            lines.append(json.dumps({"parentUuid": parent, "isSidechain": False, "type": kind, "uuid": uid,
                                     "sessionId": session, "timestamp": f"2025-06-0{i + 1}T10:00:00Z",
                                     "message": body}))
            parent = uid
    return "\n".join(lines) + "\n"


REUSED = "0e5b9a4c-reused-session"


def test_a_file_reusing_a_session_id_without_continuing_it_is_a_conversation_of_its_own(admin):
    first = session_file(REUSED, "a", ["Start the billing export.", "Add the CSV header."])
    other = session_file(REUSED, "b", ["Start the mail digest.", "Send it on Mondays."])
    importer.import_text(first, namespace="proj")
    original = Conversation.objects.get(namespace="proj", external_id=REUSED)

    response, html = preview(admin, SimpleUploadedFile("other.jsonl", other.encode()))
    assert response.status_code == 200, html[-2000:]
    assert "reuses the session id" in html and "does not continue it" in html
    assert 'id="preview-created">1<' in html and "Import 1 conversation now" in html
    confirm_all(admin, html)

    assert Conversation.objects.count() == 2
    original.refresh_from_db()
    assert original.next_position == 4  # untouched: no second root inside it
    copy = Conversation.objects.exclude(pk=original.pk).get()
    assert copy.namespace == "proj" and copy.external_id.startswith(REUSED + "~") and copy.parent_id is None
    assert copy.meta["claude_code"]["session_id"] == REUSED
    assert copy.meta["claude_code"]["distinct_from"]["conversation_id"] == str(original.pk)
    assert [json.loads(c)["content"] for c in Message.objects.filter(conversation=copy, kind="user")
            .order_by("position").values_list("content", flat=True)] == ["Start the mail digest.",
                                                                         "Send it on Mondays."]
    # Each file again creates nothing; each one grown continues its own conversation.
    assert importer.import_text(other, namespace="proj").unchanged
    assert importer.import_text(first, namespace="proj").unchanged
    grown = importer.import_text(session_file(REUSED, "b", ["Start the mail digest.", "Send it on Mondays.",
                                                            "And on Thursdays."]), namespace="proj")
    assert [a["id"] for a in grown.appended] == [str(copy.pk)] and Conversation.objects.count() == 2
    original.refresh_from_db()
    assert original.next_position == 4


def test_an_older_copy_of_a_session_adds_nothing_and_a_continuation_appends(admin):
    whole = session_file(REUSED, "a", ["One.", "Two.", "Three."])
    importer.import_text(whole, namespace="proj")
    older = importer.import_text(session_file(REUSED, "a", ["One."]), namespace="proj")
    assert older.unchanged and Conversation.objects.count() == 1
    longer = importer.import_text(session_file(REUSED, "a", ["One.", "Two.", "Three.", "Four."]), namespace="proj")
    assert len(longer.appended) == 1 and not longer.created and Conversation.objects.count() == 1


def test_the_api_says_when_a_file_reuses_a_session_id(writer):
    writer.post("/imports", {"content": session_file(REUSED, "a", ["One."]), "namespace": "proj"})
    answer = writer.post("/imports", {"content": session_file(REUSED, "b", ["Other."]), "namespace": "proj"})
    assert answer.status_code == 201
    body = answer.json()
    assert body["distinct_from"]["session_id"] == REUSED and len(body["created"]) == 1
    assert Conversation.objects.filter(namespace="proj").count() == 2
