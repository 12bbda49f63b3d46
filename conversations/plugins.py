"""Every point where a sub-app plugs into the core, declared once, so the core imports none of them.

A sub-app registers from its AppConfig.ready(), and only here:

    from conversations import plugins
    plugins.owned_tables.register(MyModel, by=self.label)

Each point is an object below with its name (the module attribute it is bound to), the type
of what it takes (a dataclass, a model, or a typing.Protocol whose `__call__` is how the core
calls it), the line docs/ARCHITECTURE.md shows for it and the registrations it holds, in
order, with the app that made each. `register` checks what it is given against that type
before keeping it, so an app that passes the wrong thing fails when Django starts, with a
`PluginTypeError` naming the point, instead of at the first export or deletion that calls
it. tests/test_architecture.py compares what is registered after start-up with the page.

Three kinds, by how the core uses them:
- a `Point` holds any number of things (tables, export sections, jobs), read back with
  `registered()`; one with `single=True` holds at most one, the last registered;
- a `Hook` is a function one app provides and the core calls (`plugins.ledger_panel(convo)`),
  answering with its default until an app registers;
- an `Event` is sent by the core to every receiver registered (a Django signal underneath:
  `send` runs each in turn, in the sender's transaction).

The points retention and embeddings read (`leftover_files`, `embedding_jobs`) are declared
here too, not in those apps: the apps that fill them (imports; facts and search) then depend
on the core alone, and the core still imports no sub-app (.importlinter).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, is_dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from django.db import models
from django.dispatch import Signal

if TYPE_CHECKING:
    from conversations.models import Conversation


class PluginTypeError(TypeError):
    """An app registered something a plug-in point does not take."""


@dataclass(frozen=True)
class Registration:
    point: str
    by: str  # the registering app's label ("conversations" for the core)
    item: Any


_POINTS: list[Point] = []


class Point:
    """A place the core reads what apps registered; see the module's docstring."""

    def __init__(self, name: str, expects: type, doc: str, *, single: bool = False,
                 key: Callable[[Any], object] | None = None):
        self.name, self.expects, self.doc, self.single = name, expects, doc, single
        self._key = key or (lambda item: item)
        self._held: list[Registration] = []
        _POINTS.append(self)

    def register(self, item, *, by: str) -> None:
        """Keep `item` for this point, registered by the app labelled `by`. The same thing
        registered again (an app's ready() run twice) keeps its first place."""
        problem = self.problem(item)
        if problem:
            raise PluginTypeError(f"plug-in point {self.name!r} takes {self.expected()}; "
                                  f"{by} registered {_describe(item)}: {problem}")
        held = Registration(point=self.name, by=by, item=item)
        if self.single:
            self._held = [held]
            return
        same = [i for i, r in enumerate(self._held) if self._key(r.item) == self._key(item)]
        if same:
            self._held[same[0]] = held
        else:
            self._held.append(held)

    def registered(self) -> list:
        return [r.item for r in self._held]

    def registrations(self) -> list[Registration]:
        return list(self._held)

    def one(self):
        """A single point's registration, or None while no app has made one."""
        return self._held[-1].item if self._held else None

    def expected(self) -> str:
        if _is_callable_protocol(self.expects):
            return f"a function called as {self.name}{_call_shape(self.expects)}"
        if is_dataclass(self.expects):
            return f"a {self.expects.__module__}.{self.expects.__qualname__}"
        return f"a {self.expects.__name__}"

    def problem(self, item) -> str | None:
        """Why `item` does not fit this point, or None when it does."""
        if _is_callable_protocol(self.expects):
            return _call_problem(self.expects, item)
        if isinstance(item, self.expects):
            return None
        return f"not a {self.expects.__name__}"


class ModelPoint(Point):
    """A point that takes model classes with the columns `columns` names."""

    def __init__(self, name: str, doc: str, *, columns: tuple[str, ...]):
        super().__init__(name, models.Model, doc, key=lambda model: model._meta.label)
        self.columns = columns

    def expected(self) -> str:
        return f"a model class with {', '.join(self.columns)}"

    def problem(self, item) -> str | None:
        if not (isinstance(item, type) and issubclass(item, models.Model)):
            return "not a model class"
        have = {f.name for f in item._meta.get_fields()} | {getattr(f, "attname", "") for f in item._meta.get_fields()}
        missing = [c for c in self.columns if c not in have]
        return f"it has no {', '.join(missing)}" if missing else None


class Hook(Point):
    """One function an app provides and the core calls; its default until one registers."""

    def __init__(self, name: str, expects: type, doc: str, *, default: Callable):
        super().__init__(name, expects, doc, single=True)
        self.default = default

    def __call__(self, *args, **kwargs):
        return (self.one() or self.default)(*args, **kwargs)


class Event(Point):
    """Sent by the core to every receiver registered, in order of registration."""

    def __init__(self, name: str, expects: type, doc: str):
        super().__init__(name, expects, doc)
        self._signal = Signal()

    def register(self, item, *, by: str) -> None:
        super().register(item, by=by)
        self._signal.connect(item, weak=False, dispatch_uid=f"{by}:{self.name}:{_describe(item)}")

    def send(self, **kwargs) -> None:
        self._signal.send(**kwargs)


def points() -> list[Point]:
    """Every plug-in point, in the order declared."""
    return list(_POINTS)


def registrations() -> list[Registration]:
    """What every app registered, point by point, each point's in the order registered."""
    return [r for point in _POINTS for r in point.registrations()]


# -- checking what is registered ---------------------------------------------------------------

def _is_callable_protocol(expects: type) -> bool:
    return getattr(expects, "_is_protocol", False) and "__call__" in expects.__dict__


def _describe(item) -> str:
    if isinstance(item, type) or callable(item) and hasattr(item, "__qualname__"):
        return f"{getattr(item, '__module__', '?')}.{item.__qualname__}"
    return f"a {type(item).__name__}"


def _call_parameters(protocol: type) -> list[inspect.Parameter]:
    return list(inspect.signature(protocol.__call__).parameters.values())[1:]  # without self


def _call_shape(protocol: type) -> str:
    shown = []
    for p in _call_parameters(protocol):
        shown.append(p.name if p.kind is inspect.Parameter.POSITIONAL_ONLY else f"{p.name}=…")
    return f"({', '.join(shown)})"


def _call_problem(protocol: type, item) -> str | None:
    """Whether `item` accepts the call the core makes: the protocol's positional-only
    parameters passed by position, the others by name."""
    if not callable(item):
        return "not callable"
    try:
        signature = inspect.signature(item)
    except (TypeError, ValueError):  # a builtin without one: callable is all that can be known
        return None
    args = [p.name for p in _call_parameters(protocol) if p.kind is inspect.Parameter.POSITIONAL_ONLY]
    kwargs = {p.name: p.name for p in _call_parameters(protocol) if p.kind is not inspect.Parameter.POSITIONAL_ONLY}
    try:
        signature.bind(*args, **kwargs)
    except TypeError as refused:
        return f"calling it so fails ({refused})"
    return None


# -- what the points take ----------------------------------------------------------------------

class ConversationOpenedReceiver(Protocol):
    """A Django signal's receiver: Django passes the signal, the sender and what was sent, by name."""

    def __call__(self, *, signal, sender, conversation_id, actor, via, detail) -> None: ...


class ForkReceiver(Protocol):
    def __call__(self, *, signal, sender, child_id, parent_id, upto) -> None: ...


class LedgerPanel(Protocol):
    def __call__(self, conversation: Conversation, /) -> object | None: ...


class LedgerTimeline(Protocol):
    def __call__(self, entries: list, conversation_id, /, *, after: int, upto: int | None) -> list: ...


class LedgerMark(Protocol):
    def __call__(self, conversation_id, /) -> str: ...


class DeleteConversation(Protocol):
    def __call__(self, *, conversation_id, actor: str) -> object: ...


class BackupExtras(Protocol):
    def __call__(self, path: Path, /) -> dict: ...


class RestorePrepare(Protocol):
    def __call__(self, *, path: Path, manifest: dict, erasure_journal: Path | None,
                 without_erasure_journal: bool) -> object: ...


class RestoreFinish(Protocol):
    def __call__(self, plan, /, *, path: Path, manifest: dict) -> dict: ...


class FindByFrameworkId(Protocol):
    def __call__(self, text: str, /) -> list: ...


class AgentExporter(Protocol):
    def __call__(self, conversation: Conversation, fmt: str, /) -> Iterator[str]: ...


class ScrapeTimeGauges(Protocol):
    def __call__(self) -> Iterable: ...


@dataclass(frozen=True)
class ExportSection:
    """What an app adds to every JSON, JSONL and Markdown export of a conversation (the ledger:
    task state, actions, snapshots): `header(conversation_id)` keys of the JSON header,
    `jsonl(conversation_id)` lines after the messages and checkpoints, `markdown(conversation_id)`
    a closing section."""

    header: Callable[[object], dict]
    jsonl: Callable[[object], Iterator[str]]
    markdown: Callable[[object], Iterator[str]]


@dataclass(frozen=True)
class HeadSigner:
    """How an export gets its signed head (conversations.proofs): `sign(conversation)` returns
    the head as a dict, or None when the key is unusable; `markdown(head)` the closing section
    of a Markdown export."""

    sign: Callable[[Conversation], dict | None]
    markdown: Callable[[dict], str]


@dataclass(frozen=True)
class Leftovers:
    """Files outside the database that may hold personal data for a while (an import page's
    preview keeps the uploaded transcript until it is confirmed). No deletion of rows reaches
    them: a prune calls `remove_expired` and reports how many went; a deletion request asks
    `about` for the files its own records tie to the subject or to the conversations being
    deleted, searches the bytes of all `files` for the texts it deletes, removes every file
    that matches either way, searches what is left again, and lists the removed files on the
    receipt (retention/erasure_verify.py)."""

    # Shown on receipts and prune notes ("uploads/<file>").
    name: str
    # Every file that may hold personal data now.
    files: Callable[[], list[Path]]
    # about(subject=..., conversation_ids=...): the files known, by their own records, to be about either.
    about: Callable[..., list[Path]]
    # remove(path): removes the file and whatever goes with it; returns the bytes it held.
    remove: Callable[[Path], int]
    # remove_expired(): removes the files past their lifetime; returns how many.
    remove_expired: Callable[[], int]


@dataclass(frozen=True)
class EmbeddingJob:
    """What the background embedder (embeddings/worker.py) works through for an app that keeps
    vectors: `counts(model_id)` says how many of its vectors the current model made, how many
    another model made (stale: the model changed) and how many texts wait for a first vector;
    `run(embedder, model_id, limit)` embeds up to `limit` of the waiting and stale ones and
    returns how many it did. Each call commits what it did, so the work is resumable by
    construction: whatever a crash interrupts is still waiting or stale, and is found again."""

    name: str
    label: str
    counts: Callable[[int], dict]
    run: Callable[..., int]


def _no_deletion_path(*, conversation_id, actor):
    raise RuntimeError("no app registered the deletion path (conversations.retention is not installed)")


# -- the points --------------------------------------------------------------------------------

owned_tables = ModelPoint(
    "owned_tables", columns=("conversation_id",),
    doc="a table whose rows belong to a conversation: pruned, deleted and erased with it (conversations/owned.py); "
        "a deletion request samples the columns its model declares personal (`personal_data`)")
conversation_opened = Event(
    "conversation_opened", ConversationOpenedReceiver,
    doc="a person opened a conversation (its page, a fold's context, an export)")
fork_copying = Event(
    "fork_copying", ForkReceiver,
    doc="a fork is being copied, before its rows, in its transaction (search notes that the copies are found "
        "through the parent's rows, so they are not tokenised again)")
fork_copied = Event(
    "fork_copied", ForkReceiver,
    doc="a fork's rows and checkpoint are copied, in its transaction (the ledger copies its rows as of it)")
ledger_panel = Hook(
    "ledger_panel", LedgerPanel, default=lambda conversation: None,
    doc="the conversation page's ledger panel (task state, actions, snapshots)")
ledger_timeline = Hook(
    "ledger_timeline", LedgerTimeline, default=lambda entries, conversation_id, *, after, upto: entries,
    doc="the page's rows with the ledger's marks put after the row each belongs to")
ledger_mark = Hook(
    "ledger_mark", LedgerMark, default=lambda conversation_id: "",
    doc="a text that changes whenever the ledger records anything for a conversation (live follow)")
delete_conversation = Hook(
    "delete_conversation", DeleteConversation, default=_no_deletion_path,
    doc="the API's DELETE takes the deletion request's path (text gone, verified, a receipt); returns the receipt")
backup_extras = Hook(
    "backup_extras", BackupExtras, default=lambda path: {},
    doc="what a backup set carries besides the database (the erasure journal), for its manifest")
restore_prepare = Hook(
    "restore_prepare", RestorePrepare, default=lambda **options: None,
    doc="before a restore loads anything: checks it can re-apply newer erasures; raises BackupError to refuse")
restore_finish = Hook(
    "restore_finish", RestoreFinish, default=lambda plan, **options: {"notes": [], "problems": []},
    doc="after the restored database verified: re-applies those erasures; returns notes and problems")
find_by_framework_id = Hook(
    "find_by_framework_id", FindByFrameworkId, default=lambda text: [],
    doc="the conversations a framework's id names (a LangGraph thread, an agent session), for the search box")
export_sections = Point(
    "export_sections", ExportSection, doc="a section in every JSON, JSONL and Markdown export")
export_head_signer = Point(
    "export_head_signer", HeadSigner, single=True, doc="the signed head in every export")
agent_exporter = Point(
    "agent_exporter", AgentExporter, single=True,
    doc="the formats agents write (OpenAI, Anthropic, Gemini, Claude Code, memoryui)")
leftover_files = Point(
    "leftover_files", Leftovers, key=lambda leftovers: leftovers.name,
    doc="files outside the database that may hold a subject: pruned when expired, erased with their subject")
embedding_jobs = Point(
    "embedding_jobs", EmbeddingJob, key=lambda job: job.name,
    doc="texts waiting for their vectors, for the background embedder")
scrape_time_gauges = Point(
    "scrape_time_gauges", ScrapeTimeGauges,
    doc="gauges computed when /metrics is read (memoryui/metrics.py serves the scrape)")
