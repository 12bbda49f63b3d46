"""The erasure journal: a file outside the database that remembers every erasure.

A receipt lives in the database, so restoring a backup taken before a deletion request
brings back both the erased rows and a database with no memory of the request. The
journal is the memory that survives: one JSON object a line, appended and fsync'd
when a request is filed, before anything is deleted (its `intent`), and again before its
receipt commits (its `erasure`: erasure.py), copied beside every backup (backups.py through
`plugins.backup_extras`), and read by `manage.py restore` and `manage.py reapply_erasures`,
which re-apply every erasure the database shows no sign of (reapply.py).

It holds no personal data: request ids, the receipt documents (ids, counts, SHA-256s),
the subject as an HMAC keyed with a secret derived from SECRET_KEY (a plain hash of a
guessable subject would confirm a guess), and the commitments of the erased rows.

Each line carries its sequence number, the hash of the line before it and its own
SHA-256, so an edited, reordered or missing line, or a half-written last line, is found
by `read`. A line cut short by a crash is never rewritten (the file is append-only): the
next writer closes it with a newline and appends a `torn` entry naming its bytes, which
lets the chain go on past it. What a chain cannot show is a journal cut off cleanly at a
line; the database holds the journal's head as of each receipt (its audit event) and every
backup's manifest holds it as of the backup, and those are compared with it (reapply.py).

Appends take an exclusive POSIX lock on the file (fcntl.lockf, which NFS honours), so
app servers sharing one journal on shared storage never interleave their lines.
"""

import fcntl
import hashlib
import hmac
import json
import os
import uuid
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from django.conf import settings

from conversations.subjects import normalize_subject

FORMAT = "memoryui-erasure-journal/1"
# Where a writer looks back for the last complete line (lines of erased-row commitments are long).
_BLOCK = 1 << 16


def configured_path() -> Path:
    return Path(settings.MEMORYUI_ERASURE_JOURNAL)


def canonical(obj) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


def line_hash(body: dict) -> str:
    return hashlib.sha256(canonical(body)).hexdigest()


class JournalError(Exception):
    """The journal cannot be written (its file, its folder), or it is damaged where a writer looks."""


# -- the subject's key ---------------------------------------------------------------------


def _keys() -> list[bytes]:
    """The key of the current SECRET_KEY first, then those of SECRET_KEY_FALLBACKS (a rotated key)."""
    secrets = [settings.SECRET_KEY, *getattr(settings, "SECRET_KEY_FALLBACKS", [])]
    return [hmac.new(s.encode(), b"memoryui erasure journal: subject key", hashlib.sha256).digest() for s in secrets]


def key_id(key: bytes) -> str:
    """Names a key without revealing it: which key an entry was written with."""
    return hmac.new(key, b"key id", hashlib.sha256).hexdigest()[:16]


def current_key_id() -> str:
    return key_id(_keys()[0])


def key_by_id() -> dict[str, bytes]:
    return {key_id(k): k for k in reversed(_keys())}


def subject_key(subject: str, key: bytes | None = None) -> str:
    """The subject as the journal holds it: an HMAC of its normal form (so `Cust:42` is `cust:42`)."""
    norm = normalize_subject(subject)
    return hmac.new(key or _keys()[0], norm.encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()


# -- reading ---------------------------------------------------------------------------------


@dataclass
class Erasure:
    """One request as the journal knows it: its receipt document, its subject's key, its rows."""

    request_id: str
    receipt: dict
    project_id: int | None
    subject_key: str | None
    key_id: str | None
    seq: int
    backfilled: bool = False
    rows: list = field(default_factory=list)  # [conversation_ref, record_type, position, commitment, chain_hash]
    # Journalled when it was filed, before anything was deleted, with no receipt after it (yet).
    unfinished: bool = False

    @property
    def all_projects(self) -> bool:
        return self.project_id is None


@dataclass
class Journal:
    """What `read` (or a `Follower`) found: the verified entries, and what does not verify."""

    journal_id: str = ""
    seq: int = -1
    head: str = ""
    size: int = 0  # bytes up to the end of the last complete line
    hashes: list[str] = field(default_factory=list)  # by seq
    erasures: dict[str, Erasure] = field(default_factory=dict)  # by request id, in journal order
    # Requests journalled when filed whose receipt's entry never followed: still running, or
    # stopped (a crash, an error) after deleting some or all of what they were to delete.
    intents: dict[str, Erasure] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    torn: int = 0
    # A long-running reader (/readyz) keeps only which requests are in it, not their documents and rows.
    light: bool = False
    _rows: dict = field(default_factory=dict)
    _bad: tuple | None = None  # (seq it would have had, sha256 of its bytes) of an unreadable line

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def entries(self) -> int:
        return self.seq + 1

    def holds(self, seq: int, digest: str) -> bool:
        return 0 <= seq < len(self.hashes) and self.hashes[seq] == digest

    def feed(self, line: bytes) -> None:
        """One complete line (without its newline), checked against the chain so far."""
        if self.problems:
            return
        try:
            body = json.loads(line)
            stated = body.pop("hash")
            readable = isinstance(body, dict) and line_hash(body) == stated and body.get("seq") == self.seq + 1 \
                and body.get("prev", "") == self.head
        except (ValueError, AttributeError, KeyError, TypeError):
            readable = False
        if not readable:
            if self._bad is not None:
                self.problems.append(f"entry {self._bad[0]} and the line after it do not verify")
            else:
                self._bad = (self.seq + 1, hashlib.sha256(line).hexdigest())
            return
        if self._bad is not None:
            # Only a `torn` entry may follow an unreadable line: a write that did not finish.
            if body.get("type") != "torn" or body.get("fragment_sha256") != self._bad[1]:
                self.problems.append(f"entry {self._bad[0]} does not verify: the journal was altered or damaged")
                return
            self._bad = None
            self.torn += 1
        if self.seq == -1:
            if body.get("type") != "journal" or body.get("format") != FORMAT:
                self.problems.append(f"this is not a {FORMAT} file")
                return
            self.journal_id = str(body.get("journal", ""))
        self.seq, self.head = body["seq"], stated
        self.hashes.append(stated)
        kind = body.get("type")
        if kind == "erased_rows" and not self.light:
            self._rows.setdefault(body["request_id"], []).extend(body.get("rows") or [])
        elif kind == "erasure":
            self._erasure(body)
        elif kind == "intent":
            self._intent(body)

    def _intent(self, body: dict) -> None:
        request_id = str(body["request_id"])
        if request_id in self.erasures:
            return
        light = self.light
        self.intents[request_id] = Erasure(
            request_id=request_id, receipt={} if light else (body.get("receipt") or {}),
            project_id=body.get("project_id"), subject_key=None if light else body.get("subject_key"),
            key_id=None if light else body.get("key_id"), seq=body["seq"], unfinished=True)

    def _erasure(self, body: dict) -> None:
        request_id = str(body["request_id"])
        self.intents.pop(request_id, None)
        if self.light:
            self.erasures.pop(request_id, None)
            self.erasures[request_id] = Erasure(request_id=request_id, receipt={}, project_id=body.get("project_id"),
                                                subject_key=None, key_id=None, seq=body["seq"])
            return
        rows = self._rows.pop(request_id, [])
        known = self.erasures.pop(request_id, None)
        # The same request again (a retry, a receipt recorded twice): its latest document counts,
        # and the subject's key and rows of either.
        self.erasures[request_id] = Erasure(
            request_id=request_id, receipt=body.get("receipt") or {}, project_id=body.get("project_id"),
            subject_key=body.get("subject_key") or (known.subject_key if known else None),
            key_id=body.get("key_id") or (known.key_id if known else None), seq=body["seq"],
            backfilled=bool(body.get("backfilled")) and not (known and not known.backfilled),
            rows=rows or (known.rows if known else []))

    def finish(self, trailing: bytes) -> None:
        """The bytes after the last newline: a line a crash cut short, or nothing."""
        if self._bad is not None and not self.problems:
            self.problems.append(f"entry {self._bad[0]} does not verify: the journal was altered or damaged")
        if trailing and not self.problems:
            self.problems.append(f"the last entry ({len(trailing)} bytes) is incomplete: a write that did not finish")


def read(path: Path) -> Journal | None:
    """The whole journal at `path`, verified; None when there is no file."""
    try:
        f = open(path, "rb")
    except FileNotFoundError:
        return None
    journal = Journal()
    with f:
        trailing = _feed_lines(f, journal)
    journal.finish(trailing)
    if journal.seq == -1 and not journal.problems:
        journal.problems.append("the journal is empty (not even its first line)")
    return journal


def _feed_lines(f, journal: Journal) -> bytes:
    """Feed every complete line from f's position on; returns the incomplete tail, if any."""
    pending = b""
    while chunk := f.read(_BLOCK):
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for line in lines:
            journal.feed(line)
            journal.size += len(line) + 1
    return pending


class Follower:
    """The journal as a long-running process sees it (/readyz): read once, then only what
    was appended since. Starts over when the file is replaced or shrinks."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self._identity = None
        self.journal: Journal | None = None

    def current(self) -> Journal | None:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            self._identity, self.journal = None, None
            return None
        identity = (st.st_dev, st.st_ino)
        if identity != self._identity or self.journal is None or st.st_size < self.journal.size:
            self._identity, self.journal = identity, Journal(light=True)
        if st.st_size > self.journal.size and not self.journal.problems:
            with open(self.path, "rb") as f:
                f.seek(self.journal.size)
                _feed_lines(f, self.journal)
        return self.journal


# -- writing -----------------------------------------------------------------------------------


@contextmanager
def _locked(path: Path):
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    created = not path.exists()
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX)
        yield fd
    finally:
        os.close(fd)  # releases the lock
    if created:
        _fsync_dir(path.parent)


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _tail(fd: int, path: Path) -> tuple[dict | None, bytes]:
    """The last complete line's entry (None: empty file) and the bytes a crash left after it."""
    end = os.lseek(fd, 0, os.SEEK_END)
    if end == 0:
        return None, b""
    # Find the last two newlines, reading backwards a block at a time.
    buf, pos = b"", end
    while pos > 0 and buf.count(b"\n") < 2:
        step = min(_BLOCK, pos)
        pos -= step
        buf = os.pread(fd, step, pos) + buf
    if buf.endswith(b"\n"):
        last, trailing = buf[:-1].rsplit(b"\n", 1)[-1], b""
    else:
        before, _, trailing = buf.rpartition(b"\n")
        last = before.rsplit(b"\n", 1)[-1] if before else b""
    if not last:
        if trailing:
            # A crash during the very first write: nothing was recorded, and nothing can chain after it.
            raise JournalError(f"{path} holds only an incomplete first line: move it aside (a new journal starts)")
        return None, trailing
    try:
        entry = json.loads(last)
    except ValueError:
        entry = None
    if not isinstance(entry, dict) or "seq" not in entry or "hash" not in entry:
        raise JournalError(f"the last complete line of {path} does not parse: the journal is damaged "
                           "(`manage.py reapply_erasures --check` says where)")
    return entry, trailing


def append(bodies, *, path: Path | None = None) -> tuple[str, int, str]:
    """Append entries (dicts with a `type`), chained after the last line, and fsync them.

    Returns (journal id, seq, hash) of the last one written: the head a receipt's audit event
    records. Raises JournalError when the file cannot be written."""
    path = Path(path or configured_path())
    try:
        with _locked(path) as fd:
            last, trailing = _tail(fd, path)
            out = []
            if trailing:
                fragment = None
                try:
                    fragment = json.loads(trailing)
                except ValueError:
                    pass
                if isinstance(fragment, dict) and last is not None and fragment.get("prev") == last.get("hash") \
                        and fragment.get("hash") == line_hash({k: v for k, v in fragment.items() if k != "hash"}):
                    last = fragment  # complete but for its newline
                    out.append(b"\n")
                else:
                    out.append(b"\n")
                    bodies = [{"type": "torn", "fragment_sha256": hashlib.sha256(trailing).hexdigest(),
                               "fragment_bytes": len(trailing)}, *bodies]
            if last is None:
                journal_id = str(uuid.uuid4())
                bodies = [{"type": "journal", "format": FORMAT, "journal": journal_id,
                           "created_at": datetime.now(UTC).isoformat(timespec="seconds")}, *bodies]
                seq, head = -1, ""
            else:
                seq, head = last["seq"], last["hash"]
                journal_id = None
            for body in bodies:
                seq += 1
                entry = {**body, "seq": seq, "prev": head}
                head = line_hash(entry)
                out.append(canonical({**entry, "hash": head}) + b"\n")
            data = b"".join(out)
            while data:
                data = data[os.write(fd, data):]
            os.fsync(fd)
    except OSError as exc:
        raise JournalError(f"the erasure journal {path} cannot be written: {exc}") from None
    return journal_id or _journal_id(path), seq, head


def _journal_id(path: Path) -> str:
    with open(path, "rb") as f:
        first = f.readline()
    try:
        return str(json.loads(first).get("journal", ""))
    except ValueError:
        return ""


def start(path: Path | None = None) -> tuple[str, int, str]:
    """The journal's first line, if the file does not exist yet; its head either way."""
    return append([], path=path)


def extend(path: Path, data: bytes, *, after: str) -> None:
    """Append complete lines copied from a longer copy of the same journal (a backup's, say),
    if the journal's last line is still the one they chain from (`after`, its hash)."""
    path = Path(path)
    try:
        with _locked(path) as fd:
            last, trailing = _tail(fd, path)
            if trailing or last is None or last.get("hash") != after:
                raise JournalError(f"the erasure journal {path} changed while it was being brought up to date")
            while data:
                data = data[os.write(fd, data):]
            os.fsync(fd)
    except OSError as exc:
        raise JournalError(f"the erasure journal {path} cannot be written: {exc}") from None
