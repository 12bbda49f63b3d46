"""What the conversation page shows of the ledger: a panel, and marks in the timeline.

Reads only (QuerySets); the view calls `panel()` once for the page and
`with_timeline()` for each page of the full record.
"""

import json
from dataclasses import dataclass, field

from django.db.models import Max

from .models import Action, TaskStateEvent, WorkspaceSnapshot

PANEL_VERSIONS = 50
PANEL_ACTIONS = 200
PANEL_SNAPSHOTS = 200
MARKS_PER_PAGE = 300


def compact(value) -> str:
    """A JSON value on one line, as a person reads it in a table cell."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "))


@dataclass
class ActionView:
    action: Action
    # For a retry: the entry it repeats, when it is on this page; else its id.
    retry_of: Action | None = None
    retry_of_id: int | None = None

    @property
    def anchor(self) -> str:
        return f"action-{self.action.id}"


@dataclass
class SnapshotView:
    snapshot: WorkspaceSnapshot
    previous: WorkspaceSnapshot | None = None

    @property
    def comparable(self) -> bool:
        return self.previous is not None and self.previous.base_sha == self.snapshot.base_sha

    def _delta(self, name: str) -> str:
        d = getattr(self.snapshot, name) - getattr(self.previous, name)
        return f"{d:+d}"

    @property
    def delta(self) -> dict:
        """The change since the previous snapshot of the same repository, from the
        recorded figures (both counted against the same base commit)."""
        if not self.comparable:
            return {}
        return {n: self._delta(n) for n in ("files_changed", "insertions", "deletions")}


@dataclass
class Panel:
    current: TaskStateEvent | None
    versions: list[TaskStateEvent]
    version_count: int
    actions: list[ActionView]
    action_count: int
    snapshots: list[SnapshotView]
    performed: int = 0
    retries: int = 0

    @property
    def state_items(self) -> list[tuple[str, str]]:
        return [(k, compact(v)) for k, v in (self.current.state_json if self.current else {}).items()]

    @property
    def is_empty(self) -> bool:
        return self.current is None and not self.actions and not self.snapshots


def _link_retries(actions: list[Action]) -> list[ActionView]:
    # A fork's copy answers for the entry it copies, so a retry recorded in the
    # parent still links to the copy on the fork's page.
    by_entry = {a.entry_id: a for a in actions}
    by_entry.update({a.id: a for a in actions})
    views = []
    for a in actions:
        original = by_entry.get(a.original_id) if a.original_id else None
        views.append(ActionView(a, retry_of=original, retry_of_id=a.original_id))
    return views


def _snapshot_views(snapshots: list[WorkspaceSnapshot]) -> list[SnapshotView]:
    last_by_repo, views = {}, []
    for s in snapshots:
        views.append(SnapshotView(s, previous=last_by_repo.get(s.repo)))
        last_by_repo[s.repo] = s
    return views


def panel(conversation) -> Panel:
    cid = conversation.pk
    versions = list(TaskStateEvent.objects.of(cid).order_by("-version")[:PANEL_VERSIONS])
    actions = list(Action.objects.of(cid).order_by("id")[:PANEL_ACTIONS])
    snapshots = list(WorkspaceSnapshot.objects.timeline(cid)[:PANEL_SNAPSHOTS])
    return Panel(
        current=versions[0] if versions else None,
        versions=versions,
        version_count=versions[0].version if versions else 0,
        actions=_link_retries(actions),
        action_count=Action.objects.of(cid).count() if len(actions) == PANEL_ACTIONS else len(actions),
        snapshots=_snapshot_views(snapshots),
        performed=sum(a.status == "performed" for a in actions),
        retries=sum(a.status == "already_performed" for a in actions),
    )


# -- marks in the full record ---------------------------------------------------------


@dataclass
class Mark:
    """A ledger row drawn between message rows: after the message at `after_position`."""

    kind: str  # "state", "action" or "snapshot"
    after_position: int
    row: object
    order: tuple = field(default_factory=tuple)
    retry_of: Action | None = None
    previous: WorkspaceSnapshot | None = None
    is_ledger = True

    @property
    def snapshot_view(self) -> SnapshotView | None:
        return SnapshotView(self.row, self.previous) if self.kind == "snapshot" else None


def _in_page(qs, field_name: str, *, shift: int, after: int, upto: int | None):
    # A mark after message `a` is drawn on the page that holds message `a`; marks
    # before any message (a = -1) on the first page.
    low = after + shift
    qs = qs.filter(**{f"{field_name}__gt": low}) if after > -1 else qs
    if upto is not None:
        qs = qs.filter(**{f"{field_name}__lte": upto + shift})
    return qs


def timeline_marks(conversation_id, *, after: int, upto: int | None) -> list[Mark]:
    """The ledger rows that go between the message rows (after, upto] of one page."""
    marks = []
    events = _in_page(TaskStateEvent.objects.of(conversation_id), "position", shift=0, after=after, upto=upto)
    for e in events.order_by("version")[:MARKS_PER_PAGE]:
        marks.append(Mark("state", e.position, e, order=(0, e.created_at, e.id)))
    actions = list(_in_page(Action.objects.of(conversation_id), "position", shift=0, after=after, upto=upto)
                   .order_by("id")[:MARKS_PER_PAGE])
    originals = {a.id: a for a in actions} | {a.entry_id: a for a in actions}
    missing = {a.original_id for a in actions if a.original_id and a.original_id not in originals}
    if missing:
        originals |= {a.entry_id: a for a in Action.objects.of(conversation_id).filter(inherited_from__in=missing)}
        originals |= {a.id: a for a in Action.objects.filter(id__in=missing)}
    for a in actions:
        marks.append(Mark("action", a.position, a, order=(0, a.created_at, a.id),
                          retry_of=originals.get(a.original_id) if a.original_id else None))
    # A snapshot is the files when its turn began: drawn just before that turn's row.
    snapshots = list(_in_page(WorkspaceSnapshot.objects.of(conversation_id), "position", shift=1, after=after,
                              upto=upto).order_by("position", "repo", "id")[:MARKS_PER_PAGE])
    previous = _previous_snapshots(conversation_id, snapshots)
    for s in snapshots:
        marks.append(Mark("snapshot", s.position - 1, s, order=(1, s.repo, s.id), previous=previous.get(s.id)))
    marks.sort(key=lambda m: (m.after_position, m.order))
    return marks


def _previous_snapshots(conversation_id, snapshots) -> dict:
    if not snapshots:
        return {}
    # Few snapshots per conversation (one per turn that changed files): read them all once.
    upto = snapshots[-1].position + 1
    everything = list(WorkspaceSnapshot.objects.timeline(conversation_id).filter(position__lt=upto))
    out, last_by_repo = {}, {}
    for s in everything:
        out[s.id] = last_by_repo.get(s.repo)
        last_by_repo[s.repo] = s
    return out


def with_timeline(entries: list, conversation_id, *, after: int, upto: int | None) -> list:
    """The page's entries (message rows and checkpoint markers) with the ledger's marks
    placed right after the message each one follows."""
    marks = timeline_marks(conversation_id, after=after, upto=upto)
    if not marks:
        return entries
    out, i = [], 0
    for entry in entries:
        position = getattr(entry, "position", None)
        if position is not None:
            while i < len(marks) and marks[i].after_position < position:
                out.append(marks[i])
                i += 1
        out.append(entry)
    out.extend(marks[i:])
    return out


def live_mark(conversation_id) -> str:
    """What the page's live follow compares (conversations/live.py): the ledger's tables only
    gain rows (a retry is a row of its own), so the highest id of each moves whenever
    anything is recorded."""
    marks = [model.objects.of(conversation_id).aggregate(m=Max("id"))["m"] or 0
             for model in (TaskStateEvent, Action, WorkspaceSnapshot)]
    return "-".join(str(m) for m in marks)
