"""Re-applying the erasures a database shows no sign of (journal.py says why they can be missing).

`manage.py restore` (through `plugins.restore_prepare` and `plugins.restore_finish`) and
`manage.py reapply_erasures` (after any other restore: a provider's snapshot, a point-in-time
recovery) both end here:

1. before anything is loaded, the journals are gathered and checked (`gather`): the servers'
   (the one the settings name, or one named on the command line: a restore into a fresh data
   folder does not find it there) and the copy beside the backup. Each must verify, and they
   must be one journal (the shorter ones prefixes of the longest). The servers' journal
   missing (the copy knows only what was erased before the backup), a journal damaged, or two
   that disagree refuse the restore, unless the operator says `--without-erasure-journal`
   (then what still verifies is used, a damaged journal is moved aside, and the audit log
   says what was lost);
2. the configured journal is brought up to the longest copy (`adopt`), and compared with the
   head the restored database last recorded (erasure_journal.anchor);
3. every erasure whose receipt the database lacks, and every request journalled when filed
   that never reached its receipt (a crash, an error: its intent), is carried out again
   (`reapply`), in journal order: if the database shows no sign of it (no receipt, no audit event of its
   deletion), what it still holds of it goes through the deletion request's own path
   (erasure.execute_deletion): its conversations by id, and its subject, found by hashing
   every stored subject with the journal's key (the backup has the subject's rows; the
   journal has only the key's HMAC of it). That request's receipt says it re-applied the
   earlier one after a restore of which backup when. Then the earlier receipt is inserted
   again as it was, with the commitments of the rows it erased, and a `deletion.reapplied`
   audit event, in one transaction: a crash before it leaves the erasure pending, and the
   next run finds nothing left to delete and stores the receipt. A request that never reached
   its receipt has none to bring back: the audit event alone says it was carried out.

/readyz answers not ready (erasure_journal.readiness) until no erasure is pending.
"""

import logging
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from django.db import transaction
from django.utils.dateparse import parse_datetime

from conversations import idempotency, projects, store
from conversations.backups import BackupError
from conversations.errors import StoreError
from conversations.facts import erasure as facts_erasure
from conversations.models import Conversation, Project

from . import erasure, journal
from .erasure_journal import (
    ID_BATCH,
    ROWS_PER_ENTRY,
    anchor_problem,
    copy_path,
    copy_verified,
    deletion_running,
    not_shown,
    set_aside,
)
from .erasure_journal import replace as replace_journal
from .lease import in_turn
from .models import DeletionReceipt, ErasedRow, MaintenanceLease, ReceiptCheck

log = logging.getLogger("memoryui.retention")

ACTOR = "system:erasure journal"
FLAG = "--without-erasure-journal"


@dataclass
class Source:
    label: str
    path: Path
    journal: journal.Journal


@dataclass
class Gathered:
    """What `gather` found: the journal to use (None: none usable) and what is wrong."""

    chosen: Source | None
    problems: list[str] = field(default_factory=list)
    configured_damaged: bool = False
    disagree: bool = False


def gather(*, backup_path: Path | None = None, manifest: dict | None = None,
           given: Path | None = None) -> Gathered:
    configured = journal.configured_path()
    candidates = [("configured", configured)]
    if backup_path is not None:
        candidates.append(("backup's copy", copy_path(Path(backup_path))))
    if given is not None:
        candidates.append(("given", Path(given).resolve()))
    found, problems, damaged, seen = [], [], False, set()
    recorded = (manifest or {}).get("erasure_journal")
    for label, path in candidates:
        if path in seen:
            continue
        seen.add(path)
        current = journal.read(path)
        if current is None:
            if label == "given":
                problems.append(f"{path} does not exist")
            elif label == "backup's copy" and recorded:
                problems.append(f"the backup's copy of the erasure journal ({path.name}) is missing; its manifest "
                                "names it")
            continue
        if not current.ok:
            problems.append(f"the {label} erasure journal {path} does not verify: {'; '.join(current.problems)}")
            damaged = damaged or label == "configured"
            continue
        if label == "backup's copy" and recorded and (recorded.get("journal") != current.journal_id
                                                       or recorded.get("head") != current.head):
            problems.append(f"the backup's copy of the erasure journal ({path.name}) is not the one its manifest "
                            "names")
            continue
        found.append(Source(label, path, current))
    gathered = Gathered(chosen=None, problems=problems, configured_damaged=damaged)
    if not found:
        if not problems:
            where = f"{configured}" + (f" nor beside the backup ({candidates[1][1].name})" if backup_path else "")
            problems.append(f"there is no erasure journal: none at {where}")
        return gathered
    if not damaged and given is None and not any(s.label == "configured" for s in found):
        # A backup's copy knows only what was erased before the backup: the servers' journal knows the rest.
        problems.append(f"the servers' erasure journal is not at {configured} (MEMORYUI_ERASURE_JOURNAL): name it "
                        "with --erasure-journal; the backup's copy holds only what was erased before the backup")
    longest = max(found, key=lambda s: s.journal.entries)
    for other in found:
        if other.journal.journal_id != longest.journal.journal_id \
                or not longest.journal.holds(other.journal.seq, other.journal.head):
            gathered.disagree = True
            problems.append(f"the {other.label} erasure journal {other.path} and the {longest.label} one "
                            f"{longest.path} are not one journal: name the one to use with --erasure-journal and "
                            "move the other aside")
    gathered.chosen = None if gathered.disagree else longest
    return gathered


def adopt(source: Source) -> journal.Journal:
    """Make the configured journal hold everything `source` holds (the same journal, longer)."""
    configured = journal.configured_path()
    if source.path == configured:
        return source.journal
    live = journal.read(configured)
    if live is None:
        copy_verified(source.path, configured)
    elif source.journal.entries > live.entries:
        with open(source.path, "rb") as f:
            f.seek(live.size)
            journal.extend(configured, f.read(source.journal.size - live.size), after=live.head)
    return journal.read(configured)


# -- matching what the database holds ------------------------------------------------------------


def _stored_subjects(*, as_typed: bool) -> set[str]:
    column = "subject" if as_typed else "subject_norm"
    found = set(Conversation.everywhere.exclude(**{column: ""}).values_list(column, flat=True).distinct())
    found |= facts_erasure.stored_subjects(as_typed=as_typed)
    if not as_typed:
        found |= idempotency.stored_subjects()
    return found


class _Subjects:
    """The stored subjects by the journal's HMAC of them (per key) and by their plain SHA-256
    (receipts journalled from the database, which keep only that), computed once each."""

    def __init__(self):
        self._by_key: dict[str, dict[str, str]] = {}
        self._by_sha256: dict[str, str] | None = None

    def find(self, record: journal.Erasure) -> tuple[str, str | None]:
        """(subject or "", problem or None)."""
        if record.subject_key:
            key = journal.key_by_id().get(record.key_id or "")
            if key is None:
                return "", (f"erasure {record.request_id} was journalled with another SECRET_KEY (key id "
                            f"{record.key_id}): run this with the SECRET_KEY the servers used, or name it in "
                            "SECRET_KEY_FALLBACKS")
            if record.key_id not in self._by_key:
                self._by_key[record.key_id] = {journal.subject_key(s, key): s
                                               for s in _stored_subjects(as_typed=False)}
            return self._by_key[record.key_id].get(record.subject_key, ""), None
        sha = record.receipt.get("subject_sha256")
        if not sha:
            return "", None
        if self._by_sha256 is None:
            self._by_sha256 = {erasure.subject_sha256(s): s for s in _stored_subjects(as_typed=True)}
        return self._by_sha256.get(sha, ""), None


def subject_of(record: journal.Erasure) -> tuple[str, str | None]:
    """The stored subject an erasure names, or "" (and why not, where it cannot tell)."""
    return _Subjects().find(record)


# -- carrying them out again -----------------------------------------------------------------------


@dataclass
class Outcome:
    reapplied: list[dict] = field(default_factory=list)  # {request_id, receipt_id, status}
    receipts_back: int = 0
    held_nothing: int = 0
    problems: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        out = [f"re-applied {len(self.reapplied)} erasure{'s' if len(self.reapplied) != 1 else ''} the database "
               f"still held ({self.held_nothing} held nothing of theirs); {self.receipts_back} receipt"
               f"{'s' if self.receipts_back != 1 else ''} back"]
        out += [f"  {r['request_id']} → receipt {r['receipt_id']} ({r['status']})" for r in self.reapplied]
        return out


def pending(current: journal.Journal) -> tuple[list[journal.Erasure], set[str]]:
    """The erasures whose receipt this database lacks (journal order), then the requests that
    never reached their receipt (their intent only), and which of all of them it shows no sign
    of at all (those still to delete)."""
    ids = list(current.erasures)
    have = set()
    for i in range(0, len(ids), ID_BATCH):
        chunk = ids[i:i + ID_BATCH]
        have |= {str(x) for x in DeletionReceipt.everywhere.filter(id__in=chunk).values_list("id", flat=True)}
    lacking = [current.erasures[r] for r in ids if r not in have]
    if not deletion_running():  # else one of them is that deletion, under way
        lacking += list(current.intents.values())
    unseen = set(not_shown([r.request_id for r in lacking]))
    return lacking, unseen


def _project_here(record: journal.Erasure) -> bool:
    if record.all_projects:
        return True
    return Project.objects.filter(pk=record.project_id, slug=record.receipt.get("project")).exists()


def reapply(current: journal.Journal, *, why: dict, actor: str = ACTOR) -> Outcome:
    """Carry out again every erasure of `current` whose receipt the database lacks (see the module docstring).
    `why` goes into each new receipt (`verification.reapplied`): which backup, restored when."""
    outcome = Outcome()
    lacking, unseen = pending(current)
    subjects = _Subjects()
    for record in lacking:
        new_receipt = None
        if record.request_id in unseen and _project_here(record):
            subject, problem = subjects.find(record)
            if problem:
                outcome.problems.append(problem)
                continue
            ids = [str(i) for i in Conversation.everywhere.filter(pk__in=record.receipt.get("conversation_ids") or [])
                   .values_list("pk", flat=True)]
            if subject or ids:
                note = {**why, "request_id": record.request_id, "request_created_at": record.receipt.get("created_at")}
                if record.unfinished:
                    note["unfinished"] = True  # it stopped before its receipt: there is none to bring back
                scope = projects.EVERY if record.all_projects else projects.one(record.project_id)
                try:
                    with projects.scoped(scope):
                        new_receipt = erasure.execute_deletion(subject=subject, conversation_ids=ids, actor=actor,
                                                               kind="reapplied", all_projects=record.all_projects,
                                                               reapplies=note)
                except StoreError as exc:  # another maintenance run holds the lease, say: it stays pending
                    outcome.problems.append(f"erasure {record.request_id} was not re-applied: {exc}")
                    continue
                outcome.reapplied.append({"request_id": record.request_id, "receipt_id": str(new_receipt.pk),
                                          "status": new_receipt.verification.get("status")})
            else:
                outcome.held_nothing += 1
        elif record.request_id in unseen:
            outcome.held_nothing += 1  # its project is not in this database: nothing of it is
        if record.unfinished:
            if record.request_id in unseen:
                in_turn(lambda record=record, new_receipt=new_receipt: _unfinished_done(record, new_receipt, why,
                                                                                        actor))
            continue
        if in_turn(lambda record=record, new_receipt=new_receipt: _receipt_back(record, new_receipt, why, actor)):
            outcome.receipts_back += 1
    return outcome


def _unfinished_done(record: journal.Erasure, new_receipt, why: dict, actor: str) -> None:
    """A request that stopped before its receipt, now carried out: the audit event that shows it
    happened here (erasure_journal.HAPPENED), so it is not carried out again."""
    with transaction.atomic():
        store.record_audit(actor=actor, action="deletion.reapplied", target_type="deletion_request",
                           target_id=record.request_id, project_id=record.project_id if _project_here(record) else None,
                           detail={**why, "receipt_restored": False, "unfinished": True,
                                   "receipt_id": str(new_receipt.pk) if new_receipt else None})


def _receipt_back(record: journal.Erasure, new_receipt, why: dict, actor: str) -> bool:
    """The earlier receipt as it was, its rows' commitments and the audit event: one transaction.
    False where its project is not in this database (the event still says it was seen)."""
    doc = record.receipt
    back = _project_here(record)
    verdict = doc.get("verification") or {}
    # A request filed in two phases comes back with the window's verdict it was journalled
    # with. One whose window had not run by then is `erased` and waits for no window here: the
    # files it would have searched are this database's, and its re-application searches them.
    verify_by = parse_datetime(doc["verify_by"]) if doc.get("verify_by") and verdict.get("status") != "erased" else None
    with transaction.atomic():
        if back:
            receipt = DeletionReceipt.everywhere.create(
                id=record.request_id, project_id=record.project_id, created_at=parse_datetime(doc["created_at"]),
                actor=doc.get("actor", ""), kind=doc.get("kind", ""), subject_sha256=doc.get("subject_sha256") or "",
                conversation_ids=doc.get("conversation_ids") or [], counts=doc.get("counts") or {},
                filed_verification=verdict, verify_by=verify_by)
            if verify_by is not None:
                ReceiptCheck.objects.create(receipt=receipt, status=verdict.get("status", ""), verification=verdict)
            ErasedRow.objects.bulk_create(
                [ErasedRow(receipt_id=record.request_id, conversation_ref=ref, record_type=kind, position=position,
                           commitment=bytes.fromhex(c) if c else None, chain_hash=bytes.fromhex(h) if h else None)
                 for ref, kind, position, c, h in record.rows], batch_size=ROWS_PER_ENTRY,
                ignore_conflicts=True)
        store.record_audit(actor=actor, action="deletion.reapplied", target_type="deletion_request",
                           target_id=record.request_id, project_id=record.project_id if back else None,
                           detail={**why, "receipt_restored": back, "erased_rows": len(record.rows),
                                   "receipt_id": str(new_receipt.pk) if new_receipt else None})
    return back


# -- the restore's two hooks ------------------------------------------------------------------------


@dataclass
class Plan:
    gathered: Gathered
    without: bool
    # The configured journal, brought up to the one chosen before the load (None: none usable).
    current: journal.Journal | None = None
    set_aside: Path | None = None


def restore_prepare(*, path: Path, manifest: dict, erasure_journal: Path | None = None,
                    without_erasure_journal: bool = False) -> Plan:
    """plugins.restore_prepare: refuse, before anything is loaded, a restore that could not re-apply
    every erasure newer than the backup, unless the operator says so."""
    gathered = gather(backup_path=path, manifest=manifest, given=erasure_journal)
    if gathered.problems and not without_erasure_journal:
        raise BackupError("refused: " + "; ".join(gathered.problems) + ". Without the erasure journal a restore "
                          "brings back what deletion requests erased since the backup. Restore it anyway (audited) "
                          f"with {FLAG}")
    if without_erasure_journal and not gathered.problems:
        raise BackupError(f"{FLAG} is for a journal that is missing or does not verify; the erasure journal "
                          f"{gathered.chosen.path} verifies, and the restore re-applies it")
    plan = Plan(gathered=gathered, without=without_erasure_journal)
    # The configured journal is made the chosen one before the load: a server started over the
    # database meanwhile then finds what the database lacks, and is not ready until it is re-applied.
    if without_erasure_journal and gathered.configured_damaged and gathered.chosen is not None:
        plan.set_aside = set_aside()
    if gathered.chosen is not None:
        try:
            plan.current = adopt(gathered.chosen)
        except (journal.JournalError, OSError) as exc:
            raise BackupError(f"the erasure journal could not be brought into place: {exc}") from None
    return plan


def restore_finish(plan: Plan | None, *, path: Path, manifest: dict) -> dict:
    """plugins.restore_finish: the restored database verified; re-apply the erasures newer than it.
    Returns {"notes": [...], "problems": [...]} for the command to print."""
    if plan is None:
        return {"notes": [], "problems": []}
    notes, problems = [], []
    released = list(MaintenanceLease.objects.values_list("kind", "actor"))
    if released:
        # Held when the backup was taken, by a run against the database backed up, not this one.
        MaintenanceLease.objects.all().delete()
        notes.append(f"released the maintenance lease the backup held ({released[0][0]} by {released[0][1]})")
    why = {"after_restore_of": Path(path).name, "backup_created_at": manifest.get("created_at"),
           "restored_at": datetime.now(UTC).isoformat(timespec="seconds")}
    restore_actor = "system:manage.py restore"
    gathered = plan.gathered
    if plan.without:
        if plan.set_aside:
            # What still verifies (a backup's copy) is used; the damaged configured journal is kept aside.
            notes.append(f"the damaged erasure journal is kept as {plan.set_aside.name}")
        if gathered.chosen is None:
            replaced = replace_journal(actor=restore_actor, reason=f"restored {Path(path).name} {FLAG}")
            notes.append(f"started a new erasure journal {replaced['journal']['journal']}"
                         + (f"; the old one is kept as {replaced['set_aside']}" if replaced["set_aside"] else ""))
        with transaction.atomic():
            store.record_audit(actor=restore_actor, action="restore.without_erasure_journal", target_type="backup",
                               target_id=Path(path).name, project_id=None,
                               detail={**why, "problems": gathered.problems,
                                       "used": str(gathered.chosen.path) if gathered.chosen else None})
        notes.append(f"restored {FLAG} (audited): {'; '.join(gathered.problems)}")
        if gathered.chosen is None:
            return {"notes": notes, "problems": problems}
    current = plan.current
    mismatch = anchor_problem(current)
    if mismatch:
        problems.append(mismatch)
    outcome = reapply(current, why=why)
    problems += outcome.problems
    with transaction.atomic():
        store.record_audit(actor=restore_actor, action="restore.erasures_reapplied", target_type="backup",
                           target_id=Path(path).name, project_id=None,
                           detail={**why, "journal": current.journal_id, "journal_entries": current.entries,
                                   "reapplied": outcome.reapplied, "receipts_back": outcome.receipts_back,
                                   "held_nothing": outcome.held_nothing, "problems": problems})
    notes += [f"erasure journal {current.journal_id} ({current.entries} entries, "
              f"{gathered.chosen.label}: {gathered.chosen.path})", *outcome.lines()]
    return {"notes": notes, "problems": problems}

