"""Writing one import in short transactions, hidden until its last one.

A transcript can hold a hundred thousand rows; writing it in one transaction would
hold the database's write lock (SQLite) for as long as that takes, and every
agent's append would wait. The `Writer` takes rows, checkpoints and original
entries as the parser places them and writes them `CHUNK_ROWS` rows (or
`CHUNK_BYTES`) per transaction through `imports.store`:

- the conversations the import creates are *staged*: created marked `staged`
  (so every read hides them and no one else can append to them; unlike `deleting`,
  it opens none of the database's delete guards) with an ImportStage row, and
  unmarked all together by `publish()`, the last transaction, which also gives
  them their final titles, times and meta and writes their audit events. Until
  then nothing of the import is visible: a hard error, or a crash, imports
  nothing of them;
- positions still come from each conversation's counter (UPDATE … RETURNING
  before the inserts, checked against what the parser counted on);
- a fork copies its parent's rows 0..N in steps of `CHUNK_ROWS` too, after its
  parent's rows up to N are written;
- `discard()` removes what was staged when the import fails; after a crash the
  staged conversations stay hidden and staged, and the next prune (or the next
  import of the same source, once the crashed one's process is gone) removes them;
- a prune or deletion request that runs meanwhile deletes the ImportStage rows
  first; the import's next transaction sees that and stops (ImportInterrupted).

A dry run goes through the same steps and validations and writes nothing.
"""

import os
import socket
import time
import uuid

from django.db import connection
from django.utils import timezone

from conversations.errors import ImportInProgress, InvalidInput
from conversations.formats.base import ConvPlan, Entry, Plan
from conversations.models import Conversation

from . import store
from .models import ImportSource
from .store import Chunk

# The most one transaction writes. Each transaction is also timed, and the next one made
# smaller (down to a fiftieth) when it held the write lock longer than TARGET_SECONDS,
# larger again when it was quick: on an idle machine few commits (each one an fsync),
# on a busy one short waits for everyone else's appends.
CHUNK_ROWS = 2000
CHUNK_BYTES = 4 * 1024 * 1024
TARGET_SECONDS = 0.1
MIN_SCALE = 0.02
GAP_SECONDS = 0.05


def new_holder() -> str:
    return f"{socket.gethostname()[:30]}:{os.getpid()}:{uuid.uuid4().hex[:16]}"


class Writer:
    def __init__(self, *, plan: Plan, namespace: str, actor: str, dry_run: bool = False):
        self.plan = plan
        self.namespace = namespace
        self.actor = actor
        self.dry_run = dry_run
        self.holder = new_holder()
        self.ids: dict[str, str] = {}  # conversation key → id
        self.staged: list[str] = []
        self.parent_ids: dict[str, str | None] = {}
        self.written: dict[str, int] = {}  # key → the next position the database hands out
        self.counts: dict[str, list] = {}  # key → [messages, checkpoints, first time, last time]
        self.source = None
        self.chunk = Chunk()
        self.chunk_rows = 0
        self.chunk_bytes = 0
        self.scale = 0.1  # of CHUNK_ROWS and CHUNK_BYTES, adjusted by how long transactions take
        self.transactions = 0
        self.longest = 0.0  # seconds, the longest transaction
        self.free_until = 0.0  # time.monotonic() before which the write lock is left to others

    def _timed(self, write, **kw) -> None:
        self._await_gap()
        started = time.monotonic()
        write(**kw)
        seconds = time.monotonic() - started
        self.transactions += 1
        self.longest = max(self.longest, seconds)
        if seconds > TARGET_SECONDS:
            self.scale = max(MIN_SCALE, self.scale * TARGET_SECONDS / seconds)
        elif seconds < TARGET_SECONDS / 3:
            self.scale = min(1.0, self.scale * 1.5)
        if connection.vendor == "sqlite":
            # A writer of another process that waited meanwhile sleeps in SQLite's busy handler
            # (polling every 25-50 ms by then); without a gap this loop would take the lock
            # again first, transaction after transaction, and that writer would starve. The
            # importer places the next chunk during the gap and only sleeps what is left of it.
            self.free_until = time.monotonic() + min(GAP_SECONDS, seconds / 4)

    def _await_gap(self) -> None:
        """Keep the write lock free for the gap the last transaction earned (see `_timed`)."""
        left = self.free_until - time.monotonic()
        if left > 0:
            time.sleep(left)

    # -- conversations -------------------------------------------------------------------

    def open(self, conv: ConvPlan) -> str:
        """Create the conversation of `conv` (staged). A fork first needs its parent's rows
        up to the fork point in the database: what is pending is written first."""
        parent_id = self.ids.get(conv.parent_key) if conv.parent_key else conv.parent_id
        self.parent_ids[conv.key] = parent_id
        fork = conv.copy_prefix and parent_id is not None and conv.parent_position is not None
        if fork:
            self.flush()
        fields = self._fields(conv, parent_id, fork)
        if self.dry_run:
            cid = str(fields.get("id") or uuid.uuid4())
        else:
            self._await_gap()
            cid = str(store.stage_conversation(holder=self.holder, staged=self.staged,
                                               source_key=self.plan.source_key, **fields).pk)
            self.staged.append(cid)
        self.ids[conv.key] = cid
        self.written[conv.key] = 0
        self.counts[conv.key] = [0, 0, None, None]
        if fork:
            self._copy_prefix(cid, parent_id, conv.parent_position)
            self.written[conv.key] = conv.parent_position + 1
        return cid

    def _fields(self, conv: ConvPlan, parent_id, fork: bool) -> dict:
        plan = self.plan
        if plan.format == "memoryui":
            return dict(id=conv.id, title=conv.title, subject=conv.subject, meta=conv.meta,
                        namespace=conv.namespace or "", external_id=conv.external_id, parent_id=conv.parent_id,
                        parent_relation=conv.relation, forked_from_position=conv.parent_position,
                        created_at=conv.created_at, last_activity_at=conv.last_activity_at, pinned=conv.pinned)
        if fork:
            parent = Conversation.objects.filter(pk=parent_id).first()
            if parent is None and self.dry_run and conv.parent_key in plan.conversations:  # staged, not written
                planned = plan.conversations[conv.parent_key]
                parent = Conversation(title=planned.title, subject=planned.subject, meta=planned.meta,
                                      namespace=self.namespace if planned.key == "main" else "")
            elif parent is None or parent.deleting or (parent.staged and str(parent_id) not in self.staged):
                raise InvalidInput("the conversation to fork from is gone", field="source")
            title = conv.title or f"{parent.title or 'Untitled'} (fork at {conv.parent_position})"
            return dict(title=title, subject=parent.subject, meta={**parent.meta, **conv.meta},
                        namespace=parent.namespace, parent_id=parent_id, parent_relation="fork",
                        forked_from_position=conv.parent_position)
        main = conv.key == "main"
        external_id = plan.source_key[:200] if main and not plan.source_key.startswith("sha256:") \
            else conv.external_id
        if main and external_id:
            self._check_external_id(external_id)
        return dict(title=conv.title, subject=conv.subject, meta=conv.meta, namespace=self.namespace if main else "",
                    external_id=external_id if main else None, parent_id=parent_id,
                    parent_relation=conv.relation if parent_id else "", forked_from_position=conv.parent_position)

    def _check_external_id(self, external_id: str) -> None:
        taken = Conversation.objects.filter(namespace=self.namespace, external_id=external_id).first()
        if taken is None:
            return
        if (taken.staged or taken.deleting) and not self.dry_run and store.discard_abandoned(taken.pk):
            return  # a crashed import of this session left it; removed
        staged = store.stale_stage(taken.pk)
        # Published since this import looked for its source: another request imported the same session.
        published = staged is None and ImportSource.objects.filter(
            format=self.plan.format, namespace=self.namespace, source_key=self.plan.source_key[:300],
            conversation_id=taken.pk).exists()
        if staged is False or published:
            raise ImportInProgress("this session is being imported by another request right now; try again when "
                                   "it has finished", field="source")
        raise InvalidInput(f"namespace {self.namespace!r} already has a conversation with external id "
                           f"{external_id[:80]!r} that was not imported from this source", field="external_id")

    def _copy_prefix(self, cid: str, parent_id, position: int) -> None:
        if self.dry_run:
            return
        start = 0
        while start <= position:
            count = min(max(1, int(CHUNK_ROWS * 2 * self.scale)), position + 1 - start)
            self._timed(store.copy_prefix_staged, holder=self.holder, staged=self.staged, child_id=cid,
                        parent_id=parent_id, start=start, count=count, position=position)
            start += count

    # -- rows, checkpoints, entries ---------------------------------------------------------

    def take(self, conv: ConvPlan) -> None:
        """Move the rows and checkpoints the parser added to `conv` into the pending chunk."""
        rows, folds = conv.rows, conv.folds
        if not rows and not folds:
            return
        key = conv.key
        cid = self.ids[key]
        counts = self.counts[key]
        if rows:
            if self.written[key] != conv.base:
                raise InvalidInput(f"the import expected {conv.base} rows in {key}, found {self.written[key]}",
                                   field="source")
            pending = self.chunk.rows[-1] if self.chunk.rows else None
            if pending is not None and pending[0] == cid and pending[1] + len(pending[2]) == self.written[key]:
                pending[2].extend(rows)  # one counter bump and one insert for the conversation's run of rows
            else:
                self.chunk.rows.append((cid, self.written[key], list(rows), True))
            self.written[key] += len(rows)
            counts[0] += len(rows)
            for row in rows:
                self.chunk_bytes += len(row.text)
                if row.at is not None:
                    if counts[2] is None:
                        counts[2] = row.at
                    if counts[3] is None or row.at > counts[3]:
                        counts[3] = row.at
            self.chunk_rows += len(rows)
            conv.base += len(rows)
            conv.rows = []
        for fold in folds:
            created_by = fold.created_by if self.plan.format == "memoryui" else (fold.created_by or self.plan.format)
            self.chunk.folds.append((cid, fold, created_by))
            counts[1] += 1
        conv.folds = []

    def wrote_anything(self) -> bool:
        """Whether any row or checkpoint was taken (pending or written) for any conversation."""
        return any(messages or checkpoints for messages, checkpoints, *_ in self.counts.values())

    def add_entry(self, entry: Entry, raw: str | None = None) -> None:
        """Queue the original entry (its text: `raw`, when the caller holds it instead of the entry)."""
        if raw is None:
            raw = entry.raw
        cid = self.ids.get(entry.conv) or self.ids.get("main") or next(iter(self.ids.values()), None)
        self.chunk.entries.append((entry, cid, raw))
        self.chunk_bytes += len(raw)

    def rows_per_chunk(self) -> int:
        return max(1, int(CHUNK_ROWS * self.scale))

    def full(self) -> bool:
        rows = self.rows_per_chunk()
        return self.chunk_rows >= rows or self.chunk_bytes >= CHUNK_BYTES * self.scale or \
            len(self.chunk.entries) >= rows * 2

    def flush(self) -> None:
        chunk = self.chunk
        if not (chunk.rows or chunk.folds or chunk.entries):
            return
        if not self.dry_run:
            if chunk.entries and self.source is None:
                raise InvalidInput("original entries need their source first", field="source")
            self._timed(store.write_chunk, holder=self.holder, staged=self.staged,
                        source_id=self.source.pk if self.source else None, chunk=chunk)
        self.chunk = Chunk()
        self.chunk_rows = self.chunk_bytes = 0

    # -- the source, and the end -------------------------------------------------------------

    def reserve_source(self, *, format: str, source_key: str) -> None:
        main_id = self.ids.get("main") or next(iter(self.ids.values()))
        if self.dry_run:
            return
        self.source = store.reserve_source(holder=self.holder, staged=self.staged, format=format,
                                           namespace=self.namespace, source_key=source_key, conversation_id=main_id)

    def info(self, conv: ConvPlan) -> dict:
        messages, checkpoints, first, last = self.counts[conv.key]
        # Its own last date, as the transcript has it (retention counts from receipt instead).
        own = conv.last_activity_at if self.plan.format == "memoryui" and conv.last_activity_at else (last or first)
        return {"id": self.ids[conv.key], "key": conv.key, "title": conv.title, "messages": messages,
                "checkpoints": checkpoints, "relation": conv.relation, "parent_id": self.parent_ids.get(conv.key),
                "parent_position": conv.parent_position, "last_activity_at": own.isoformat() if own else None}

    def publish(self, *, source_fields: dict | None = None, before_commit=None) -> None:
        """Write what is pending, then make every staged conversation visible at once
        (`before_commit`: see store.publish_staged; not called in a dry run)."""
        self.flush()
        if self.dry_run:
            return
        finals, audits, final_meta = {}, [], {}
        now = timezone.now()
        for key, cid in self.ids.items():
            conv = self.plan.conversations.get(key)
            if conv is None:
                continue
            messages, checkpoints, first, last = self.counts[key]
            fork = conv.copy_prefix and self.parent_ids.get(key) is not None and conv.parent_position is not None
            if self.plan.format == "memoryui":
                values = {"last_activity_at": conv.last_activity_at} if conv.last_activity_at else {}
            elif fork:
                parent_key = conv.parent_key
                parent_meta = final_meta.get(parent_key)
                if parent_meta is None:
                    parent_meta = Conversation.objects.filter(pk=self.parent_ids[key]).values_list(
                        "meta", flat=True).first() or {}
                values = {"meta": {**parent_meta, **conv.meta}}
                if first is not None:  # the branch began with its first own row, as the transcript has it
                    values.update(created_at=first, last_activity_at=last or first)
            else:
                values = {"title": conv.title, "meta": conv.meta, "created_at": first or now,
                          "last_activity_at": last or first or now}
            final_meta[key] = values.get("meta", conv.meta)
            if cid in self.staged:
                finals[cid] = values
            audits.append((cid, {"format": self.plan.format, "messages": messages, "checkpoints": checkpoints,
                                 "appended": False, "next_position": self.written[key]}))
        self._await_gap()
        store.publish_staged(holder=self.holder, staged=self.staged, finals=finals, actor=self.actor, audits=audits,
                             source=self.source, source_fields=source_fields, before_commit=before_commit)
        self.staged = []

    def discard(self, keys: list[str] | None = None) -> None:
        """Remove staged conversations (all, or those of `keys`) after a failure."""
        if self.dry_run:
            return
        ids = self.staged if keys is None else [self.ids[k] for k in keys if self.ids.get(k) in self.staged]
        ids = list(ids)
        try:
            store.discard_staged(ids=ids)
        finally:
            self.staged = [i for i in self.staged if i not in ids]
            self.chunk = Chunk()
            self.chunk_rows = self.chunk_bytes = 0
