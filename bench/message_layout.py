"""Layouts of the SQLite message table, side by side (a probe, not a workload of run.py).

The same rows (bench/common.py's messages, with a 16-byte salt and two 32-byte hashes, as the
store keeps them), the same pragmas as memoryui's files, no triggers, in raw SQL through
sqlean (memoryui's SQLite build), one file per layout:

- `without_rowid`: memoryui's table now: PRIMARY KEY (conversation_id, position) WITHOUT ROWID.
  A conversation's rows share pages, but a cell keeps at most ~1,000 bytes on a 4 KiB page, so
  every row over that takes an overflow page of its own, and interior pages repeat whole rows.
- `rowid`: an INTEGER PRIMARY KEY in insertion order and a UNIQUE (conversation_id, position)
  index (the layout before the WITHOUT ROWID change: conversations written at the same time
  share pages).
- `rowid_clustered`: the rowid is the conversation's number × 2^32 + position (the full-text
  index already numbers rows so), with the same UNIQUE index: a conversation's rows share
  pages and a cell keeps up to ~4,000 bytes.
- `raw_peer`: workload 5's raw sqlite3 peer, the `rowid` layout without the salt and hashes
  (NULL there): the denominator of that workload's fork target.

Measured: a fork (INSERT … SELECT of 50,000 rows and its commit), a committed single-row append,
the bytes per row, and pruning: after conversations written round-robin, half of them deleted
and the file vacuumed incrementally, its size against a fresh file of the rows that stay.

    .venv/bin/python bench/message_layout.py [--rows 50000] [--reps 5]
"""

import argparse
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

import common

COLUMNS = "conversation_id, position, kind, content, created_at, salt, commitment, chain_hash"
FIELDS = ('"position" bigint NOT NULL, kind varchar(16) NOT NULL, content text NOT NULL, '
          "created_at datetime NOT NULL, conversation_id char(32) NOT NULL, salt blob, commitment blob, "
          "chain_hash blob")
ROWID_TABLE = f'CREATE TABLE m (id INTEGER PRIMARY KEY, {FIELDS}, UNIQUE (conversation_id, "position"))'
LAYOUTS = {
    "without_rowid": f'CREATE TABLE m ({FIELDS}, PRIMARY KEY (conversation_id, "position")) WITHOUT ROWID',
    "rowid": ROWID_TABLE,
    "rowid_clustered": ROWID_TABLE,  # the same table; its rows are numbered differently (Table._id)
    # Workload 5's raw peer (bench/common.py RAW_SCHEMA): a rowid in insertion order, the same
    # index, and no salt or hashes: the denominator of that workload's target.
    "raw_peer": 'CREATE TABLE m (id INTEGER PRIMARY KEY, conversation_id TEXT NOT NULL, position INTEGER NOT NULL, '
                'kind TEXT NOT NULL, content TEXT NOT NULL, created_at TEXT NOT NULL, salt BLOB, commitment BLOB, '
                'chain_hash BLOB, UNIQUE (conversation_id, position))',
}
SPAN = 2 ** 32


class Table:
    """One layout's file; conversations numbered in creation order (the clustered rowid's high part)."""

    def __init__(self, path: Path, layout: str):
        import sqlean

        self.layout = layout
        self.sealed = layout != "raw_peer"  # the raw peer keeps no salt or hashes
        self.db = sqlean.connect(str(path), isolation_level=None)
        self.db.executescript(common.RAW_PRAGMAS + "PRAGMA secure_delete=ON;")
        self.db.execute(LAYOUTS[layout])
        self.numbers: dict[str, int] = {}

    def conversation(self) -> str:
        cid = uuid.uuid4().hex
        self.numbers[cid] = len(self.numbers) + 1
        return cid

    def _id(self, cid: str, position: int):
        return self.numbers[cid] * SPAN + position if self.layout == "rowid_clustered" else None

    def insert(self, values: list[tuple]) -> None:
        """Rows of (cid, position, kind, content, created_at, salt, commitment, chain_hash),
        in the caller's transaction."""
        if self.layout == "without_rowid":
            self.db.executemany(f"INSERT INTO m ({COLUMNS}) VALUES (?,?,?,?,?,?,?,?)", values)
        else:
            self.db.executemany(f"INSERT INTO m (id, {COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?)",
                                [(self._id(v[0], v[1]), *v) for v in values])

    def fork(self, parent: str, count: int) -> int:
        child = self.conversation()
        self.db.execute("BEGIN IMMEDIATE")
        if self.layout == "without_rowid":
            done = self.db.execute(f"INSERT INTO m ({COLUMNS}) SELECT ?, position, kind, content, created_at, salt, "
                                   "commitment, chain_hash FROM m WHERE conversation_id = ? AND position < ? "
                                   "ORDER BY position", (child, parent, count))
        else:
            base = self.numbers[child] * SPAN if self.layout == "rowid_clustered" else None
            done = self.db.execute(f"INSERT INTO m (id, {COLUMNS}) SELECT ? + position, ?, position, kind, content, "
                                   "created_at, salt, commitment, chain_hash FROM m WHERE conversation_id = ? "
                                   "AND position < ? ORDER BY position", (base, child, parent, count))
        copied = done.rowcount
        self.db.execute("COMMIT")
        return copied

    def row(self, cid: str, position: int, now: str) -> tuple:
        kind, text = common.encoded_for(position)
        if not self.sealed:
            return (cid, position, kind, text, now, None, None, None)
        return (cid, position, kind, text, now, os.urandom(16), os.urandom(32), os.urandom(32))

    def pages(self) -> int:
        return self.db.execute("PRAGMA page_count").fetchone()[0]


def build(layout: str, work: Path, rows: int) -> tuple[Table, str, int]:
    """The layout's file with one conversation of `rows` rows: (table, its id, bytes per row)."""
    now = common.now_text()
    table = Table(work / f"{layout}.sqlite3", layout)
    parent = table.conversation()
    table.db.execute("BEGIN")
    table.insert([table.row(parent, i, now) for i in range(rows)])
    table.db.execute("COMMIT")
    table.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return table, parent, table.pages() * 4096 / rows


def measure(work: Path, rows: int, reps: int) -> dict:
    """Each layout's median fork and append, the layouts taking turns within each repetition."""
    built = {layout: build(layout, work, rows) for layout in LAYOUTS}
    forks = {layout: [] for layout in LAYOUTS}
    appends = {layout: [] for layout in LAYOUTS}
    now = common.now_text()
    for rep in range(reps):
        for layout, (table, parent, _) in built.items():
            started = time.perf_counter()
            assert table.fork(parent, rows) == rows
            forks[layout].append((time.perf_counter() - started) * 1000)
            started = time.perf_counter()
            for n in range(300):
                table.db.execute("BEGIN IMMEDIATE")
                table.insert([table.row(parent, rows + rep * 300 + n, now)])
                table.db.execute("COMMIT")
            appends[layout].append((time.perf_counter() - started) * 1000 / 300)
    figures = {}
    for layout, (table, _, bytes_per_row) in built.items():
        table.db.close()
        figures[layout] = {"fork_ms": statistics.median(forks[layout]), "append_ms": statistics.median(appends[layout]),
                           "bytes_per_row": bytes_per_row, "prune": prune(layout, work, rows)}
    return figures


def prune(layout: str, work: Path, rows: int) -> float:
    """File pages after deleting every other one of 100 conversations written round-robin (10
    rows at a time) and vacuuming, against a fresh file holding only the 50 that stay."""
    now = common.now_text()
    per = max(rows // 100, 10)
    table = Table(work / f"{layout}-prune.sqlite3", layout)
    fresh = Table(work / f"{layout}-fresh.sqlite3", layout)
    cids = [table.conversation() for _ in range(100)]
    for cid in cids:
        fresh.numbers[cid] = table.numbers[cid]
    for start in range(0, per, 10):
        table.db.execute("BEGIN")
        table.insert([table.row(cid, p, now) for cid in cids for p in range(start, min(start + 10, per))])
        table.db.execute("COMMIT")
    table.db.execute("BEGIN")
    for cid in cids[::2]:
        table.db.execute("DELETE FROM m WHERE conversation_id = ?", (cid,))
    table.db.execute("COMMIT")
    table.db.executescript("PRAGMA incremental_vacuum; PRAGMA wal_checkpoint(TRUNCATE);")
    for start in range(0, per, 10):
        fresh.db.execute("BEGIN")
        fresh.insert([fresh.row(cid, p, now) for cid in cids[1::2] for p in range(start, min(start + 10, per))])
        fresh.db.execute("COMMIT")
    ratio = table.pages() / fresh.pages()
    table.db.close()
    fresh.db.close()
    return ratio


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=50_000)
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args(argv)
    # The rows are encoded as the store encodes them (conversations.message_schema reads its
    # limits from the settings); no database of memoryui's is opened.
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memoryui.settings")
    import django

    django.setup()
    with tempfile.TemporaryDirectory(prefix="memoryui-layout-", dir=Path(__file__).resolve().parent.parent) as work:
        figures = measure(Path(work), args.rows, args.reps)
    base, peer = figures["without_rowid"], figures["raw_peer"]
    print(f"{'layout':16s} {'fork ms':>9s} {'append ms':>10s} {'B/row':>7s} {'prune/fresh':>12s}"
          "  (ratios to without_rowid)")
    for layout, f in figures.items():
        print(f"{layout:16s} {f['fork_ms']:9.1f} {f['append_ms']:10.3f} {f['bytes_per_row']:7.0f} {f['prune']:12.2f}"
              f"  fork {f['fork_ms'] / base['fork_ms']:.2f}, append {f['append_ms'] / base['append_ms']:.2f}, "
              f"bytes {f['bytes_per_row'] / base['bytes_per_row']:.2f}; "
              f"fork / raw_peer {f['fork_ms'] / peer['fork_ms']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
