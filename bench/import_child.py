"""Child process of workload 12: import one file (or only json.loads it); report time and peak memory.

  memoryui    conversations.imports.importer.import_path into a fresh SQLite database
  concurrent  the same, while another process appends to another conversation of that
              database every 10 ms, each append committed; reports the longest append
  raw         json.loads of every line of the same file, nothing else
  stored      json.loads of every line, and the line kept as one row of a raw sqlite3 table
              (memoryui's pragmas, 1,000 lines per committed transaction): the least an
              importer that keeps every original line does, before any message row
  floor       json.loads of every line, and the rows a memoryui import of the file wrote (read,
              untimed, from that import's database: argv[4]) inserted with raw SQL into a fresh
              memoryui database, through its own schema and triggers (position guard, search
              index), with each line kept as an original entry, 5,000 lines per committed
              transaction (few commits, none near a second): what any importer keeping every
              line and indexing every row pays,
              with no parsing, mapping, validation or encoding of its own
  baseline    Django set up on a fresh database, nothing imported

`--format F` (last) names the file's format (default claude-code): workload 21 imports the
sessions of other agents the same way, and its floor reads the file as that format is
read (json.loads of each line, of the whole document, or the Markdown's lines) and keeps
the original entries the memoryui run kept, whatever they are.
"""

import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import common

APPENDER = """
import json, os, sys, time
sys.path.insert(0, sys.argv[4])
from pathlib import Path
import common
common.setup_django(Path(sys.argv[1]))
from conversations import store
waits = []
print("ready", flush=True)
while not os.path.exists(sys.argv[3]):
    started = time.monotonic()
    store.append_message(conversation_id=sys.argv[2], message={"kind": "note", "text": f"still here {len(waits)}"})
    waits.append(time.monotonic() - started)
    time.sleep(0.01)
print(json.dumps({"appends": len(waits), "max_wait": max(waits, default=0)}))
"""


FLOOR_LINES = 5000  # per transaction


# How the floor reads a file of each format once: what any importer of it must do.
DOCUMENTS = ("opencode", "cline")


def read_source(path: str, fmt: str) -> None:
    with open(path, encoding="utf-8") as f:
        if fmt in DOCUMENTS:
            json.loads(f.read())
        elif fmt == "aider":
            f.read().split("\n")
        else:
            for line in f:
                json.loads(line)


def floor_of_format(path: str, db: Path, imported: Path, fmt: str) -> float:
    """The floor of a format whose original entries are not its lines: the memoryui run's own."""
    source = common.connect_memoryui_file(imported)
    rows = source.execute("SELECT kind, content, created_at FROM conversations_message "
                          "ORDER BY conversation_id, position").fetchall()
    entries = [raw for (raw,) in source.execute("SELECT raw FROM imports_sourceentry ORDER BY source_id, seq")]
    source.close()
    common.setup_django(db)
    from conversations import store

    cid = store.create_conversation(title="the floor").pk.hex
    common.close_django()
    conn = common.connect_memoryui_file(db, isolation_level=None)
    conn.executescript(common.RAW_PRAGMAS)
    t0 = time.perf_counter()
    read_source(path, fmt)
    done = 0
    for start in range(0, max(len(rows), len(entries)), FLOOR_LINES):
        part_rows, part_entries = rows[start:start + FLOOR_LINES], entries[start:start + FLOOR_LINES]
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("UPDATE conversations_conversation SET next_position = ? WHERE id = ?",
                     (done + len(part_rows), cid))
        conn.executemany("INSERT INTO conversations_message (conversation_id, position, kind, content, created_at) "
                         "VALUES (?, ?, ?, ?, ?)", ((cid, done + i, *row) for i, row in enumerate(part_rows)))
        conn.executemany('INSERT INTO imports_sourceentry (source_id, seq, conversation_id, position, line, uuid, '
                         'parent_uuid, "group", real, raw) VALUES (1, ?, ?, 0, NULL, NULL, NULL, NULL, 0, ?)',
                         ((start + i, cid, raw) for i, raw in enumerate(part_entries)))
        conn.execute("COMMIT")
        done += len(part_rows)
    seconds = time.perf_counter() - t0
    conn.close()
    return seconds


def floor(path: str, db: Path, imported: Path) -> float:
    source = common.connect_memoryui_file(imported)
    rows = source.execute("SELECT kind, content, created_at FROM conversations_message "
                          "ORDER BY conversation_id, position").fetchall()
    source.close()
    common.setup_django(db)
    from conversations import store

    cid = store.create_conversation(title="the floor").pk.hex
    common.close_django()
    conn = common.connect_memoryui_file(db, isolation_level=None)
    conn.executescript(common.RAW_PRAGMAS)
    with open(path, encoding="utf-8") as f:
        total = sum(1 for _ in f)

    def write(first_line: int, lines: list, done: int) -> int:
        upto = (first_line + len(lines)) * len(rows) // total if first_line + len(lines) < total else len(rows)
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("UPDATE conversations_conversation SET next_position = ? WHERE id = ?", (upto, cid))
        conn.executemany("INSERT INTO conversations_message (conversation_id, position, kind, content, created_at) "
                         "VALUES (?, ?, ?, ?, ?)", ((cid, done + i, *row) for i, row in enumerate(rows[done:upto])))
        conn.executemany('INSERT INTO imports_sourceentry (source_id, seq, conversation_id, position, line, uuid, '
                         'parent_uuid, "group", real, raw) VALUES (1, ?, ?, 0, ?, NULL, NULL, NULL, 0, ?)',
                         ((first_line + i, cid, first_line + i + 1, line) for i, line in enumerate(lines)))
        conn.execute("COMMIT")
        return upto

    t0 = time.perf_counter()
    done, batch, first = 0, [], 0
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f):
            json.loads(line)
            batch.append(line)
            if len(batch) == FLOOR_LINES:
                done = write(first, batch, done)
                first, batch = n + 1, []
    if batch:
        done = write(first, batch, done)
    seconds = time.perf_counter() - t0
    conn.close()
    assert done == len(rows), (done, len(rows))
    return seconds


def main():
    argv = sys.argv[1:]
    fmt = "claude-code"
    if "--format" in argv:
        at = argv.index("--format")
        fmt = argv[at + 1]
        argv = argv[:at] + argv[at + 2:]
    sys.argv = [sys.argv[0], *argv]
    mode, path, db = sys.argv[1], sys.argv[2], Path(sys.argv[3])
    out = {"mode": mode}
    if mode == "raw":
        t0 = time.perf_counter()
        n = 0
        with open(path, encoding="utf-8") as f:
            for line in f:
                json.loads(line)
                n += 1
        out["seconds"] = time.perf_counter() - t0
    elif mode == "stored":
        conn = common.raw_connect(db)
        conn.execute("CREATE TABLE line (seq INTEGER PRIMARY KEY, raw TEXT NOT NULL)")
        t0 = time.perf_counter()
        batch = []
        with open(path, encoding="utf-8") as f:
            for n, line in enumerate(f):
                json.loads(line)
                batch.append((n, line))
                if len(batch) == 1000:
                    conn.execute("BEGIN IMMEDIATE")
                    conn.executemany("INSERT INTO line (seq, raw) VALUES (?, ?)", batch)
                    conn.execute("COMMIT")
                    batch = []
        if batch:
            conn.execute("BEGIN IMMEDIATE")
            conn.executemany("INSERT INTO line (seq, raw) VALUES (?, ?)", batch)
            conn.execute("COMMIT")
        out["seconds"] = time.perf_counter() - t0
    elif mode == "floor" and fmt != "claude-code":
        out["seconds"] = floor_of_format(path, db, Path(sys.argv[4]), fmt)
    elif mode == "floor":
        out["seconds"] = floor(path, db, Path(sys.argv[4]))
    else:
        common.setup_django(db)
        if mode in ("memoryui", "concurrent"):
            from conversations.imports import importer

            appender = stop = None
            if mode == "concurrent":
                from conversations import store

                busy = store.create_conversation(title="an agent appending meanwhile")
                stop = db.parent / f"{db.name}.stop"
                appender = subprocess.Popen(
                    [sys.executable, "-c", APPENDER, str(db), str(busy.pk), str(stop), str(Path(__file__).parent)],
                    stdout=subprocess.PIPE, text=True, env=dict(os.environ))
                assert appender.stdout.readline().strip() == "ready"
            t0 = time.perf_counter()
            result = importer.import_path(path, format=fmt, namespace="bench")
            out["seconds"] = time.perf_counter() - t0
            if appender is not None:
                stop.write_text("stop")
                out.update(json.loads(appender.communicate(timeout=120)[0].strip().splitlines()[-1]))
            out["messages"] = result.messages
            out["conversations"] = len(result.created)
            out["checkpoints"] = result.checkpoints
            out["transactions"] = result.transactions
            out["longest_transaction"] = result.longest_transaction
    out["peak_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(out))


if __name__ == "__main__":
    main()
