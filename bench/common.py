"""What every workload script shares: Django set-up on a throwaway SQLite file, the
raw sqlite3 peer, the LangGraph peer, the message generator, bulk set-up, timing
and result rows.

Each workload script runs as its own process (bench/run.py starts them), so each
configures Django once, for its own database, before importing anything of
memoryui. Results are rows of one JSON file per workload; run.py turns them into
docs/BENCHMARKS.md.
"""

import argparse
import contextlib
import fcntl
import functools
import json
import os
import platform
import random
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

# The pragmas memoryui's settings put on every SQLite connection; the raw peer uses
# the same ones, so both pay for the same durability (WAL, fsync on every commit).
RAW_PRAGMAS = (
    "PRAGMA auto_vacuum=INCREMENTAL;"
    "PRAGMA journal_mode=WAL;"
    "PRAGMA synchronous=FULL;"
    "PRAGMA foreign_keys=ON;"
    "PRAGMA secure_delete=ON;"
    "PRAGMA busy_timeout=30000;"
)


# --------------------------------------------------------------------------- arguments


# A workload that cannot run here (workload 15 without PostgreSQL) exits with this
# code: run.py reports it as not run, not as failed and not as measured.
NOT_RUN = 77


def parse_args(description: str, argv=None):
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke run")
    parser.add_argument("--out", type=Path, required=True, help="JSON file for the result rows")
    parser.add_argument("--workdir", type=Path, default=None,
                        help="folder for databases (default: a new temporary folder)")
    parser.add_argument("--shared", type=Path, default=None,
                        help="folder for the big read-only database shared by workloads (default: workdir)")
    parser.add_argument("--reps", type=int, default=None, help="repetitions (default: 3, quick: 1-2)")
    args = parser.parse_args(argv)
    if args.workdir is None:
        args.workdir = Path(tempfile.mkdtemp(prefix="memoryui-bench-"))
    args.workdir.mkdir(parents=True, exist_ok=True)
    args.shared = args.shared or args.workdir
    return args


# --------------------------------------------------------------------------- Django


def setup_django(db_path: Path, data_dir: Path | None = None):
    """Point memoryui at a throwaway SQLite file and migrate it.

    DATABASE_URL goes through the same settings code as production, so the SQLite
    OPTIONS (WAL, synchronous=FULL, IMMEDIATE transactions, …) apply here too.
    """
    data_dir = data_dir or db_path.parent / "data"
    data_dir.mkdir(parents=True, exist_ok=True)
    # A migrated empty file made once per run (bench/run.py names it): copying it is
    # much quicker than running every migration's DDL with an fsync each.
    # A quick run (run.py --quick) runs two workloads at a time: the first to get here
    # makes the template while the other waits for it.
    template = os.environ.get("MEMORYUI_BENCH_TEMPLATE")
    with one_at_a_time(Path(template)) if template else contextlib.nullcontext():
        if template and Path(template).exists() and not db_path.exists():
            shutil.copyfile(template, db_path)
        migrate_database(f"sqlite:///{db_path}", data_dir)
        # The server never writes through the connection that migrated (`make run` migrates
        # in a process of its own), and that connection is not a fair one to measure: on
        # SQLite, after running the migrations' DDL, every append it makes costs ~1.7×
        # what the same append costs on a connection opened afterwards (measured).
        close_django()
        if template and not Path(template).exists():
            wal_checkpoint(db_path)
            shutil.copyfile(db_path, template)


@contextlib.contextmanager
def one_at_a_time(path: Path):
    """Held by one process at a time, across the workloads of a run: an advisory lock on
    `<path>.lock`, a file of its own (never a database file: closing any descriptor of a
    SQLite file drops the process's locks on it)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(f"{path}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def migrate_database(url: str, data_dir: Path):
    """Configure Django for the database at `url` (through the same settings code as
    production), set it up and migrate it; the connection stays open."""
    os.environ["MEMORYUI_DATA_DIR"] = str(data_dir)
    os.environ["DATABASE_URL"] = url
    os.environ.setdefault("SECRET_KEY", "bench-" + uuid.uuid4().hex)
    os.environ["DJANGO_SETTINGS_MODULE"] = "memoryui.settings"
    os.environ.setdefault("MEMORYUI_LOG_LEVEL", "ERROR")
    # A deletion request searches the files before it answers, unless a workload measures the
    # two phases itself (workloads 13 and 19 set it): the older rows measure that whole request.
    os.environ.setdefault("MEMORYUI_ERASURE_VERIFY", "at-once")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0, interactive=False)


def postgres_reachable() -> bool:
    """Whether `psql -d postgres` connects: the PostgreSQL workloads run only then."""
    try:
        return subprocess.run(["psql", "-d", "postgres", "-Atc", "SELECT 1"], capture_output=True,
                              timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def database_child(argv) -> tuple[list[str], str | None]:
    """Workloads that measure each database in a child process of their own (Django is
    set up once per process) mark the child with `--database NAME`: the arguments
    without it, and NAME (None in the parent)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--database" not in argv:
        return argv, None
    i = argv.index("--database")
    only = argv[i + 1]
    del argv[i:i + 2]
    return argv, only


def rows_per_database(script: str, tag: str, databases: list[str], args, extra: list[str] = ()) -> list[dict]:
    """Run `script` once per database as a child process (see database_child), in turn;
    the rows each child wrote to `<its workdir>/<tag>-<database>.json`, in order."""
    rows = []
    for database in databases:
        child = [sys.executable, script, "--database", database, "--out", str(args.out),
                 "--workdir", str(args.workdir / database)] + (["--quick"] if args.quick else []) + list(extra)
        subprocess.run(child, check=True)
        rows += json.loads((args.workdir / database / f"{tag}-{database}.json").read_text())
    return rows


def close_django():
    from django.db import connections

    connections.close_all()


# --------------------------------------------------------------------------- messages

_WORDS = (
    "the agent reads the ticket and checks the order status before it answers customer refund "
    "policy says within thirty days shipping label tracking number warehouse delayed apologise "
    "tool call returned an error retry with the corrected account id summary of the conversation "
    "so far user prefers email over phone invoice attached please confirm the address"
).split()


def message_for(i: int, rng: random.Random | None = None) -> dict:
    """A realistic chat message: user turns short, assistant turns longer, some tool results.

    Text lengths vary from ~60 to ~900 characters (mean ≈ 300), deterministic per i.
    """
    rng = rng or random.Random(i)
    words = rng.randint(10, 150)
    text = " ".join(rng.choice(_WORDS) for _ in range(words))
    turn = i % 4
    if turn == 0:
        return {"kind": "user", "content": text}
    if turn == 1:
        return {"kind": "assistant", "content": text, "meta": {"model": "bench-1", "tokens": words * 2}}
    if turn == 2:
        return {"kind": "tool", "tool_call_id": f"call_{i}", "name": "lookup", "content": text}
    return {"kind": "assistant", "content": text}


def encoded_for(i: int) -> tuple[str, str]:
    """(kind, stored text) of message_for(i % 4096), encoded once: the generator repeats
    after a while, and encoding every one of a million messages would make set-up
    dominate the run."""
    return _encoded_key(i % 4096)


@functools.lru_cache(maxsize=4096)
def _encoded_key(key: int) -> tuple[str, str]:
    from conversations.message_schema import encode_message

    return encode_message(message_for(key))


def messages(n: int, start: int = 0) -> list[dict]:
    return [message_for(i) for i in range(start, start + n)]


def encoded(n: int, start: int = 0) -> list[tuple[str, str]]:
    """(kind, stored text) pairs exactly as memoryui's store would encode them."""
    from conversations.message_schema import encode_message

    return [encode_message(m) for m in messages(n, start)]


# --------------------------------------------------------------------------- raw sqlite3 peer

RAW_SCHEMA = """
CREATE TABLE IF NOT EXISTS conversation (
    id TEXT PRIMARY KEY, title TEXT NOT NULL DEFAULT '', next_position INTEGER NOT NULL DEFAULT 0,
    created_at TEXT NOT NULL, last_activity_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS message (
    id INTEGER PRIMARY KEY, conversation_id TEXT NOT NULL REFERENCES conversation(id),
    position INTEGER NOT NULL, kind TEXT NOT NULL, content TEXT NOT NULL, created_at TEXT NOT NULL,
    UNIQUE (conversation_id, position)
);
"""


def raw_connect(path: Path) -> sqlite3.Connection:
    """The physical limit: Python's sqlite3, same pragmas, same schema idea, no ORM,
    no validation, no triggers. Autocommit mode; callers BEGIN IMMEDIATE/COMMIT."""
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=30)
    conn.executescript(RAW_PRAGMAS)
    conn.executescript(RAW_SCHEMA)
    return conn


def now_text() -> str:
    return datetime.now(UTC).isoformat(sep=" ")


def raw_create_conversation(conn) -> str:
    cid = uuid.uuid4().hex
    now = now_text()
    conn.execute("BEGIN IMMEDIATE")
    conn.execute("INSERT INTO conversation (id, created_at, last_activity_at) VALUES (?, ?, ?)", (cid, now, now))
    conn.execute("COMMIT")
    return cid


def raw_append(conn, cid: str, message: dict) -> int:
    """One committed append, the same two statements memoryui's store runs."""
    kind = message["kind"]
    text = json.dumps(message, separators=(",", ":"), ensure_ascii=False)
    now = now_text()
    conn.execute("BEGIN IMMEDIATE")
    try:
        (next_position,) = conn.execute(
            "UPDATE conversation SET next_position = next_position + 1, last_activity_at = ? "
            "WHERE id = ? RETURNING next_position",
            (now, cid),
        ).fetchone()
        conn.execute(
            "INSERT INTO message (conversation_id, position, kind, content, created_at) VALUES (?, ?, ?, ?, ?)",
            (cid, next_position - 1, kind, text, now),
        )
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return next_position - 1


def raw_bulk_fill(conn, cid: str, n: int, start: int = 0, batch: int = 20000):
    """n rows in one transaction (set-up only, not measured)."""
    conn.execute("BEGIN IMMEDIATE")
    conn.execute("UPDATE conversation SET next_position = ? WHERE id = ?", (start + n, cid))
    now = now_text()
    for lo in range(start, start + n, batch):
        hi = min(start + n, lo + batch)
        rows = []
        for i in range(lo, hi):
            m = message_for(i)
            rows.append((cid, i, m["kind"], json.dumps(m, separators=(",", ":")), now))
        conn.executemany(
            "INSERT INTO message (conversation_id, position, kind, content, created_at) VALUES (?, ?, ?, ?, ?)", rows
        )
    conn.execute("COMMIT")


# --------------------------------------------------------------------------- memoryui bulk set-up


def bulk_fill(conversation_id, n: int, *, created_at=None, batch: int = 20000):
    """Give a memoryui conversation n messages without n appends (set-up, not measured).

    One transaction of raw INSERTs through Django's connection. The append-only
    trigger wants every inserted position below next_position, so the counter is
    raised first (raising it is allowed). The rows are the store's own encoding.
    """
    from django.db import connection, transaction
    from django.utils import timezone

    from conversations.models import Conversation, Message

    conv_table = Conversation._meta.db_table
    msg_table = Message._meta.db_table
    cid = Conversation._meta.pk.get_db_prep_value(conversation_id, connection)
    when = connection.ops.adapt_datetimefield_value(created_at or timezone.now())
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(f"SELECT next_position FROM {conv_table} WHERE id = %s", [cid])
        (start,) = cursor.fetchone()
        cursor.execute(
            f"UPDATE {conv_table} SET next_position = %s, last_activity_at = %s WHERE id = %s",
            [start + n, when, cid],
        )
        for lo in range(start, start + n, batch):
            hi = min(start + n, lo + batch)
            rows = [(cid, i, *encoded_for(i), when) for i in range(lo, hi)]
            cursor.executemany(
                f"INSERT INTO {msg_table} (conversation_id, position, kind, content, created_at) "
                "VALUES (%s, %s, %s, %s, %s)",
                rows,
            )
    return start + n


def connect_memoryui_file(db_path: Path, **kwargs):
    """A second connection to a file memoryui's store (sqlean's SQLite) may have open in
    this process. It must come from the same SQLite library: two libraries in one
    process do not share their POSIX locks, so Python's own sqlite3 closing its
    descriptor would drop the store's locks, and, taking itself for the last
    connection, delete the WAL the store is still writing to."""
    import sqlean.dbapi2

    return sqlean.dbapi2.connect(db_path, **kwargs)


def _is_memoryui_file(db_path: Path) -> bool:
    from django.conf import settings

    return settings.configured and str(settings.DATABASES["default"]["NAME"]) == str(db_path)


def wal_checkpoint(db_path: Path):
    """Fold the WAL into the main file, through the SQLite library that has it open."""
    connect = connect_memoryui_file if _is_memoryui_file(db_path) else sqlite3.connect
    conn = connect(db_path, timeout=30)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
    finally:
        conn.close()


def bytes_on_disk(db_path: Path, *, checkpoint: bool = True) -> int:
    """Main file plus WAL, after folding the WAL into the main file."""
    if checkpoint:
        wal_checkpoint(db_path)
    total = 0
    for suffix in ("", "-wal", "-shm"):
        p = Path(str(db_path) + suffix)
        if p.exists() and suffix != "-shm":
            total += p.stat().st_size
    return total


# --------------------------------------------------------------------------- LangGraph peer


class LangGraphPeer:
    """The checkpointer people use today: LangGraph's SqliteSaver holding a `messages`
    channel reduced by `add_messages`.

    One append = one checkpoint, written through `saver.put` with the state the
    graph would write after a super-step that added one message (the reducer runs,
    then the whole channel value is serialized into the checkpoint). That is the
    cheapest a LangGraph agent can record a message: a real `graph.invoke` of a
    one-node graph writes three checkpoints per call (input, loop start, node
    result; measured in workload 1). SqliteSaver opens WAL; we add
    synchronous=FULL so every peer fsyncs each commit.
    """

    def __init__(self, db_path: Path):
        from langgraph.checkpoint.sqlite import SqliteSaver

        self.db_path = db_path
        self.conn = sqlite3.connect(db_path, check_same_thread=False)
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("PRAGMA synchronous=FULL")
        self.saver = SqliteSaver(self.conn)
        self.saver.setup()
        self.threads: dict[str, tuple[dict, list, int]] = {}

    def put(self, thread_id: str, new_messages: list):
        from langgraph.checkpoint.base import empty_checkpoint
        from langgraph.graph.message import add_messages

        config, current, step = self.threads.get(
            thread_id, ({"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}, [], -1)
        )
        step += 1
        current = add_messages(current, new_messages)
        checkpoint = empty_checkpoint()
        checkpoint["channel_values"] = {"messages": current}
        checkpoint["channel_versions"] = {"messages": step + 1}
        checkpoint["updated_channels"] = ["messages"]
        config = self.saver.put(config, checkpoint, {"source": "loop", "step": step, "parents": {}},
                                {"messages": step + 1})
        self.threads[thread_id] = (config, current, step)

    def append(self, thread_id: str, i: int):
        self.put(thread_id, [lc_message(i)])

    def load(self, thread_id: str) -> list:
        """What a harness does at resume: the latest checkpoint's messages."""
        tup = self.saver.get_tuple({"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}})
        return tup.checkpoint["channel_values"]["messages"]

    def close(self):
        self.conn.close()


def langgraph_graph(db_path: Path):
    """A real one-node StateGraph over SqliteSaver (to count checkpoints per invoke)."""
    from typing import Annotated, TypedDict

    from langgraph.checkpoint.sqlite import SqliteSaver
    from langgraph.graph import START, StateGraph
    from langgraph.graph.message import add_messages

    class State(TypedDict):
        messages: Annotated[list, add_messages]

    def step(state: State):
        return {}

    conn = sqlite3.connect(db_path, check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    saver = SqliteSaver(conn)
    saver.setup()
    builder = StateGraph(State)
    builder.add_node("step", step)
    builder.add_edge(START, "step")
    return builder.compile(checkpointer=saver), conn


def lc_message(i: int):
    """The same generated message as a LangChain message object."""
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    m = message_for(i)
    if m["kind"] == "user":
        return HumanMessage(content=m["content"])
    if m["kind"] == "tool":
        return ToolMessage(content=m["content"], tool_call_id=m["tool_call_id"], name=m["name"])
    return AIMessage(content=m["content"], response_metadata=m.get("meta") or {})


# --------------------------------------------------------------------------- timing


def timed(fn, *args, **kwargs) -> float:
    t0 = time.perf_counter()
    fn(*args, **kwargs)
    return time.perf_counter() - t0


def median(values) -> float:
    return statistics.median(values)


def alternate(runners: dict, reps: int) -> dict[str, list[float]]:
    """Run each named callable `reps` times, rotating the order every repetition so
    no peer always goes first (warm caches, fsync bursts); returns all timings."""
    names = list(runners)
    out = {name: [] for name in names}
    for rep in range(reps):
        order = names[rep % len(names):] + names[: rep % len(names)]
        for name in order:
            out[name].append(runners[name]())
    return out


# --------------------------------------------------------------------------- results


@dataclass
class Row:
    workload: str
    metric: str
    memoryui: float | None = None
    raw: float | None = None
    langgraph: float | None = None
    unit: str = ""
    # What the target compares, e.g. "memoryui / raw ≥ 0.50"; the value of that ratio.
    target: str = ""
    ratio: float | None = None
    passed: bool | None = None
    note: str = ""


@dataclass
class Results:
    workload: str
    rows: list[Row] = field(default_factory=list)
    sizes: dict = field(default_factory=dict)
    seconds: float = 0.0

    def add(self, **kw) -> Row:
        row = Row(workload=self.workload, **kw)
        self.rows.append(row)
        print(f"  {row.metric}: memoryui={fmt(row.memoryui)} raw={fmt(row.raw)} langgraph={fmt(row.langgraph)} "
              f"{row.unit} {row.target} {fmt(row.ratio)} "
              f"{'' if row.passed is None else ('PASS' if row.passed else 'MISS')} {row.note}", flush=True)
        return row

    def write(self, path: Path):
        path.parent.mkdir(parents=True, exist_ok=True)
        data = {"workload": self.workload, "sizes": self.sizes, "seconds": round(self.seconds, 2),
                "rows": [asdict(r) for r in self.rows]}
        path.write_text(json.dumps(data, indent=2))


def finish(res: Results, args, started: float, *connections):
    """A workload's last step: close its own connections and Django's, record how long
    it ran since `started` (a perf_counter reading) and write its rows to --out."""
    for conn in connections:
        conn.close()
    close_django()
    res.seconds = time.perf_counter() - started
    res.write(args.out)


def fmt(value) -> str:
    if value is None:
        return "—"
    if isinstance(value, bool):
        return str(value)
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    if abs(value) >= 0.1:
        return f"{value:.2f}"
    return f"{value:.3g}"


def machine_line() -> str:
    import sqlean.dbapi2

    return (f"{os.cpu_count()} cores, Python {platform.python_version()}, SQLite {sqlean.dbapi2.sqlite_version} "
            f"(memoryui, sqlean) and {sqlite3.sqlite_version} (raw sqlite3 and LangGraph, Python's own), "
            f"{platform.system()} {platform.machine()}")


def append_until(conversation_id, stop: str) -> list[list]:
    """An appender process's loop (workloads 13 and 15): append one message at a time
    through the store, as fast as it can, until the file `stop` exists. One mark per
    append: [start time, seconds it took, the error or None]."""
    from conversations import store

    marks, i = [], 0
    while not os.path.exists(stop):
        started = time.time()
        try:
            store.append_message(conversation_id=conversation_id,
                                 message={"kind": "note", "text": f"still writing {i}"})
            marks.append([started, time.time() - started, None])
        except Exception as exc:
            marks.append([started, time.time() - started, f"{type(exc).__name__}: {exc}"[:200]])
        i += 1
    return marks


def stop_appender(appender, stop: Path, *, timeout: float) -> list[list]:
    """Tell an appender process (append_until) to stop; its marks, once it has ended."""
    stop.write_text("stop")
    out, _ = appender.communicate(timeout=timeout)
    return json.loads(out.strip().splitlines()[-1])


def appends_in(marks: list[list], window: tuple[float, float]) -> tuple[list[float], list[str]]:
    """Of the appends that overlap `window` (an append that overlaps it waited on what ran
    in it): the milliseconds of those that succeeded, and the errors of those that failed."""
    lo, hi = window
    inside = [m for m in marks if m[0] < hi and m[0] + m[1] > lo]
    return [m[1] * 1000 for m in inside if m[2] is None], [m[2] for m in inside if m[2]]


def days_ago(days: float):
    return datetime.now(UTC) - timedelta(days=days)


# --------------------------------------------------------------------------- the shared big database


def big_sizes(quick: bool) -> tuple[int, ...]:
    """Conversation lengths of the shared read-only database (workloads 4, 6, 7)."""
    return (100, 1000, 10_000, 20_000) if quick else (100, 1000, 10_000, 1_000_000)


def big_database(folder: Path, quick: bool) -> tuple[Path, dict[int, str]]:
    """A memoryui database with one conversation per size in big_sizes, each with a
    checkpoint 200 messages before its end; built once per run, reused by the read
    workloads. Returns the file and {size: conversation id}. Django must not be set
    up yet: this sets it up on that file."""
    folder.mkdir(parents=True, exist_ok=True)
    db = folder / ("big-quick.sqlite3" if quick else "big.sqlite3")
    with one_at_a_time(db):  # the first of the read workloads builds it, the others wait
        return _big_database(db, quick)


def _big_database(db: Path, quick: bool) -> tuple[Path, dict[int, str]]:
    manifest = db.with_suffix(".json")
    setup_django(db)
    if manifest.exists():
        return db, {int(k): v for k, v in json.loads(manifest.read_text()).items()}
    from conversations import store

    t0 = time.perf_counter()
    ids = {}
    for n in big_sizes(quick):
        conversation = store.create_conversation(title=f"bench {n:,} messages")
        bulk_fill(conversation.pk, n)
        store.checkpoint_at(conversation_id=conversation.pk, position=max(0, n - 201),
                            summary="Summary of everything so far: the customer wants a refund.")
        ids[n] = str(conversation.pk)
    wal_checkpoint(db)
    manifest.write_text(json.dumps(ids))
    print(f"  built {db.name} ({db.stat().st_size / 1e6:,.0f} MB) in {time.perf_counter() - t0:.1f} s", flush=True)
    return db, ids
