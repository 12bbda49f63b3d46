"""An import page upload: kept between preview and confirm, and never longer.

The admin import page shows what a file would create before anything is written
(views.py); the file waits in DATA_DIR/uploads under a random token until the
person confirms. It is a whole transcript, personal data included, so:

- it is created 0600 in a 0700 folder, like the database files beside it
  (conversations/files.py);
- it is removed once the confirming import has read it, or when its preview fails;
- after MEMORYUI_UPLOAD_TTL_MINUTES (default 60) it has expired: confirming
  refuses it, and the next preview or prune removes it;
- a deletion request removes every upload whose record ties it to the subject or
  to a conversation being deleted, and every upload whose bytes hold a text being
  deleted (registered at `plugins.leftover_files`);
- it belongs to the project it was uploaded in, and every listing here (`files`, `about`,
  `remove_expired`) sees only the current scope's: a deletion request filed in project A
  must never remove, search or name project B's upload, even one holding the same text
  (a request filed for every project sees them all).

Beside each `<token>.upload` lies `<token>.json`, its record: the project, the SHA-256
of the subject given on the form (normalised as conversation subjects are compared, so
the record names no subject) and the stored conversations its preview touched. The
record is written with the upload, so a file between save and preview has its project
too; one without a project in its record (written before records named one) is seen only
where every project is.
"""

import hashlib
import json
import os
import secrets
import time
from pathlib import Path

from django.conf import settings

from conversations import plugins, projects
from conversations.files import FILE_MODE, prepare_data_dir
from conversations.subjects import normalize_subject

FOLDER = "uploads"
UPLOAD, RECORD = ".upload", ".json"
TOKEN_HEX = 32


def folder() -> Path:
    path = Path(settings.DATA_DIR) / FOLDER
    prepare_data_dir(path)  # 0700, and tightened if an older version made it 0755
    return path


def lifetime_seconds() -> float:
    return settings.MEMORYUI_UPLOAD_TTL_MINUTES * 60


def subject_key(subject: str) -> str:
    normal = normalize_subject(subject or "")
    return hashlib.sha256(normal.encode("utf-8")).hexdigest() if normal else ""


def _write_private(path: Path, pieces) -> None:
    # O_EXCL with the mode at creation: the file is never readable by others, not even for a moment.
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
    with os.fdopen(fd, "wb") as f:
        for piece in pieces:
            f.write(piece)


def save(chunks) -> tuple[str, Path]:
    """Write an upload's chunks under a new token, in the current project; returns (token, path)."""
    token = secrets.token_hex(TOKEN_HEX // 2)
    path = folder() / f"{token}{UPLOAD}"
    try:
        _write_private(path.with_suffix(RECORD), [json.dumps({"project_id": projects.project_of_new_row()}).encode()])
        _write_private(path, chunks)
    except BaseException:
        remove(path)
        raise
    return token, path


def record(token: str, *, subject: str, conversation_ids=(), sidecar: dict | None = None) -> None:
    """Note what the upload is about, for deletion requests (see the module docstring), and the
    sidecar read with it (a Claude Code subagent's .meta.json), for its confirmation."""
    path = folder() / f"{token}{RECORD}"
    # The project stays the one the upload was saved in.
    project_id = _record(path).get("project_id", projects.project_of_new_row())
    body = {"project_id": project_id, "subject_key": subject_key(subject),
            "conversation_ids": sorted({str(c) for c in conversation_ids if c})}
    if sidecar:
        body["sidecar"] = sidecar
    path.unlink(missing_ok=True)
    _write_private(path, [json.dumps(body).encode()])


def _record(path: Path) -> dict:
    """The record beside an upload (or the record file itself); {} when there is none."""
    try:
        body = json.loads(Path(path).with_suffix(RECORD).read_text())
    except (FileNotFoundError, ValueError):
        return {}
    return body if isinstance(body, dict) else {}


def _in_scope(path: Path) -> bool:
    """Whether the current scope sees this upload (see the module docstring)."""
    scope = projects.current()
    return scope.every or scope.sees(_record(path).get("project_id"))


def sidecar(token: str) -> dict | None:
    """The sidecar recorded with an upload, if any."""
    value = _record(folder() / f"{token}{RECORD}").get("sidecar")
    return value if isinstance(value, dict) else None


def _valid(token: str) -> bool:
    return len(token or "") == TOKEN_HEX and all(c in "0123456789abcdef" for c in token)


def _expired(path: Path, now: float) -> bool:
    try:
        return now - path.stat().st_mtime > lifetime_seconds()
    except FileNotFoundError:
        return True


def find(token: str) -> Path | None:
    """The upload of a token that is waiting for its confirmation; an expired one is removed."""
    if not _valid(token):
        return None
    path = folder() / f"{token}{UPLOAD}"
    if not path.exists():
        return None
    if _expired(path, time.time()):
        remove(path)
        return None
    return path


def remove(path: Path) -> int:
    """Remove an upload and its record; returns the bytes the upload held."""
    path = Path(path)
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        size = 0
    path.unlink(missing_ok=True)
    path.with_suffix(RECORD).unlink(missing_ok=True)
    return size


def files() -> list[Path]:
    """The uploads the current scope sees."""
    return [path for path in sorted(folder().glob(f"*{UPLOAD}")) if _in_scope(path)]


def remove_expired() -> int:
    """Remove every upload of the current scope past its lifetime (and any such record left without
    its upload); returns how many uploads."""
    now = time.time()
    removed = 0
    for path in files():
        if _expired(path, now):
            remove(path)
            removed += 1
    for orphan in folder().glob(f"*{RECORD}"):
        if not orphan.with_suffix(UPLOAD).exists() and _expired(orphan, now) and _in_scope(orphan):
            orphan.unlink(missing_ok=True)
    return removed


def about(*, subject: str = "", conversation_ids=()) -> list[Path]:
    """The current scope's uploads whose record names this subject or one of these conversations."""
    key = subject_key(subject)
    wanted = {str(c) for c in conversation_ids}
    found = []
    for path in files():
        body = _record(path)
        if (key and body.get("subject_key") == key) or wanted & set(body.get("conversation_ids") or ()):
            found.append(path)
    return found


LEFTOVERS = plugins.Leftovers(name=FOLDER, files=files, about=about, remove=remove, remove_expired=remove_expired)
