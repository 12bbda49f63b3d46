"""Folders, zips and databases that hold transcripts, taken apart into the files the importer takes.

Most agents keep one file per session, and each door hands such a file to
`importer.import_text` as it is. Some keep a session in several files, or several
sessions in one file, and every door takes them apart here the same way:

- OpenCode's storage (`session/`, `message/`, `part/` JSON files, one per record): the
  records are read, classified by their own fields (formats.opencode.kind_of, whatever
  the folder layout) and put together into one document per session;
- OpenCode's SQLite database (`opencode.db`): a copy on disk (a file given to the
  command, an upload), opened read-only with Python's own sqlite3, its `session`,
  `message` and `part` rows made into the same documents. It is never the database
  memoryui runs on (refused), and nothing is written to it;
- a Cline / Roo task folder: `api_conversation_history.json` with the
  `ui_messages.json` beside it, as one document (formats.cline);
- a Claude Code subagent's `.meta.json` sidecar goes with its transcript (`sidecar`);
  `ui_messages.json`, `task_metadata.json` and `.meta.json` are no transcripts alone.

A `Piece` is one file for the importer: a name (a path, which the namespace rule and
a Gemini subagent's folder are read from), and its bytes or a file on disk.
"""

import json
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from urllib.parse import quote

from django.conf import settings

from conversations.errors import InvalidInput
from conversations.formats import opencode
from conversations.formats.base import dumps

SQLITE_MAGIC = b"SQLite format 3\x00"
CLINE_HISTORY = "api_conversation_history.json"
CLINE_SIDECARS = ("ui_messages.json", "task_metadata.json")
TRANSCRIPT_SUFFIXES = (".jsonl", ".json")
DATABASE_SUFFIXES = (".db", ".sqlite", ".sqlite3")
AIDER_HISTORY = ".aider.chat.history.md"


@dataclass
class Piece:
    name: str
    data: bytes | None = None
    path: Path | None = None
    sidecar: dict | None = None  # a Claude Code subagent's .meta.json
    skipped: str = ""  # why this file is not imported (said, never silently left out)


def is_sidecar(name: str) -> bool:
    """Files read with a transcript beside them, never imported alone."""
    lower = PurePosixPath(name).name.lower()
    return lower.endswith(".meta.json") or lower in CLINE_SIDECARS


def is_candidate(name: str) -> bool:
    """A file name a transcript, a storage record, a history or a database may have."""
    lower = name.lower()
    return (lower.endswith(TRANSCRIPT_SUFFIXES) or lower.endswith(AIDER_HISTORY) or
            lower.endswith(DATABASE_SUFFIXES)) and not lower.startswith("__macosx/")


def _storage_record_name(name: str) -> bool:
    """An OpenCode storage record by its file name (ses_…, msg_…, prt_… .json)."""
    base = PurePosixPath(name).name
    return base.endswith(".json") and base[:4] in ("ses_", "msg_", "prt_")


def _storage_root(path) -> str | None:
    parts = PurePosixPath(str(path).replace("\\", "/")).parts
    return "/".join(parts[: parts.index("storage") + 1]) if "storage" in parts else None


def is_sqlite(path: Path) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(16) == SQLITE_MAGIC
    except OSError:
        return False


# ---- OpenCode ----------------------------------------------------------------------------------


def _own_databases() -> set[Path]:
    names = set()
    for db in settings.DATABASES.values():
        name = db.get("NAME")
        if isinstance(name, (str, Path)) and str(name) and str(name) != ":memory:":
            names.add(Path(name).resolve())
    return names


def opencode_database(path: Path) -> list[bytes]:
    """Each session of an OpenCode database copy, as its export document (module docstring)."""
    path = Path(path).resolve()
    if path in _own_databases() or any(str(path).startswith(str(own) + "-") for own in _own_databases()):
        raise InvalidInput("that is memoryui's own database, not an OpenCode one", field="file")
    try:
        db = sqlite3.connect(f"file:{quote(str(path))}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        raise InvalidInput(f"the database cannot be opened: {exc}", field="file") from None
    try:
        db.row_factory = sqlite3.Row
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if not {"session", "message", "part"} <= tables:
            raise InvalidInput("this SQLite database is not OpenCode's (it has no session, message and part tables)",
                               field="file")
        rows = {t: [dict(r) for r in db.execute(f"SELECT * FROM {t} ORDER BY id")]  # noqa: S608 (fixed names)
                for t in ("session", "message", "part")}
    except sqlite3.Error as exc:
        raise InvalidInput(f"the database cannot be read: {exc}", field="file") from None
    finally:
        db.close()
    records = opencode.database_records(rows["session"], rows["message"], rows["part"])
    return [dumps(doc).encode() for doc in opencode.assemble(*records)]


def opencode_storage(records: list[tuple[str, bytes]]) -> tuple[list[tuple[str, bytes]], list[str]]:
    """Storage files (name, bytes) → (session id, export document) per session, and the names
    of files that are no OpenCode record (each then imported as a file of its own)."""
    found: dict[str, list] = {"session": [], "message": [], "part": []}
    others = []
    for name, raw in records:
        try:
            obj = json.loads(raw)
        except ValueError:
            others.append(name)
            continue
        kind = opencode.kind_of(obj)
        if kind is None:
            others.append(name)
        else:
            found[kind].append(obj)
    docs = opencode.assemble(found["session"], found["message"], found["part"])
    return [(doc["info"]["id"], dumps(doc).encode()) for doc in docs], others


# ---- Cline ---------------------------------------------------------------------------------------


def cline_bundle(history: bytes, ui: bytes | None, task_id: str | None) -> bytes:
    """A task's history and panel as the one document formats.cline reads; each as it is
    when it is not JSON (the parser reports it)."""
    if ui is None and task_id is None:
        return history
    try:
        doc = {"api_conversation_history": json.loads(history)}
        if ui is not None:
            doc["ui_messages"] = json.loads(ui)
    except ValueError:
        return history
    if task_id:
        doc["task_id"] = task_id
    return dumps(doc).encode()


# ---- folders and files (the command) --------------------------------------------------------------


def _sidecar_of(path: Path) -> dict | None:
    meta = path.with_name(path.name[: -len(".jsonl")] + ".meta.json") if path.name.endswith(".jsonl") else None
    if meta is None or not meta.is_file():
        return None
    try:
        obj = json.loads(meta.read_text())
    except (OSError, ValueError):
        return None
    return obj if isinstance(obj, dict) else None


def pieces_of_file(path: Path) -> Iterator[Piece]:
    """One file the command was given (or found in a folder)."""
    if path.suffix.lower() in DATABASE_SUFFIXES or (path.suffix.lower() not in TRANSCRIPT_SUFFIXES and
                                                    is_sqlite(path)):
        if not is_sqlite(path):
            raise InvalidInput(f"{path.name} is not a SQLite database", field="file")
        for doc in opencode_database(path):
            sid = json.loads(doc)["info"]["id"]
            yield Piece(name=str(path.parent / "opencode" / f"{sid}.json"), data=doc)
        return
    if path.name == CLINE_HISTORY:
        ui = path.with_name("ui_messages.json")
        yield Piece(name=str(path), data=cline_bundle(path.read_bytes(), ui.read_bytes() if ui.is_file() else None,
                                                      path.parent.name or None))
        return
    yield Piece(name=str(path), path=path, sidecar=_sidecar_of(path))


def pieces_of_folder(folder: Path) -> Iterator[Piece]:
    """Every transcript under a folder, an OpenCode storage's records put together."""
    files = sorted(f for f in folder.rglob("*") if f.is_file() and is_candidate(str(f)) and not is_sidecar(f.name))
    records = [f for f in files if _storage_record_name(f.name)]
    if records:
        docs, others = opencode_storage([(str(f), f.read_bytes()) for f in records])
        for sid, doc in docs:
            yield Piece(name=str(folder / "opencode" / f"{sid}.json"), data=doc)
        files = [f for f in files if not _storage_record_name(f.name) or str(f) in set(others)]
        roots = {_storage_root(f) for f in records} - {None}
        for f in [f for f in files if _storage_root(f) in roots]:
            # The storage's other records (projects, todos, diffs) hold no conversation.
            yield Piece(name=str(f), skipped="an OpenCode storage record that holds no conversation")
        files = [f for f in files if _storage_root(f) not in roots]
    for f in files:
        yield from pieces_of_file(f)


# ---- archives (the page, the API) ------------------------------------------------------------------


def pieces_of_archive(archive, members, read) -> Iterator[tuple[str, object, dict | None]]:
    """(name, bytes or an iterator of blocks, sidecar) of each transcript of an opened zip.
    `read(member)` yields a member's bytes a block at a time, counted against the upload
    budget (archives.read_member). A database member's sidecar is {"database": True}; a member
    left out says why ({"skipped": reason}, its body None)."""
    by_name = {m.name: m for m in members}
    records = [m for m in members if _storage_record_name(m.name)]
    if records:
        docs, others = opencode_storage([(m.name, b"".join(read(m))) for m in records])
        prefix = PurePosixPath(records[0].name).parts[0]
        for sid, doc in docs:
            yield f"{prefix}/opencode/{sid}.json", doc, None
        kept = set(others)
        members = [m for m in members if not _storage_record_name(m.name) or m.name in kept]
        roots = {_storage_root(m.name) for m in records} - {None}
        for m in [m for m in members if _storage_root(m.name) in roots]:
            yield m.name, None, {"skipped": "an OpenCode storage record that holds no conversation"}
        members = [m for m in members if _storage_root(m.name) not in roots]
    for m in members:
        if is_sidecar(m.name):
            continue
        lower = m.name.lower()
        if lower.endswith(DATABASE_SUFFIXES):
            yield m.name, read(m), {"database": True}
            continue
        if PurePosixPath(m.name).name == CLINE_HISTORY:
            ui = by_name.get(str(PurePosixPath(m.name).with_name("ui_messages.json")))
            task = PurePosixPath(m.name).parent.name or None
            yield m.name, cline_bundle(b"".join(read(m)), b"".join(read(ui)) if ui else None, task), None
            continue
        sidecar = None
        if m.name.endswith(".jsonl"):
            meta = by_name.get(m.name[: -len(".jsonl")] + ".meta.json")
            if meta is not None:
                try:
                    sidecar = json.loads(b"".join(read(meta)))
                except ValueError:
                    sidecar = None
        yield m.name, read(m), sidecar if isinstance(sidecar, dict) else None
