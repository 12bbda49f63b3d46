"""Age-based pruning that gives the disk back.

A conversation is pruned when memoryui received its last row longer ago than the
retention period (`received_at`, docs/DESIGN.md, invariant 14) and it is not pinned. An
imported transcript keeps its own dates as its last activity, so an archive of last
year imported today counts from today: a prune never takes what arrived within the
period. Agents keep appending while a prune runs, so no
transaction here holds the write lock for long:

1. the victims are marked `deleting` in small transactions (hidden from every
   read from then on; the database's delete guard opens for them);
2. their messages, then checkpoints, are deleted `batch_size` rows per
   transaction, then the conversation rows;
3. the freed space goes back to the file system: on SQLite an incremental
   vacuum in steps and `wal_checkpoint(TRUNCATE)`; on PostgreSQL `VACUUM`;
4. files outside the database past their lifetime (an import preview nobody
   confirmed: `plugins.leftover_files`) are removed, and the run says how many.

A prune killed halfway leaves conversations that are marked `deleting`: hidden
and consistent. The next prune picks them up whatever their age and finishes
them. Forks hold their own copies and survive their parent.
"""

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone

from conversations import deletion, idempotency, plugins, projects, store
from conversations.errors import InvalidInput
from conversations.models import Checkpoint, Conversation, Message, Project
from conversations.owned import owned_tables
from conversations.search import lineage as search_lineage

from . import disk, erased
from .lease import Lease, in_turn, maintenance
from .models import PruneRun
from .reclaim import FIRST_BATCH, compact_fts_index, in_timed_batches, reclaim_space, truncate_wal

MAX_DAYS = 36500
MAX_BATCH = 100_000
# Conversations per IN (…) list: small enough for every database's parameter limit.
ID_CHUNK = 500
# Conversation ids kept on the run's row; the count is always exact.
RUN_IDS_KEPT = 10_000
# Rough on-disk cost of a row besides its text (row header, ids, index entries).
ROW_OVERHEAD_BYTES = {"message": 120, "checkpoint": 120, "conversation": 300}

Progress = Callable[[int, int], None]


def default_retention_days() -> int:
    return settings.MEMORYUI_RETENTION_DAYS


@dataclass
class PruneResult:
    conversations: int
    messages: int
    checkpoints: int
    bytes_before: int
    bytes_after: int
    # Dry runs: roughly how many bytes the rows take (text plus row overhead).
    estimated_bytes: int
    conversation_ids: list[str]
    dry_run: bool
    # None for several projects pruned by retentions that differ (each in `projects`).
    older_than_days: int | None
    cutoff: datetime | None
    # Conversations a previous, interrupted prune had already marked.
    resumed: int = 0
    run_id: int | None = None
    # Expired files outside the database removed (import uploads); a dry run counts none.
    uploads_removed: int = 0
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)
    # The project pruned (its slug); None for the sum of several, each then in `projects`.
    project: str | None = None
    projects: list[dict] = field(default_factory=list)

    @property
    def bytes_freed(self) -> int:
        return self.bytes_before - self.bytes_after

    def as_dict(self) -> dict:
        data = asdict(self)
        data["cutoff"] = self.cutoff.isoformat() if self.cutoff else None
        data["projects"] = [p | {"cutoff": p["cutoff"].isoformat()} for p in self.projects]
        data["bytes_freed"] = self.bytes_freed
        return data

    def of_project(self) -> dict:
        """This project's part of a prune of several."""
        return {"project": self.project, "older_than_days": self.older_than_days, "cutoff": self.cutoff,
                "conversations": self.conversations, "messages": self.messages, "checkpoints": self.checkpoints,
                "resumed": self.resumed, "estimated_bytes": self.estimated_bytes, "run_id": self.run_id}


def _combined(results: list[PruneResult]) -> PruneResult:
    """One result for a prune of several projects: their sums, each project's own in `projects`."""
    if len(results) == 1:
        only = results[0]
        only.projects = [only.of_project()]
        return only
    days = {r.older_than_days for r in results}
    cutoffs = {r.cutoff for r in results}
    return PruneResult(
        conversations=sum(r.conversations for r in results), messages=sum(r.messages for r in results),
        checkpoints=sum(r.checkpoints for r in results), bytes_before=results[0].bytes_before,
        bytes_after=results[-1].bytes_after, estimated_bytes=sum(r.estimated_bytes for r in results),
        conversation_ids=[cid for r in results for cid in r.conversation_ids], dry_run=results[0].dry_run,
        older_than_days=days.pop() if len(days) == 1 else None, cutoff=cutoffs.pop() if len(cutoffs) == 1 else None,
        resumed=sum(r.resumed for r in results), run_id=None,
        uploads_removed=sum(r.uploads_removed for r in results), seconds=sum(r.seconds for r in results),
        notes=[f"{r.project}: {note}" for r in results for note in r.notes],
        projects=[r.of_project() for r in results],
    )


def check_days(days) -> int:
    if isinstance(days, bool) or not isinstance(days, int):
        try:
            days = int(str(days).strip())
        except (TypeError, ValueError):
            raise InvalidInput("older_than_days must be a whole number of days", field="older_than_days") from None
    if days < 1 or days > MAX_DAYS:
        raise InvalidInput(f"older_than_days must be between 1 and {MAX_DAYS}", field="older_than_days")
    return days


def check_batch_size(batch_size) -> int:
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or not 1 <= batch_size <= MAX_BATCH:
        raise InvalidInput(f"batch_size must be a whole number between 1 and {MAX_BATCH}", field="batch_size")
    return batch_size


def candidates(cutoff: datetime):
    """Conversations a prune at `cutoff` removes: old and unpinned, left marked by an interrupted
    prune, or staged by an import (a crashed one's; a running one stops: imports/store.py)."""
    return Conversation.objects.filter(Q(received_at__lt=cutoff, pinned=False) | Q(deleting=True) | Q(staged=True))


def _chunks(items: list, size: int = ID_CHUNK):
    for start in range(0, len(items), size):
        yield items[start:start + size]


def _count_rows(ids: list) -> tuple[int, int]:
    messages = checkpoints = 0
    for chunk in _chunks(ids):
        messages += Message.objects.filter(conversation_id__in=chunk).count()
        checkpoints += Checkpoint.objects.filter(conversation_id__in=chunk).count()
    return messages, checkpoints


def _octets() -> str:
    return "LENGTH(CAST({} AS BLOB))" if connection.vendor == "sqlite" else "octet_length({})"


def _estimate_bytes(ids: list) -> int:
    octets = _octets()
    total = 0
    with connection.cursor() as cursor:
        for chunk in _chunks(ids):
            marks = ", ".join(["%s"] * len(chunk))
            params = deletion.db_ids(chunk)
            cursor.execute(
                f"SELECT COUNT(*), COALESCE(SUM({octets.format('content')}), 0) FROM {Message._meta.db_table} "
                f"WHERE conversation_id IN ({marks})", params)
            n, text = cursor.fetchone()
            total += int(text) + n * ROW_OVERHEAD_BYTES["message"]
            cursor.execute(
                f"SELECT COUNT(*), COALESCE(SUM({octets.format('summary')}), 0) FROM {Checkpoint._meta.db_table} "
                f"WHERE conversation_id IN ({marks})", params)
            n, text = cursor.fetchone()
            total += int(text) + n * ROW_OVERHEAD_BYTES["checkpoint"]
    return total + len(ids) * ROW_OVERHEAD_BYTES["conversation"]


@dataclass(frozen=True)
class Holdings:
    """What the current scope's project holds, estimated as a dry run estimates what it would free."""

    conversations: int
    messages: int
    checkpoints: int
    estimated_bytes: int


def holdings() -> Holdings:
    """The current scope's conversations, messages and checkpoints, and roughly the bytes they take.
    A project's admin is shown this instead of the database's size, which is every project's."""
    # Rows carry no project of their own: their conversation's says.
    fence, params = projects.sql_fence("c.project_id", "c.namespace")
    counts = {}
    with connection.cursor() as cursor:
        for model, column in ((Message, "content"), (Checkpoint, "summary")):
            cursor.execute(f"SELECT COUNT(*), COALESCE(SUM({_octets().format('r.' + column)}), 0) "
                           f"FROM {model._meta.db_table} r JOIN {Conversation._meta.db_table} c "
                           f"ON c.id = r.conversation_id WHERE 1 = 1{fence}", params)
            n, text = cursor.fetchone()
            counts[model] = (int(n), int(text) + int(n) * ROW_OVERHEAD_BYTES[model._meta.model_name])
    conversations = Conversation.objects.count()
    return Holdings(conversations=conversations, messages=counts[Message][0], checkpoints=counts[Checkpoint][0],
                    estimated_bytes=counts[Message][1] + counts[Checkpoint][1]
                    + conversations * ROW_OVERHEAD_BYTES["conversation"])


def _mark_victims(ids: list, cutoff: datetime) -> None:
    """Mark in small transactions, re-checking age and pin: an agent may have
    appended (or a person pinned) since the candidates were read."""
    search_lineage.adopt_ahead(ids, run=in_turn)  # forks' copies indexed a batch at a time, first
    for chunk in _chunks(ids):
        deletion.mark_expired(chunk, received_before=cutoff)


def mark_deleting(ids: list) -> None:
    """Mark conversations for deletion whatever their age (a deletion request, a delete
    button): from here on every read hides them and appends to them are refused."""
    search_lineage.adopt_ahead(ids, run=in_turn)  # forks' copies indexed a batch at a time, first
    for chunk in _chunks(ids):
        in_turn(lambda chunk=chunk: deletion.mark_deleting(chunk))


@dataclass
class BatchDeletion:
    """What `delete_conversations_in_batches` removed; `finish()` removes the conversation rows."""

    ids: list
    messages: int = 0
    checkpoints: int = 0
    owned: dict = field(default_factory=dict)

    def finish(self) -> int:
        return sum(in_turn(lambda chunk=chunk: deletion.delete_marked_conversations(chunk))
                   for chunk in _chunks(self.ids))


def delete_conversations_in_batches(ids: list, *, batch_size: int, beat: Callable[[], None] | None = None,
                                    on_batch: Callable[[str, int], None] | None = None) -> BatchDeletion:
    """Delete the rows of marked conversations in short transactions: rows of
    registered tables (conversations/owned.py), then messages, then checkpoints. The
    conversation rows stay until `finish()`, so a crash leaves them marked.

    A transaction holds the write lock, and what a row costs to delete varies a
    hundredfold (a full-text index entry removed on the spot, an overflow chain), so
    each batch is sized to take about BATCH_SECONDS, never more than `batch_size` rows."""
    result = BatchDeletion(ids=list(ids))
    models = [(t.table, t.model) for t in owned_tables()] + [("messages", Message), ("checkpoints", Checkpoint)]
    size = min(batch_size, FIRST_BATCH)
    for chunk in _chunks(result.ids):
        for name, model in models:

            def after_each(n: int, name=name) -> None:
                if n and on_batch:
                    on_batch(name, n)
                if beat:
                    beat()

            n, size = in_timed_batches(
                lambda limit, timing, m=model, c=chunk: deletion.delete_rows(m, c, limit=limit, timing=timing),
                cap=batch_size, size=size, after_each=after_each)
            if name == "messages":
                result.messages += n
            elif name == "checkpoints":
                result.checkpoints += n
            elif n:
                result.owned[name] = result.owned.get(name, 0) + n
    return result


def prune_older_than(
    *,
    days: int,
    dry_run: bool = False,
    batch_size: int = 5000,
    progress: Progress | None = None,
    actor: str = "system",
    all_projects: bool = False,
) -> PruneResult:
    """Prune conversations received more than `days` days ago (see the module docstring).

    The prune acts in the current project (`default` where the caller is every project's
    and named none), or in every project with `all_projects`.
    `progress(done_rows, total_rows)` is called after every batch. A dry run
    changes nothing and fills `estimated_bytes` instead of measuring.
    """
    with projects.acting(all_projects=all_projects) as project_id:
        return _prune_in_project(days=days, dry_run=dry_run, batch_size=batch_size, progress=progress, actor=actor,
                                 project_id=project_id)


def prune_by_retention(
    *,
    days: int | None = None,
    dry_run: bool = False,
    batch_size: int = 5000,
    progress: Progress | None = None,
    actor: str = "system",
    all_projects: bool = False,
) -> PruneResult:
    """Prune the current project, or every project (`all_projects`), each by its own retention
    (`Project.retention_days`, else MEMORYUI_RETENTION_DAYS) unless `days` gives one period for
    all: one run per project, each with its own PruneRun. The result is the project's, or for
    several projects their sums with each one's own in `projects`."""
    if days is not None:
        days = check_days(days)
    batch_size = check_batch_size(batch_size)
    results = []
    with projects.acting(all_projects=all_projects) as project_id:
        if project_id is not None:
            chosen = [(Project.objects.get(pk=project_id), projects.current())]
        else:
            chosen = [(p, projects.one(p.pk)) for p in Project.objects.order_by("id")]
        for project, scope in chosen:
            with projects.scoped(scope):
                result = _prune_in_project(days=days or project.kept_days, dry_run=dry_run, batch_size=batch_size,
                                           progress=progress, actor=actor, project_id=project.pk)
            result.project = project.slug
            results.append(result)
    return _combined(results)


def _prune_in_project(*, days, dry_run, batch_size, progress, actor, project_id) -> PruneResult:
    days = check_days(days)
    batch_size = check_batch_size(batch_size)
    started = time.monotonic()
    cutoff = timezone.now() - timedelta(days=days)
    bytes_before = disk.database_bytes()

    if dry_run:
        ids = list(candidates(cutoff).order_by("received_at", "id").values_list("pk", flat=True))
        messages, checkpoints = _count_rows(ids)
        return PruneResult(
            conversations=len(ids), messages=messages, checkpoints=checkpoints,
            bytes_before=bytes_before, bytes_after=bytes_before, estimated_bytes=_estimate_bytes(ids),
            conversation_ids=[str(i) for i in ids], dry_run=True, older_than_days=days, cutoff=cutoff,
            resumed=Conversation.objects.filter(deleting=True).count(), seconds=time.monotonic() - started,
        )

    with maintenance(kind="prune", actor=actor) as lease:
        run = _start_run(actor=actor, days=days, cutoff=cutoff, batch_size=batch_size, bytes_before=bytes_before,
                         project_id=project_id)
        try:
            result = _run(run, cutoff=cutoff, batch_size=batch_size, progress=progress, lease=lease)
        except BaseException as exc:  # KeyboardInterrupt too: the run row must not stay "running"
            _fail_run(run, exc)
            raise
    result.seconds = time.monotonic() - started
    return result


def _start_run(*, actor, days, cutoff, batch_size, bytes_before, project_id) -> PruneRun:
    with transaction.atomic():
        # A run killed without a chance to record its end (SIGKILL, power loss) stays
        # "running"; this run holds the maintenance lease, so that run is dead, whatever
        # project it pruned: it picks up its marked conversations, and says so on it.
        with projects.unfenced():
            PruneRun.everywhere.filter(status=PruneRun.RUNNING).update(
                status=PruneRun.FAILED, finished_at=timezone.now(),
                error="interrupted before it could record its end; a later run finished its work")
        run = PruneRun.everywhere.create(
            project_id=project_id, actor=str(actor)[:200], older_than_days=days, cutoff=cutoff,
            batch_size=batch_size, bytes_before=bytes_before,
        )
        store.record_audit(actor=actor, action="prune.started", target_type="prune_run", target_id=str(run.pk),
                           project_id=project_id,
                           detail={"older_than_days": days, "cutoff": cutoff.isoformat(), "batch_size": batch_size})
    return run


def _update_run(run: PruneRun, **fields) -> None:
    for name, value in fields.items():
        setattr(run, name, value)
    with transaction.atomic():
        PruneRun.everywhere.filter(pk=run.pk).update(**fields)


def _fail_run(run: PruneRun, exc: BaseException) -> None:
    message = f"{type(exc).__name__}: {exc}"[:2000]
    try:
        _update_run(run, status=PruneRun.FAILED, finished_at=timezone.now(), error=message)
        store.record_audit(actor=run.actor, action="prune.failed", target_type="prune_run", target_id=str(run.pk),
                           detail={"conversations": run.conversations, "messages": run.messages,
                                   "checkpoints": run.checkpoints, "error": type(exc).__name__})
    except Exception:  # the database itself may be what failed; the original error matters more
        pass


def _run(run: PruneRun, *, cutoff, batch_size: int, progress: Progress | None, lease: Lease) -> PruneResult:
    # The message index forgets pruned rows through a merge at the end (compact_fts_index),
    # not one by one: FTS5's secure-delete rewrites the leaf pages of every term of every
    # deleted row, which made pruning half of a 1,280,000-message file take 13 minutes
    # instead of one. Deletion requests keep secure-delete (erasure.py turns it back on).
    disk.ensure_fts_secure_delete()
    disk.set_fts_secure_delete(disk.MESSAGE_FTS, False)
    try:
        return _prune(run, cutoff=cutoff, batch_size=batch_size, progress=progress, lease=lease)
    finally:
        disk.ensure_fts_secure_delete()  # on again (a no-op read when _prune got that far)


def _prune(run: PruneRun, *, cutoff, batch_size: int, progress: Progress | None, lease: Lease) -> PruneResult:
    resumed = Conversation.objects.filter(deleting=True).count()
    _mark_victims(list(candidates(cutoff).filter(deleting=False).values_list("pk", flat=True)), cutoff)
    victims = list(Conversation.objects.filter(deleting=True).order_by("received_at", "id")
                   .values_list("pk", flat=True))
    messages_total, checkpoints_total = _count_rows(victims)
    total = messages_total + checkpoints_total + len(victims)
    _update_run(run, total_rows=total, resumed=resumed,
                conversation_ids=[str(v) for v in victims[:RUN_IDS_KEPT]])
    if progress:
        progress(0, total)

    done = 0

    def on_batch(table: str, n: int) -> None:
        nonlocal done
        done += n
        _update_run(run, done_rows=done)
        if progress:
            progress(done, total)

    # Their final chain heads go into the audit chain before their rows go (erased.py).
    erased.record_heads(ids=victims, actor=run.actor, reason="prune", target_type="prune_run", target_id=str(run.pk))
    deletion = delete_conversations_in_batches(victims, batch_size=batch_size, beat=lease.beat, on_batch=on_batch)
    messages, checkpoints = deletion.messages, deletion.checkpoints
    conversations = deletion.finish()
    done += conversations
    _update_run(run, done_rows=done, messages=messages, checkpoints=checkpoints, conversations=conversations)
    if progress:
        progress(done, total)

    if not compact_fts_index(disk.MESSAGE_FTS, beat=lease.beat):
        notes = ["the search index was merged as far as its size allowed while agents kept adding to it; "
                 "the next prune goes on with it"]
    else:
        notes = []
    disk.set_fts_secure_delete(disk.MESSAGE_FTS, True)
    notes += reclaim_space()
    bytes_after = disk.database_bytes()
    uploads_removed = sum(kind.remove_expired() for kind in plugins.leftover_files.registered())
    if uploads_removed:
        notes.append(f"removed {uploads_removed} expired upload{'s' if uploads_removed != 1 else ''} "
                     "that nobody confirmed")
    if len(victims) > RUN_IDS_KEPT:
        notes.append(f"the run page lists the first {RUN_IDS_KEPT} of {len(victims)} conversation ids")
    _update_run(run, status=PruneRun.FINISHED, finished_at=timezone.now(), bytes_after=bytes_after, notes=notes)
    store.record_audit(
        actor=run.actor, action="prune.finished", target_type="prune_run", target_id=str(run.pk),
        detail={"older_than_days": run.older_than_days, "conversations": conversations, "messages": messages,
                "checkpoints": checkpoints, "resumed": resumed, "bytes_before": run.bytes_before,
                "bytes_after": bytes_after, "uploads_removed": uploads_removed},
    )
    truncate_wal()  # the bookkeeping just written should not leave the WAL grown
    # Idempotency keys expire with the prune run (conversations/idempotency.py).
    idempotency.delete_expired()
    return PruneResult(
        conversations=conversations, messages=messages, checkpoints=checkpoints,
        bytes_before=run.bytes_before, bytes_after=bytes_after, estimated_bytes=0,
        conversation_ids=[str(v) for v in victims], dry_run=False, older_than_days=run.older_than_days,
        cutoff=cutoff, resumed=resumed, run_id=run.pk, uploads_removed=uploads_removed, notes=notes,
    )
