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
  deleted (registered with retention/leftovers.py).

Beside each `<token>.upload` lies `<token>.json`, its record: the SHA-256 of the
subject given on the form (normalised as conversation subjects are compared, so
the record names no subject) and the stored conversations its preview touched.
"""

import hashlib
import json
import os
import secrets
import time
from pathlib import Path

from django.conf import settings

from conversations.files import FILE_MODE, prepare_data_dir
from conversations.retention.leftovers import Leftovers
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
    """Write an upload's chunks under a new token; returns (token, path)."""
    token = secrets.token_hex(TOKEN_HEX // 2)
    path = folder() / f"{token}{UPLOAD}"
    try:
        _write_private(path, chunks)
    except BaseException:
        path.unlink(missing_ok=True)
        raise
    return token, path


def record(token: str, *, subject: str, conversation_ids=(), sidecar: dict | None = None) -> None:
    """Note what the upload is about, for deletion requests (see the module docstring), and the
    sidecar read with it (a Claude Code subagent's .meta.json), for its confirmation."""
    body = {"subject_key": subject_key(subject), "conversation_ids": sorted({str(c) for c in conversation_ids if c})}
    if sidecar:
        body["sidecar"] = sidecar
    path = folder() / f"{token}{RECORD}"
    path.unlink(missing_ok=True)
    _write_private(path, [json.dumps(body).encode()])


def sidecar(token: str) -> dict | None:
    """The sidecar recorded with an upload, if any."""
    try:
        body = json.loads((folder() / f"{token}{RECORD}").read_text())
    except (FileNotFoundError, ValueError):
        return None
    value = body.get("sidecar") if isinstance(body, dict) else None
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
    return sorted(folder().glob(f"*{UPLOAD}"))


def remove_expired() -> int:
    """Remove every upload past its lifetime (and any record left without its upload); returns how many uploads."""
    now = time.time()
    removed = 0
    for path in files():
        if _expired(path, now):
            remove(path)
            removed += 1
    for orphan in folder().glob(f"*{RECORD}"):
        if not orphan.with_suffix(UPLOAD).exists() and _expired(orphan, now):
            orphan.unlink(missing_ok=True)
    return removed


def about(*, subject: str = "", conversation_ids=()) -> list[Path]:
    """Uploads whose record names this subject or one of these conversations."""
    key = subject_key(subject)
    wanted = {str(c) for c in conversation_ids}
    found = []
    for path in files():
        try:
            body = json.loads(path.with_suffix(RECORD).read_text())
        except (FileNotFoundError, ValueError):
            continue
        if (key and body.get("subject_key") == key) or wanted & set(body.get("conversation_ids") or ()):
            found.append(path)
    return found


LEFTOVERS = Leftovers(name=FOLDER, files=files, about=about, remove=remove, remove_expired=remove_expired)
