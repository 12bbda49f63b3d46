"""Erasures into the journal (journal.py), and what the database says of the journal.

- `record_intent`: a request's first entry (its id, project, conversations and subject's
  key), appended and fsync'd before anything is deleted, so a request that stops half-way (a
  crash, an error) is known to the journal all the same: a restore or `reapply_erasures`
  carries it out again, and /readyz is not ready until then;
- `record_erasure`: a receipt's entry (its document, its subject's key, its rows'
  commitments), appended and fsync'd before the receipt commits (erasure.py), so no receipt
  exists without its entry; `record_check`, a maintenance window's verdict on it, likewise.
  The receipt's audit event records the journal's head after it (the anchor): a journal cut
  back past that line, or another journal, is noticed.
- `for_backup` (`plugins.backup_extras`): every receipt the database holds that the journal
  lacks (a receipt from before the journal existed, or a journal started again) is
  appended, then the journal is copied beside the backup and named in its manifest.
- `readiness` (/readyz): "ok" unless the database may serve what an erasure removed: the
  journal holds an erasure the database shows no sign of (a restored backup, a point-in-time
  recovery, a request that stopped before its deletion committed), the journal the database
  last wrote to is missing or another one, or it is damaged.
- `replace`: start a new journal where the old one is lost or damaged (moved aside, never
  deleted), holding every receipt the database has, and say so in the audit log.
"""

import hashlib
import os
import threading
from datetime import UTC, datetime
from pathlib import Path

from django.db import transaction

from conversations import store
from conversations.backups import BackupError
from conversations.models import AuditEvent

from . import journal, lease
from .models import DeletionReceipt, ErasedRow

ROWS_PER_ENTRY = 2000
# Audit events whose detail holds {"journal": {"journal", "seq", "hash"}}: the head as the database last knew it.
ANCHORS = ("deletion.receipt", "erasure_journal.replaced")
# Audit events that show an erasure happened in this database (its target_id is the request id):
# the deletion's last transaction commits before its journal entry is written.
HAPPENED = ("deletion.executed", "deletion.reapplied")
ID_BATCH = 500


def copy_path(backup_path: Path) -> Path:
    return backup_path.with_name(backup_path.name + ".erasure-journal")


def _erased_rows(request_id) -> list[list]:
    rows = (ErasedRow.everywhere.filter(receipt_id=request_id).order_by("id")
            .values_list("conversation_ref", "record_type", "position", "commitment", "chain_hash"))
    return [[ref, kind, position, bytes(c).hex() if c is not None else None, bytes(h).hex() if h is not None else None]
            for ref, kind, position, c, h in rows.iterator(chunk_size=ROWS_PER_ENTRY)]


def erasure_entries(receipt: DeletionReceipt, *, subject: str, backfilled: bool = False) -> list[dict]:
    """The entries that journal one receipt: its erased rows' commitments, then the erasure itself."""
    request_id = str(receipt.pk)
    rows = _erased_rows(receipt.pk)
    entries = [{"type": "erased_rows", "request_id": request_id, "rows": rows[i:i + ROWS_PER_ENTRY]}
               for i in range(0, len(rows), ROWS_PER_ENTRY)]
    entry = {"type": "erasure", "request_id": request_id, "receipt": receipt.as_document(),
             "project_id": receipt.project_id, "rows": len(rows),
             "subject_key": journal.subject_key(subject) if subject else None,
             "key_id": journal.current_key_id() if subject else None}
    if backfilled:
        entry["backfilled"] = True
    return [*entries, entry]


def record_erasure(receipt: DeletionReceipt, *, subject: str) -> dict:
    """Journal a receipt about to be stored; returns the anchor its audit event records."""
    journal_id, seq, head = journal.append(erasure_entries(receipt, subject=subject))
    return {"journal": journal_id, "seq": seq, "hash": head}


def record_intent(receipt: DeletionReceipt, *, subject: str) -> None:
    """Journal a request as it is filed, before anything of it is deleted (`receipt` as filed, not
    stored): what a restore needs to carry it out again should it never reach its receipt."""
    entry = {"type": "intent", "request_id": str(receipt.pk), "receipt": receipt.as_document(),
             "project_id": receipt.project_id, "subject_key": journal.subject_key(subject) if subject else None,
             "key_id": journal.current_key_id() if subject else None}
    journal.append([entry])


def record_check(receipt: DeletionReceipt, verification: dict) -> dict:
    """Journal a window's verdict on a receipt about to be stored (window.py): the request's
    document again, now with that verdict. The journal keeps the latest document of a request
    and the subject's key and rows of its first entry, so a restore brings the receipt back
    as verified, not waiting for a window that already ran."""
    document = {**receipt.as_document(), "verification": verification}
    entry = {"type": "erasure", "request_id": str(receipt.pk), "receipt": document,
             "project_id": receipt.project_id, "checked": True}
    journal_id, seq, head = journal.append([entry])
    return {"journal": journal_id, "seq": seq, "hash": head}


def backfill(path: Path | None = None) -> int:
    """Append every receipt of the database the journal does not hold (without a subject key:
    a receipt keeps only the subject's plain SHA-256); returns how many."""
    path = Path(path or journal.configured_path())
    current = journal.read(path)
    if current is not None and not current.ok:
        raise journal.JournalError(f"the erasure journal {path} does not verify: {'; '.join(current.problems)}")
    known = set(current.erasures) if current is not None else set()
    missing = [r for r in DeletionReceipt.everywhere.order_by("created_at", "id").iterator(chunk_size=ID_BATCH)
               if str(r.pk) not in known]
    for receipt in missing:
        journal.append(erasure_entries(receipt, subject="", backfilled=True), path=path)
    if current is None and not missing:
        journal.start(path)
    return len(missing)


def copy_verified(source: Path, target: Path) -> journal.Journal:
    """Copy the journal's complete lines to `target` (never overwritten), fsync'd, and read the copy back."""
    current = journal.read(source)
    if current is None or not current.ok:
        why = "is missing" if current is None else f"does not verify: {'; '.join(current.problems)}"
        raise journal.JournalError(f"the erasure journal {source} {why}")
    partial = target.with_name(f".{target.name}.partial")
    target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    try:
        with open(source, "rb") as src:
            data = src.read(current.size)
        fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.link(partial, target)  # fails rather than overwrite
    finally:
        partial.unlink(missing_ok=True)
    copied = journal.read(target)
    if copied is None or not copied.ok or copied.head != current.head:
        raise journal.JournalError(f"the copy {target} of the erasure journal does not verify")
    return copied


def for_backup(path: Path) -> dict:
    """plugins.backup_extras: called once the database copy is made, so the journal copied is at
    least as new as the backup's snapshot (an erasure between the two is re-applied on restore)."""
    target = copy_path(Path(path))
    if target.exists():
        raise BackupError(f"{target} already exists; a backup never overwrites one")
    source = journal.configured_path()
    try:
        backfill(source)
        copied = copy_verified(source, target)
    except journal.JournalError as exc:
        raise BackupError(f"{exc}. A backup set without its erasure journal would bring erased data back on "
                          "restore; see `manage.py reapply_erasures --check` (docs/operators.md, 'Backups')") from None
    data = target.read_bytes()
    return {"erasure_journal": {"file": target.name, "journal": copied.journal_id, "entries": copied.entries,
                                "head": copied.head, "bytes": copied.size,
                                "sha256": hashlib.sha256(data).hexdigest()}}


# -- what the database says of the journal --------------------------------------------------------


def anchor() -> dict | None:
    """The journal's head as this database last recorded it (None: never, or before the journal)."""
    detail = (AuditEvent.everywhere.filter(action__in=ANCHORS).order_by("-id")
              .values_list("detail", flat=True).first())
    found = (detail or {}).get("journal")
    return found if isinstance(found, dict) and found.get("journal") else None


def anchor_problem(current: journal.Journal | None) -> str | None:
    """Why the journal is not the one this database last wrote to (None: it is, or there is none to compare)."""
    expected = anchor()
    if expected is None:
        return None
    if current is None:
        return (f"the database's receipts name erasure journal {expected['journal']}, and there is no journal at "
                f"{journal.configured_path()}")
    if current.journal_id != expected["journal"]:
        return f"the database's receipts name erasure journal {expected['journal']}, not {current.journal_id}"
    if not current.holds(int(expected["seq"]), str(expected["hash"])):
        return (f"the erasure journal lacks (or holds another) entry {expected['seq']}, which the database "
                "recorded: it was cut back or altered")
    return None


def not_shown(request_ids: list[str], confirmed: set[str] | None = None) -> list[str]:
    """The requests of which this database shows no sign: no receipt, no audit event of the deletion.
    `confirmed` (request ids already seen here) is read and extended."""
    confirmed = confirmed if confirmed is not None else set()
    todo = [r for r in request_ids if r not in confirmed]
    found: set[str] = set()
    for i in range(0, len(todo), ID_BATCH):
        chunk = todo[i:i + ID_BATCH]
        found |= {str(x) for x in DeletionReceipt.everywhere.filter(id__in=chunk).values_list("id", flat=True)}
    rest = [r for r in todo if r not in found]
    for i in range(0, len(rest), ID_BATCH):
        chunk = rest[i:i + ID_BATCH]
        found |= set(AuditEvent.everywhere.filter(action__in=HAPPENED, target_id__in=chunk)
                     .values_list("target_id", flat=True))
    confirmed |= found
    return [r for r in todo if r not in found]


class _Readiness:
    """Per process: the journal followed as it grows, and the requests already seen applied.
    The newest erasure is asked about on every probe all the same: a database swapped under a
    running server for an older copy lacks it first."""

    def __init__(self):
        self.follower = None
        self.confirmed: set[str] = set()
        self.journal_id = ""
        # A server's threads probe at once: one reads the journal at a time.
        self._lock = threading.Lock()

    def __call__(self) -> str:
        with self._lock:
            return self._check()

    def _check(self) -> str:
        path = journal.configured_path()
        if self.follower is None or self.follower.path != path:
            self.follower, self.confirmed = journal.Follower(path), set()
        current = self.follower.current()
        if current is not None and not current.ok:
            return "journal_damaged"
        if anchor_problem(current):
            return "journal_missing" if current is None else "journal_mismatch"
        if current is None:
            return "ok"
        if current.journal_id != self.journal_id:
            self.journal_id, self.confirmed = current.journal_id, set()
        ids = list(current.erasures)
        if ids:
            self.confirmed.discard(ids[-1])
        if current.intents and not deletion_running():
            ids += list(current.intents)
        return "not_reapplied" if not_shown(ids, self.confirmed) else "ok"


def deletion_running() -> bool:
    """A request being carried out now: its intent is journalled and its deletion not yet done."""
    held = lease.current()
    return held is not None and held.kind == "deletion" and not lease.is_stuck(held)


readiness = _Readiness()


def set_aside() -> Path | None:
    """Move the configured journal aside (renamed beside itself, never deleted); its new name."""
    path = journal.configured_path()
    if not path.exists():
        return None
    moved = path.with_name(f"{path.name}.set-aside-{datetime.now(UTC).strftime('%Y%m%dT%H%M%S.%fZ')}")
    os.rename(path, moved)
    return moved


def replace(*, actor: str, reason: str) -> dict:
    """Start a new journal where the configured one is lost or damaged: the damaged file is moved
    aside (kept, never deleted), the new one holds every receipt the database has, and an audit
    event says so and anchors the new journal. Returns what was done."""
    path = journal.configured_path()
    moved = set_aside()
    backfilled = backfill(path)
    journal_id, seq, head = journal.start(path)
    head_anchor = {"journal": journal_id, "seq": seq, "hash": head}
    detail = {"reason": reason, "journal": head_anchor, "receipts_backfilled": backfilled,
              "set_aside": moved.name if moved else None}
    with transaction.atomic():
        store.record_audit(actor=actor, action="erasure_journal.replaced", target_type="erasure_journal",
                           target_id=journal_id, detail=detail, project_id=None)
    return detail
