"""Gemini CLI, Aider, OpenCode and Cline sessions through every door.

A session imports to the same conversations, rows, checkpoints and lineage whether it
comes through `manage.py import` (a file, a folder), the upload page (files, a zip of
the folder), or POST /api/v1/imports (the text in JSON, or the file itself as the body);
again through any door it creates nothing; a session file that has grown appends what
is new; a file reusing a session's key without continuing it is a conversation of its
own. Child sessions land under the call that started them whichever comes first.
"""

import io
import json
import sqlite3
import zipfile
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.db import transaction
from django.test import Client

from conversations import api_keys, project_store, projects
from conversations.formats import opencode
from conversations.imports import importer
from conversations.imports.containers import cline_bundle
from conversations.models import AuditEvent, Checkpoint, Conversation, Message
from tests.api_support import Api, login_as, make_key

pytestmark = pytest.mark.django_db
FIX = Path(__file__).parent / "fixtures" / "formats"
GEMINI = FIX / "gemini"
GEMINI_LOG = GEMINI / "session-2026-01-20T14-00-8d2c4a6e.jsonl"
GEMINI_SUB = GEMINI / "8d2c4a6e-9b1f-4e3a-b5c7-d9e1f3a5b7c9" / "5e7f9a1b-2c3d-4e5f-8a9b-0c1d2e3f4a5b.jsonl"
AIDER = FIX / "aider" / ".aider.chat.history.md"
STORAGE = FIX / "opencode" / "storage"
TASK = FIX / "cline" / "tasks" / "1761900000123"
PARENT, CHILD = "ses_5a1b2c3d4ffeAbCdEfGhIjKlMn", "ses_5a1b2c9e0ffeSubAgentTaskXy"


def opencode_docs() -> dict:
    found = {"session": [], "message": [], "part": []}
    for path in sorted(STORAGE.rglob("*.json")):
        obj = json.loads(path.read_text())
        if opencode.kind_of(obj):
            found[opencode.kind_of(obj)].append(obj)
    return {d["info"]["id"]: json.dumps(d, ensure_ascii=False, separators=(",", ":"))
            for d in opencode.assemble(found["session"], found["message"], found["part"])}


def opencode_database(path: Path) -> Path:
    """An OpenCode database as its newer versions keep it, made from the storage fixture."""
    found = {"session": [], "message": [], "part": []}
    for f in sorted(STORAGE.rglob("*.json")):
        obj = json.loads(f.read_text())
        if opencode.kind_of(obj):
            found[opencode.kind_of(obj)].append(obj)
    db = sqlite3.connect(path)
    db.executescript("""
        CREATE TABLE project (id TEXT PRIMARY KEY, worktree TEXT);
        CREATE TABLE session (id TEXT PRIMARY KEY, project_id TEXT NOT NULL, parent_id TEXT, slug TEXT NOT NULL,
            directory TEXT NOT NULL, title TEXT NOT NULL, version TEXT NOT NULL, time_created INTEGER,
            time_updated INTEGER);
        CREATE TABLE message (id TEXT PRIMARY KEY, session_id TEXT NOT NULL, time_created INTEGER,
            time_updated INTEGER, data TEXT NOT NULL);
        CREATE TABLE part (id TEXT PRIMARY KEY, message_id TEXT NOT NULL, session_id TEXT NOT NULL,
            time_created INTEGER, time_updated INTEGER, data TEXT NOT NULL);
    """)
    for s in found["session"]:
        db.execute("INSERT INTO session VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                   (s["id"], s["projectID"], s.get("parentID"), s.get("slug", ""), s["directory"], s["title"],
                    s["version"], s["time"]["created"], s["time"]["updated"]))
    for m in found["message"]:
        data = {k: v for k, v in m.items() if k not in ("id", "sessionID")}
        db.execute("INSERT INTO message VALUES (?, ?, ?, ?, ?)",
                   (m["id"], m["sessionID"], m["time"]["created"], m["time"]["created"], json.dumps(data)))
    for p in found["part"]:
        data = {k: v for k, v in p.items() if k not in ("id", "sessionID", "messageID")}
        db.execute("INSERT INTO part VALUES (?, ?, ?, ?, ?, ?)", (p["id"], p["messageID"], p["sessionID"], 0, 0,
                                                                  json.dumps(data)))
    db.commit()
    db.close()
    return path


def zip_of(folder: Path, *, under: str = "") -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for f in sorted(folder.rglob("*")):
            if f.is_file():
                z.write(f, str(Path(under) / f.relative_to(folder)) if under else str(f.relative_to(folder)))
    return buf.getvalue()


def cline_text() -> str:
    return cline_bundle((TASK / "api_conversation_history.json").read_bytes(),
                        (TASK / "ui_messages.json").read_bytes(), TASK.name).decode()


def shape() -> list:
    """What a person reads afterwards: each live conversation with its lineage, rows and folds."""
    convs = list(Conversation.objects.live().order_by("created_at", "id"))
    titles = {c.pk: c.title for c in convs}
    out = []
    for c in convs:
        rows = list(Message.objects.filter(conversation=c).order_by("position").values_list("kind", "content"))
        folds = list(Checkpoint.objects.filter(conversation=c).order_by("message_position")
                     .values_list("message_position", "summary"))
        out.append((c.title, c.namespace, c.external_id, c.parent_relation, c.forked_from_position,
                    titles.get(c.parent_id), rows, folds))
    return sorted(out, key=lambda s: (s[0], s[3]))


class Rollback(Exception):
    pass


def reference(*texts) -> list:
    """The shape the importer's own function gives the texts, in order, rolled back."""
    found = []
    try:
        with transaction.atomic():
            for text in texts:
                importer.import_text(text)
            found.extend(shape())
            raise Rollback
    except Rollback:
        pass
    assert not Conversation.objects.exists()
    return found


@pytest.fixture
def api():
    return Api(Client(), make_key(["read", "write"], name="importer"))


@pytest.fixture
def page():
    client = Client()
    login_as(client, "admin")
    return client


def by_command(*paths) -> str:
    out = io.StringIO()
    call_command("import", *[str(p) for p in paths], stdout=out, stderr=out)
    return out.getvalue()


def by_page(page, *files) -> str:
    """files: (name, bytes)."""
    uploads = [SimpleUploadedFile(name, data) for name, data in files]
    html = page.post("/admin/import/", {"file": uploads, "format": "auto"}).content.decode()
    tokens = [t.split('"')[0] for t in html.split('name="token" value="')[1:]]
    names = [t.split('"')[0] for t in html.split('name="name" value="')[1:]]
    if not tokens:
        return html
    done = page.post("/admin/import/", {"token": tokens, "name": names, "confirm": "1", "format": "auto"})
    assert done.status_code == 200, done.content[:500]
    return done.content.decode()


def by_api(api, text: str):
    response = api.post("/imports", {"content": text})
    assert response.status_code in (200, 201), response.content[:500]
    return response.json()


def by_api_raw(api, data: bytes, content_type: str, query: str = ""):
    response = api.post(f"/imports{query}", raw=data, content_type=content_type)
    assert response.status_code in (200, 201), response.content[:500]
    return response.json()


def counts():
    return Conversation.objects.count(), Message.objects.count(), Checkpoint.objects.count()


# ---- each format, each door -------------------------------------------------------------------


def _again_creates_nothing(door):
    before = counts()
    door()
    assert counts() == before


@pytest.mark.parametrize("door", ["command", "page", "api", "api-raw"])
def test_a_gemini_session_and_its_subagent_import_alike_through_each_door(door, api, page, tmp_path):
    expected = reference(GEMINI_LOG.read_text(), GEMINI_SUB.read_text())
    doors = {
        "command": lambda: by_command(GEMINI),
        "page": lambda: by_page(page, ("gemini.zip", zip_of(GEMINI, under="chats"))),
        "api": lambda: [by_api(api, p.read_text()) for p in (GEMINI_LOG, GEMINI_SUB)],
        "api-raw": lambda: [by_api_raw(api, p.read_bytes(), "application/x-ndjson") for p in (GEMINI_SUB, GEMINI_LOG)],
    }
    doors[door]()
    # The folder holds two more sessions than these: only these are compared.
    assert [s for s in shape() if s[0] in {e[0] for e in expected}] == expected
    sub = Conversation.objects.get(external_id="5e7f9a1b-2c3d-4e5f-8a9b-0c1d2e3f4a5b")
    main = Conversation.objects.get(external_id="8d2c4a6e-9b1f-4e3a-b5c7-d9e1f3a5b7c9")
    assert (sub.parent_id, sub.parent_relation, sub.forked_from_position) == (main.pk, "subagent", 8)
    _again_creates_nothing(doors[door])


@pytest.mark.parametrize("door", ["command", "page", "api", "api-raw"])
def test_an_aider_history_imports_alike_through_each_door(door, api, page, tmp_path):
    text = AIDER.read_text()
    expected = reference(text)
    assert len(expected) == 2
    doors = {
        "command": lambda: by_command(AIDER),
        "page": lambda: by_page(page, (".aider.chat.history.md", text.encode())),
        "api": lambda: by_api(api, text),
        "api-raw": lambda: by_api_raw(api, text.encode(), "text/markdown"),
    }
    doors[door]()
    assert shape() == expected
    _again_creates_nothing(doors[door])


@pytest.mark.parametrize("door", ["command", "command-db", "page", "page-db", "api", "api-zip", "api-db"])
def test_an_opencode_storage_or_database_imports_alike_through_each_door(door, api, page, tmp_path):
    docs = opencode_docs()
    expected = reference(docs[PARENT], docs[CHILD])
    db = opencode_database(tmp_path / "opencode.db")
    doors = {
        "command": lambda: by_command(STORAGE.parent),
        "command-db": lambda: by_command(db),
        "page": lambda: by_page(page, ("storage.zip", zip_of(STORAGE, under="storage"))),
        "page-db": lambda: by_page(page, ("opencode.db", db.read_bytes())),
        "api": lambda: [by_api(api, docs[CHILD]), by_api(api, docs[PARENT])],
        "api-zip": lambda: by_api_raw(api, zip_of(STORAGE, under="storage"), "application/zip"),
        "api-db": lambda: by_api_raw(api, db.read_bytes(), "application/vnd.sqlite3"),
    }
    doors[door]()
    assert shape() == expected
    child = Conversation.objects.get(external_id=CHILD)
    parent = Conversation.objects.get(external_id=PARENT)
    assert (child.parent_id, child.parent_relation, child.forked_from_position) == (parent.pk, "subagent", 2)
    _again_creates_nothing(doors[door])


@pytest.mark.parametrize("door", ["command", "page", "page-files", "api", "api-raw"])
def test_a_cline_task_with_its_panel_imports_alike_through_each_door(door, api, page):
    expected = reference(cline_text())
    history, ui = (TASK / "api_conversation_history.json").read_bytes(), (TASK / "ui_messages.json").read_bytes()
    doors = {
        "command": lambda: by_command(TASK),
        "page": lambda: by_page(page, ("tasks.zip", zip_of(TASK.parent, under="tasks"))),
        "page-files": lambda: by_page(page, ("api_conversation_history.json", history), ("ui_messages.json", ui)),
        "api": lambda: by_api(api, cline_text()),
        "api-raw": lambda: by_api_raw(api, cline_text().encode(), "text/plain"),
    }
    doors[door]()
    got = shape()
    # The panel's usage and task id come with every door but the plain files (no task folder to name it).
    if door == "page-files":
        assert [(s[0], [k for k, _ in s[6]]) for s in got] == [(s[0], [k for k, _ in s[6]]) for s in expected]
    else:
        assert got == expected
    _again_creates_nothing(doors[door])


def test_the_history_alone_and_with_its_panel_are_one_task_whose_rows_differ(api):
    by_api(api, (TASK / "api_conversation_history.json").read_text())
    again = by_api(api, cline_text())
    # The same task (its first message), but rows that carry the panel's usage do not continue
    # the stored ones: a conversation of its own, said so; the stored one is left as it was.
    assert len(again["created"]) == 1 and any("does not continue it" in p["reason"] for p in again["problems"])
    assert by_api(api, cline_text())["unchanged"] and by_api(api, (TASK / "api_conversation_history.json").read_text(
    ))["unchanged"]


# ---- growing, reusing, subagents in any order ---------------------------------------------------


def test_a_gemini_log_that_has_grown_appends_what_is_new():
    lines = GEMINI_LOG.read_text().splitlines(keepends=True)
    first = importer.import_text("".join(lines[:8]))
    assert first.created and first.messages == 7
    grown = importer.import_text("".join(lines))
    assert grown.appended and not grown.created[1:] and grown.messages
    main = Conversation.objects.get(external_id="8d2c4a6e-9b1f-4e3a-b5c7-d9e1f3a5b7c9")
    assert main.next_position == 14
    assert Checkpoint.objects.filter(conversation=main).count() == 1
    assert Conversation.objects.filter(parent_relation="fork").count() == 1  # the rewind, new since
    assert importer.import_text("".join(lines)).unchanged


def test_an_aider_history_that_has_grown_continues_its_last_session_and_adds_the_next():
    text = AIDER.read_text()
    cut = text.index("#### /ask should")
    importer.import_text(text[:cut])
    assert Conversation.objects.count() == 1
    result = importer.import_text(text)
    assert len(result.appended) == 1 and len(result.created) == 1
    grown = shape()
    # The same as importing the whole history at once.
    assert [(s[0], s[6]) for s in grown] == [(s[0], s[6]) for s in whole_history(text)]


def whole_history(text):
    """What the whole history makes when imported at once, in another namespace (rolled back)."""
    found = []
    try:
        with transaction.atomic():
            importer.import_text(text, namespace="at-once")
            found = [s for s in shape() if s[1] == "at-once"]
            raise Rollback
    except Rollback:
        pass
    return found


def test_a_file_reusing_a_session_id_without_continuing_it_is_a_conversation_of_its_own():
    text = (GEMINI / "session-2025-10-14T08-01-3f6b9e2a.json").read_text()
    importer.import_text(text)
    other = json.loads(text)
    other["messages"][0]["content"] = "A different first question."
    result = importer.import_text(json.dumps(other))
    assert len(result.created) == 1 and any("does not continue it" in p.reason for p in result.problems)
    assert result.created[0]["id"] != str(Conversation.objects.get(
        external_id="3f6b9e2a-7c41-4d58-9a0e-5b1c2d3e4f60").pk)
    assert importer.import_text(json.dumps(other)).unchanged


@pytest.mark.parametrize("order", ["child first", "parent first"])
def test_an_opencode_child_session_lands_under_its_task_call_in_either_order(order, api):
    docs = opencode_docs()
    for sid in ((CHILD, PARENT) if order == "child first" else (PARENT, CHILD)):
        by_api(api, docs[sid])
    child = Conversation.objects.get(external_id=CHILD)
    parent = Conversation.objects.get(external_id=PARENT)
    assert (child.parent_id, child.forked_from_position) == (parent.pk, 2)
    linked = AuditEvent.objects.filter(action="conversation.linked", target_id=str(child.pk)).count()
    assert linked == (1 if order == "child first" else 0)


def test_a_gemini_subagent_sent_alone_first_waits_and_its_session_links_it(api):
    by_api(api, GEMINI_SUB.read_text())
    waiting = Conversation.objects.get(external_id="5e7f9a1b-2c3d-4e5f-8a9b-0c1d2e3f4a5b")
    assert waiting.parent_id is None and waiting.parent_relation == ""
    answer = by_api(api, GEMINI_LOG.read_text())
    waiting.refresh_from_db()
    assert waiting.parent_id is not None and waiting.forked_from_position == 8
    assert [link["id"] for link in answer["linked"]] == [str(waiting.pk)]


def test_imports_land_in_the_keys_project():
    other = project_store.create_project(slug="tides")
    _row, secret = api_keys.create_api_key(name="tides-importer", scopes=["read", "write"], project=other)
    key = Api(Client(), secret)
    by_api(key, AIDER.read_text())
    with projects.scoped(projects.EVERY):
        assert {c.project_id for c in Conversation.everywhere.all()} == {other.pk}


def test_a_subagent_never_finds_its_parent_in_another_project():
    """The same session id in another project is not its session: no link across projects."""
    other = project_store.create_project(slug="elsewhere")
    _row, secret = api_keys.create_api_key(name="elsewhere-importer", scopes=["read", "write"], project=other)
    by_api(Api(Client(), make_key(["read", "write"])), GEMINI_LOG.read_text())  # the default project's session
    by_api(Api(Client(), secret), GEMINI_SUB.read_text())
    with projects.scoped(projects.EVERY):
        sub = Conversation.everywhere.get(external_id="5e7f9a1b-2c3d-4e5f-8a9b-0c1d2e3f4a5b")
        assert sub.project_id == other.pk and sub.parent_id is None
