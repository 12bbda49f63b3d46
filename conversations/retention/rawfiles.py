"""The database files byte by byte, in a process of their own.

Run as `python -m conversations.retention.rawfiles`, a JSON request on stdin and
a JSON answer on stdout. It imports nothing of Django, and the server never runs
this code itself, for one reason: on POSIX, closing ANY descriptor of a file drops
every lock the process holds on that file. A server worker that opened and closed
the live SQLite file (to search its bytes) would silently release its own
database locks, and the other workers would checkpoint and rebuild the WAL under
it: acknowledged writes lost, the file corrupted. A separate process has no
locks to lose.

Two requests:

- {"op": "scan", "files": [{"path", "name", "kind"}], "needles": [hex…], "page_size": N}
  reads each file in chunks and answers which needles occur in it. For the SQLite
  main file and WAL it also names, per needle, the database pages that hold a
  match (WAL frames carry their page number), so the caller can clean exactly those.
- {"op": "zero", "database": path, "pages": [pgno…], "busy_ms": N}
  opens the database through SQLite (the sqlean.py build, which has the
  sqlite_dbpage table) and, in short write transactions, overwrites with zeros
  the parts of those pages that hold no data: the gap between the cell pointers
  and the cells, and the bodies of freeblocks. SQLite's secure_delete zeroes a
  deleted cell, but when a b-tree page is rebalanced the cells that move away
  leave their old bytes in that gap; they outlive the row. Nothing a reader can
  see changes, and the write goes through SQLite's own WAL and locks.
"""

import json
import struct
import sys

READ_CHUNK = 8 * 1024 * 1024
MAX_OFFSETS_PER_NEEDLE = 10_000
WAL_HEADER = 32
WAL_FRAME_HEADER = 24
PAGES_PER_TRANSACTION = 64
# b-tree page types: interior index, interior table, leaf index, leaf table.
BTREE_PAGE_TYPES = {2: 12, 5: 12, 10: 8, 13: 8}


def scan(files: list[dict], needles: list[bytes], page_size: int) -> list[dict]:
    results = []
    for spec in files:
        results.append(_scan_file(spec, needles, page_size))
    return results


def _scan_file(spec: dict, needles: list[bytes], page_size: int) -> dict:
    overlap = max((len(n) for n in needles), default=1) - 1
    offsets: dict[int, list[int]] = {}
    size = 0
    tail = b""
    try:
        with open(spec["path"], "rb") as f:
            while True:
                chunk = f.read(READ_CHUNK)
                if not chunk:
                    break
                window = tail + chunk
                base = size - len(tail)
                for i, needle in enumerate(needles):
                    found = offsets.setdefault(i, [])
                    start = 0
                    while len(found) < MAX_OFFSETS_PER_NEEDLE:
                        at = window.find(needle, start)
                        if at < 0:
                            break
                        # A match wholly inside the overlap was already counted with the previous chunk.
                        if at + len(needle) > len(tail):
                            found.append(base + at)
                        start = at + 1
                size += len(chunk)
                tail = window[-overlap:] if overlap else b""
    except FileNotFoundError:
        # PostgreSQL unlinks a rewritten relation's old file at checkpoint; a WAL
        # truncated away is gone too: what is not there holds nothing.
        return {"name": spec["name"], "bytes": size, "found": [], "pages": {}, "error": None}
    except OSError as exc:
        return {"name": spec["name"], "bytes": size, "found": [], "pages": {}, "error": exc.strerror or str(exc)}
    found = sorted(i for i, at in offsets.items() if at)
    pages: dict[int, list[int]] = {}
    if spec.get("kind") == "sqlite-main" and page_size:
        pages = {i: sorted({at // page_size + 1 for at in offsets[i]}) for i in found}
    elif spec.get("kind") == "sqlite-wal" and page_size:
        pages = {i: sorted(_wal_pages(spec["path"], offsets[i], page_size)) for i in found}
    return {"name": spec["name"], "bytes": size, "found": found,
            "pages": {str(i): p for i, p in pages.items()}, "error": None}


def _wal_pages(path: str, offsets: list[int], page_size: int) -> set[int]:
    """The database page each matching WAL frame holds (a frame = 24-byte header + page)."""
    frame = WAL_FRAME_HEADER + page_size
    pages = set()
    try:
        with open(path, "rb") as f:
            for at in offsets:
                if at < WAL_HEADER:
                    continue
                f.seek(WAL_HEADER + (at - WAL_HEADER) // frame * frame)
                header = f.read(4)
                if len(header) == 4:
                    pages.add(struct.unpack(">I", header)[0])
    except OSError:
        pass
    return {p for p in pages if p > 0}


def cleaned_page(pgno: int, data: bytes) -> bytes | None:
    """The page with its unused space zeroed, or None when there is nothing to zero
    (or it is not a b-tree page: overflow, freelist and pointer-map pages are left
    to secure_delete, which zeroes them when they are freed)."""
    page = bytearray(data)
    h = 100 if pgno == 1 else 0
    header_size = BTREE_PAGE_TYPES.get(page[h]) if len(page) > h else None
    if header_size is None:
        return None
    cells = struct.unpack(">H", page[h + 3:h + 5])[0]
    content = struct.unpack(">H", page[h + 5:h + 7])[0] or 65536
    gap_start = h + header_size + 2 * cells
    changed = False
    if gap_start < content <= len(page) and any(page[gap_start:content]):
        page[gap_start:content] = bytes(content - gap_start)
        changed = True
    block = struct.unpack(">H", page[h + 1:h + 3])[0]
    seen = set()
    while block and block not in seen and block + 4 <= len(page):
        seen.add(block)
        following, size = struct.unpack(">HH", page[block:block + 4])
        end = min(block + size, len(page))
        if any(page[block + 4:end]):
            page[block + 4:end] = bytes(end - block - 4)
            changed = True
        block = following
    return bytes(page) if changed else None


def zero(database: str, pages: list[int], busy_ms: int) -> dict:
    try:
        import sqlean as sqlite
    except ImportError:
        return {"zeroed": 0, "error": "cleaning pages needs the sqlean.py package (SQLite with sqlite_dbpage)"}
    db = sqlite.connect(database, isolation_level=None, timeout=busy_ms / 1000)
    zeroed = 0
    try:
        db.execute(f"PRAGMA busy_timeout = {int(busy_ms)}")
        db.execute("PRAGMA secure_delete = ON")
        for start in range(0, len(pages), PAGES_PER_TRANSACTION):
            # Each transaction is short: writers wait for it at most a few milliseconds.
            db.execute("BEGIN IMMEDIATE")
            try:
                for pgno in pages[start:start + PAGES_PER_TRANSACTION]:
                    row = db.execute("SELECT data FROM sqlite_dbpage WHERE pgno = ?", (pgno,)).fetchone()
                    if row is None:
                        continue
                    cleaned = cleaned_page(pgno, row[0])
                    if cleaned is not None:
                        db.execute("UPDATE sqlite_dbpage SET data = ? WHERE pgno = ?", (cleaned, pgno))
                        zeroed += 1
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
    except Exception as exc:
        return {"zeroed": zeroed, "error": f"{type(exc).__name__}: {exc}"}
    finally:
        db.close()
    return {"zeroed": zeroed, "error": None}


def integrity_check(database: str) -> dict:
    """PRAGMA integrity_check through the sqlean build. Debian's SQLite 3.40 reports false
    "NULL value in …" errors for WITHOUT ROWID tables whose key columns are not declared
    first (the message table); later versions check them correctly."""
    import sqlean as sqlite

    db = sqlite.connect(database, isolation_level=None, timeout=30)
    try:
        return {"result": [row[0] for row in db.execute("PRAGMA integrity_check").fetchall()]}
    finally:
        db.close()


def main() -> None:
    request = json.load(sys.stdin)
    if request["op"] == "scan":
        answer = {"files": scan(request["files"], [bytes.fromhex(n) for n in request["needles"]],
                                int(request.get("page_size") or 0))}
    elif request["op"] == "zero":
        answer = zero(request["database"], [int(p) for p in request["pages"]], int(request.get("busy_ms", 200)))
    elif request["op"] == "integrity_check":
        answer = integrity_check(request["database"])
    else:
        answer = {"error": f"unknown op {request['op']!r}"}
    json.dump(answer, sys.stdout)


if __name__ == "__main__":
    main()
