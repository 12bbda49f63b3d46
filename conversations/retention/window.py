"""Deletion requests in two phases: the rows go at once, the files are made clean and searched
in a maintenance window, once for every request filed since the last one.

Phase one (erasure.py, steps 1-5): the request deletes the subject's rows and files its
receipt, `erased`: from that moment no read, search, export or recall shows them. It costs
what the subject holds. Phase two (here, steps 6-7 of erasure.py for many requests at once):
the window rewrites what held the rows (on PostgreSQL only the partitions the requests'
conversations were in: conversations/partitions.py) and searches the files once with every
request's needles, then adds each request's verdict to its receipt (a ReceiptCheck:
`verified`, `verified_except_wal`, `found`, …). A window costs one scrub and one search
however many requests it covers: a hundred requests cost about what one does.

What a request will look for (its needles: the subject, samples of the deleted texts, the
conversations' ids) is personal data, and cannot wait in the database being cleaned: it
waits in a file of its own under MEMORYUI_ERASURE_PENDING_DIR (0600, the data folder by
default), removed when the window has searched for it. With several app servers, point it
at storage they share, like the erasure journal.

A pending file can be lost (a data folder replaced, a restore into a fresh one). What it
held cannot be had again, and must not be: the window then cleans the partitions that held
the request's conversations, searches for their ids where the files hold them as text
(SQLite), and gives the receipt `not_possible`, saying its texts were not searched for,
rather than leave it waiting past its deadline for ever. A receipt names the pending folder it
was filed with (a random id in the folder): one filed with another folder (a server that does
not share it) is left waiting for that folder's window, unless the database was restored
since it was filed.

Each request must be verified by its deadline (`verify_by`: MEMORYUI_ERASURE_DEADLINE_HOURS
after it was filed, 24 by default, at most 720). `manage.py erasure_window` runs a window
(from cron, hourly or daily); the receipts page and the API can run one at once. A request
past its deadline is an alert: on the admin pages and as `memoryui_erasure_overdue` in
/metrics. With MEMORYUI_ERASURE_VERIFY=at-once every request runs its own window before it
answers (one request's receipt is then verified when it is filed, at the cost of a search
of the files each time).
"""

import json
import logging
import os
import time
import uuid
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Max
from django.utils import timezone
from prometheus_client.core import GaugeMetricFamily

from conversations import partitions, projects, store
from conversations.models import AuditEvent

from . import erasure_journal, erasure_receipt, erasure_scrub, erasure_verify, pgfiles
from .lease import Lease, in_turn, maintenance
from .models import DeletionReceipt, ReceiptCheck

log = logging.getLogger("memoryui.retention")

WINDOW, AT_ONCE = "window", "at-once"
MAX_DEADLINE_HOURS = 720


def mode() -> str:
    return AT_ONCE if str(settings.MEMORYUI_ERASURE_VERIFY).strip().lower() == AT_ONCE else WINDOW


def deadline_hours() -> float:
    return min(max(float(settings.MEMORYUI_ERASURE_DEADLINE_HOURS), 0.0), MAX_DEADLINE_HOURS)


def pending_dir() -> Path:
    path = Path(settings.MEMORYUI_ERASURE_PENDING_DIR)
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    return path


DIR_ID = ".pending-folder-id"
# What shows that the database was restored since a receipt was filed (reapply.py's audit events).
RESTORED = ("restore.erasures_reapplied", "restore.without_erasure_journal")


def pending_dir_id() -> str:
    """The pending folder's own random id, made once: a receipt records it, so a window knows
    whether a pending file it cannot find would have been in its folder."""
    path = pending_dir() / DIR_ID
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return path.read_text(encoding="ascii").strip()
    with os.fdopen(fd, "w", encoding="ascii") as f:
        f.write(uuid.uuid4().hex)
        f.flush()
        os.fsync(f.fileno())
    return path.read_text(encoding="ascii").strip()


@dataclass
class Pending:
    """What a filed request's window needs: what to look for and where."""

    receipt_id: str
    filed_at: str
    verify_by: str
    subject_given: bool
    candidates: list[str]
    id_needles: list[str]
    touched: list[str]
    files_left: dict
    seconds: dict = field(default_factory=dict)
    xid: int | None = None
    # Made from its receipt, its file being lost: nothing of its texts to search for.
    lost: bool = False

    @property
    def path(self) -> Path:
        return pending_dir() / f"{self.receipt_id}.json"


def save(pending: Pending) -> None:
    """Written (and flushed to disk) before the receipt that names it: a crash between leaves a
    file whose receipt does not exist, which the next window drops."""
    path = pending.path
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(asdict(pending), f, ensure_ascii=False)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _load_all() -> list[Pending]:
    out = []
    for path in sorted(pending_dir().glob("*.json")):
        try:
            out.append(Pending(**json.loads(path.read_text(encoding="utf-8"))))
        except (OSError, ValueError, TypeError) as exc:
            log.error("erasure window: %s cannot be read (%s); it is left for an operator", path.name, exc)
    return out


def _forget(pending: Pending) -> None:
    try:
        pending.path.unlink()
    except FileNotFoundError:
        pass


def deadline_for(filed_at: datetime) -> datetime:
    return filed_at + timedelta(hours=deadline_hours())


def _readable(moment: str) -> str:
    """An ISO moment as a note on a receipt says it (the receipt's verify_by keeps it exact)."""
    return datetime.fromisoformat(moment).astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


def erased_verification(*, pending: Pending, seconds: dict) -> dict:
    """The receipt's verification as phase one files it: nothing searched yet, and when it will be."""
    return {
        "database": connection.vendor, "status": "erased", "found": None, "strings_checked": 0,
        "strings_set_aside": 0, "conversation_ids_checked": 0, "subject_checked": False, "files_searched": 0,
        "bytes_searched": 0, "files": [], "found_in": [], "found_count": 0, "scope": erasure_receipt.scope(),
        "searched": {}, "wal": {"status": "not_searched"}, "rewrite": {}, "uploads": pending.files_left,
        "verify_passes": 0, "seconds": seconds, "verify_by": pending.verify_by, "pending_folder": pending_dir_id(),
        "notes": ["the rows are deleted; the next maintenance window cleans what is left of them in the "
                  "database files (on SQLite, their words in the full-text index too) and searches the files, "
                  f"by {_readable(pending.verify_by)}"],
    }


@dataclass
class WindowResult:
    receipts: list[str] = field(default_factory=list)
    statuses: dict = field(default_factory=dict)
    dropped: int = 0
    unindexed: int = 0  # SQLite: queued index entries removed with no request waiting for them
    seconds: float = 0.0
    touched: list[str] = field(default_factory=list)
    scrub_wal_bytes: int | None = None
    lost: int = 0  # receipts whose pending file was gone: verified as far as possible without it
    elsewhere: int = 0  # receipts whose pending file is in another server's folder: left for it

    def visible(self) -> list[str]:
        """The receipts checked that the current scope sees: a window runs for every project's
        requests at once, and a project is told of its own only (no id, no count of others')."""
        if not self.receipts:
            return []
        seen = {str(pk) for pk in DeletionReceipt.objects.filter(
            pk__in=[uuid.UUID(r) for r in self.receipts]).values_list("pk", flat=True)}
        return [r for r in self.receipts if r in seen]


def run_window(*, actor: str) -> WindowResult:
    """Scrub and search once for every request waiting; each receipt gets its verdict."""
    result = WindowResult()
    started = time.monotonic()
    with projects.scoped(projects.EVERY), maintenance(kind="deletion", actor=actor) as lease:
        waiting = _load_all()
        known = set(str(pk) for pk in DeletionReceipt.everywhere.filter(
            pk__in=[uuid.UUID(p.receipt_id) for p in waiting]).values_list("pk", flat=True)) if waiting else set()
        for pending in [p for p in waiting if p.receipt_id not in known]:
            # Its request failed before its receipt was stored: it has nothing to verify against.
            _forget(pending)
            result.dropped += 1
        waiting = [p for p in waiting if p.receipt_id in known]
        waiting += _lost({p.receipt_id for p in waiting}, result)
        if not waiting:
            # Index words a request queued may have no request left to wait for them (it failed
            # after deleting its rows, or its pending file is gone): they go all the same.
            result.unindexed = erasure_scrub.remove_deferred_index_entries(lease)
            if result.unindexed:
                log.warning("erasure window: %d deleted rows' index entries removed with no request "
                            "waiting for them", result.unindexed)
            result.seconds = time.monotonic() - started
            return result
        _verify_all(waiting, lease, result)
    result.seconds = time.monotonic() - started
    return result


# What phase one did with files outside the database, where its receipt does not say (filed before it did).
NOTHING_LEFT = {"status": "verified", "removed": [], "found_in": [], "problems": [], "files_searched": 0}


def _lost(have: set[str], result: WindowResult) -> list[Pending]:
    """The receipts waiting for a window whose pending file is gone from this folder, as
    Pendings made from what the receipt holds (no texts: those were only in the file). One
    filed with another pending folder is left to that folder's window (counted in
    `result.elsewhere`), unless the database was restored since."""
    here = pending_dir_id()
    restored_at = AuditEvent.everywhere.filter(action__in=RESTORED).aggregate(last=Max("at"))["last"]
    out = []
    for receipt in DeletionReceipt.everywhere.filter(verify_by__isnull=False, checks__isnull=True).order_by(
            "created_at", "id"):
        if str(receipt.pk) in have:
            continue
        folder = receipt.filed_verification.get("pending_folder")
        if folder not in (None, here) and (restored_at is None or restored_at <= receipt.created_at):
            result.elsewhere += 1
            continue
        ids = [uuid.UUID(c) for c in receipt.conversation_ids]
        out.append(Pending(
            receipt_id=str(receipt.pk), filed_at=receipt.created_at.isoformat(),
            verify_by=receipt.verify_by.isoformat(), subject_given=False, candidates=[],
            id_needles=erasure_verify.id_needles(ids), touched=partitions.partitions_for(ids),
            files_left=receipt.filed_verification.get("uploads") or dict(NOTHING_LEFT), lost=True))
    if result.elsewhere:
        log.warning("erasure window: %d requests wait for pending files in another folder than %s "
                    "(MEMORYUI_ERASURE_PENDING_DIR must be one folder every server shares)",
                    result.elsewhere, pending_dir())
    return out


def _verify_all(waiting: list[Pending], lease: Lease, result: WindowResult) -> dict:
    needles = list(dict.fromkeys(n for p in waiting for n in p.candidates + p.id_needles))
    touched = {t for p in waiting for t in p.touched}
    xid = max((p.xid for p in waiting if p.xid is not None), default=None)
    seconds = {}
    rewrite: dict = {}
    wal = pgfiles.WalState()
    clock, wal_before = time.monotonic(), pgfiles.wal_position()
    notes = erasure_scrub.scrub_disk(xid, lease, rewrite, touched)
    seconds["scrub"] = round(time.monotonic() - clock, 3)
    if wal_before is not None:
        # What the rewrite wrote to the WAL (and so to every replica and archive), apart from the
        # segment switches that then overwrite recycled segments still holding erased text.
        rewrite["wal_bytes"] = pgfiles.wal_position() - wal_before
        result.scrub_wal_bytes = rewrite["wal_bytes"]
    clock = time.monotonic()
    search, set_aside = erasure_verify.verify(needles, notes, lease, wal, touched)
    seconds["verify"] = round(time.monotonic() - clock, 3)
    verdicts = {}
    for pending in waiting:
        own = set(pending.candidates + pending.id_needles)
        mine = search.without({i for i, n in enumerate(needles) if n not in own})
        checked = erasure_receipt.Checked(mine, {s for s in set_aside if s in own}, list(notes), rewrite, wal)
        verification = erasure_receipt.verification(
            checked, subject=pending.candidates[0] if pending.subject_given else "",
            candidates=pending.candidates, id_needles=pending.id_needles, files_left=pending.files_left,
            seconds={**pending.seconds, **seconds, "window_requests": len(waiting)})
        verification["window"] = {"requests": len(waiting), "filed_at": pending.filed_at,
                                  "verify_by": pending.verify_by, "checked_at": timezone.now().isoformat()}
        if pending.lost:
            # Its ids found would still be found: only a clean search is not enough to say verified.
            verification["status"] = "found" if verification["status"] == "found" else "not_possible"
            verification["pending_lost"] = True
            verification["notes"].append(
                "what this request was to search for (its subject, samples of its texts) waited in a pending file "
                "that is gone (a data folder replaced or restored): the database files that held its rows were "
                "cleaned" + (", and searched for its conversations' ids" if pending.id_needles else "")
                + ", but not searched for its texts")
        verdicts[pending.receipt_id] = verification
        in_turn(lambda p=pending, v=verification: _store_check(p, v))
        _forget(pending)
        result.receipts.append(pending.receipt_id)
        result.lost += pending.lost
        result.statuses[pending.receipt_id] = verification["status"]
        if verification["status"] != "verified":
            log.warning("deletion %s: verification %s", pending.receipt_id, verification["status"])
    result.touched = sorted(touched)
    return verdicts


def _store_check(pending: Pending, verification: dict) -> None:
    receipt = DeletionReceipt.everywhere.get(pk=uuid.UUID(pending.receipt_id))
    # The journal first, as for the receipt: a restore then brings the verdict back with it.
    anchor = erasure_journal.record_check(receipt, verification)
    with transaction.atomic():
        ReceiptCheck.objects.create(receipt=receipt, status=verification["status"], verification=verification)
        store.record_audit(actor="system:erasure window", action="deletion.verified", target_type="deletion_receipt",
                           target_id=pending.receipt_id, project_id=receipt.project_id,
                           detail={"status": verification["status"],
                                   "strings_checked": verification["strings_checked"],
                                   "files_searched": verification["files_searched"],
                                   "window_requests": verification["window"]["requests"], "journal": anchor})


def waiting_receipts():
    """Receipts of the current scope still waiting for their window, oldest deadline first."""
    return (DeletionReceipt.objects.filter(verify_by__isnull=False, checks__isnull=True)
            .order_by("verify_by", "id"))


def overdue_count(now=None) -> int:
    now = now or timezone.now()
    with projects.scoped(projects.EVERY):
        return DeletionReceipt.objects.filter(verify_by__lt=now, checks__isnull=True).count()


def waiting_count() -> int:
    with projects.scoped(projects.EVERY):
        return DeletionReceipt.objects.filter(verify_by__isnull=False, checks__isnull=True).count()


def gauges():
    """/metrics at scrape time: requests waiting for their window, and those past their deadline."""
    waiting = GaugeMetricFamily("memoryui_erasure_waiting", "Deletion requests whose files wait for the window")
    overdue = GaugeMetricFamily("memoryui_erasure_overdue",
                                "Deletion requests past their deadline without a verdict (an alert)")
    waiting.add_metric([], waiting_count())
    overdue.add_metric([], overdue_count())
    yield waiting
    yield overdue
