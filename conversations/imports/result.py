"""What an import reports: conversations created, appended, failed or already present,
with the problems found and how long it held the write lock."""

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.utils import timezone

from conversations.formats.base import Problem
from conversations.retention.pruning import default_retention_days


@dataclass
class ImportResult:
    format: str
    source_key: str
    namespace: str = ""
    dry_run: bool = False
    created: list[dict] = field(default_factory=list)
    appended: list[dict] = field(default_factory=list)
    failed: list[dict] = field(default_factory=list)
    # Conversations of the file that are here already (a memoryui export imported again): untouched.
    present: list[dict] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    entries_added: int = 0
    unchanged: bool = False
    conversation_id: str | None = None
    # The entries door: where the stream stands after the batch (entries stored, mtime).
    stream: dict | None = None
    # Write transactions it took, and how long the longest held the write lock (seconds).
    transactions: int = 0
    longest_transaction: float = 0.0
    # Subagents that came before this session and were linked to it now (subagents.py).
    linked: list[dict] = field(default_factory=list)
    # A file reusing the session id of another conversation without continuing it: imported
    # as a conversation of its own ({"session_id", "conversation_id", "external_id"}).
    distinct_from: dict | None = None
    # Ids of the conversations pinned on the caller's request (`pin_older_than_retention`).
    pinned: list[str] = field(default_factory=list)
    # The file held no message and no checkpoint: nothing was created (see importer.EMPTY).
    empty: bool = False

    @property
    def older_than_retention(self) -> list[dict]:
        """The conversations written whose own dates are older than the retention period. A
        prune counts from when memoryui received them, so none is taken for that period
        (docs/DESIGN.md, invariant 14); after it they go unless pinned: the doors say so and offer to."""
        cutoff = timezone.now() - timedelta(days=default_retention_days())
        older = []
        for c in self.created + self.appended:
            at = c.get("last_activity_at")
            if at and datetime.fromisoformat(at) < cutoff:
                older.append({"id": c["id"], "title": c.get("title", ""), "last_activity_at": at})
        return older

    @property
    def messages(self) -> int:
        return sum(c["messages"] for c in self.created + self.appended)

    @property
    def checkpoints(self) -> int:
        return sum(c["checkpoints"] for c in self.created + self.appended)

    def as_dict(self) -> dict:
        return {
            "format": self.format, "source": self.source_key, "namespace": self.namespace, "dry_run": self.dry_run,
            "unchanged": self.unchanged, "conversation_id": self.conversation_id,
            "created": self.created, "appended": self.appended, "failed": self.failed, "present": self.present,
            "messages": self.messages, "checkpoints": self.checkpoints, "entries": self.entries_added,
            "problems": [p.as_dict() for p in self.problems], "linked": self.linked,
            "retention_days": default_retention_days(), "older_than_retention": self.older_than_retention,
            "pinned": self.pinned, "empty": self.empty,
            **({"distinct_from": self.distinct_from} if self.distinct_from is not None else {}),
            **({"stream": self.stream} if self.stream is not None else {}),
        }


def merged(results: list[ImportResult]) -> ImportResult:
    """Several imports of one file (the sessions of an Aider history, the sessions of an
    OpenCode database) as one answer: the first one's identity, everything they did."""
    first = results[0]
    out = ImportResult(format=first.format, source_key=first.source_key, namespace=first.namespace,
                       dry_run=first.dry_run, conversation_id=first.conversation_id)
    for r in results:
        out.created += r.created
        out.appended += r.appended
        out.failed += r.failed
        out.present += r.present
        out.problems += r.problems
        out.linked += r.linked
        out.pinned += r.pinned
        out.entries_added += r.entries_added
        out.transactions += r.transactions
        out.longest_transaction = max(out.longest_transaction, r.longest_transaction)
        out.conversation_id = out.conversation_id or r.conversation_id
    out.unchanged = all(r.unchanged or r.empty for r in results) and not all(r.empty for r in results)
    out.empty = all(r.empty for r in results)
    return out
