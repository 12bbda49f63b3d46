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
  answers which needles occur in each file (GNU grep finds all in one pass). For
  the SQLite main file and WAL it also tells, per needle, whether a match lies in a
  row that exists ("live": data that stays holds the same text) or in the unused
  space of a page ("pages": the pages holding such stale bytes, so the caller can
  clean exactly those; a WAL frame carries its page number).
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
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time

# Files smaller than this are searched in this process, larger ones by grep.
GREP_MIN_BYTES = 4 * 1024 * 1024
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
    path = spec["path"]
    try:
        size = os.stat(path).st_size
        # grep -F looks for all needles in one pass (Aho-Corasick), tens of times faster
        # than one search per needle; it reads patterns a line each, so a needle holding
        # a newline (or NUL, which -z splits on) is searched here instead.
        # A small file (most of a database's relation files, a few pages each) is searched here:
        # starting grep for each cost more than the search.
        by_grep = [i for i, n in enumerate(needles) if n and b"\n" not in n and b"\0" not in n] \
            if size >= GREP_MIN_BYTES else []
        offsets = {} if by_grep and shutil.which("grep") else None
        for group in _apart(needles, by_grep) if offsets is not None else ():
            found = _grep(path, needles, group)
            if found is None:
                offsets = None
                break
            offsets.update(found)
        if offsets is None:
            offsets, by_grep = {}, []
        rest = [i for i in range(len(needles)) if i not in set(by_grep)]
        if rest:
            offsets.update(_search(path, needles, rest))
    except FileNotFoundError:
        # PostgreSQL unlinks a rewritten relation's old file at checkpoint; a WAL
        # truncated away is gone too: what is not there holds nothing.
        return {"name": spec["name"], "bytes": 0, "found": [], "pages": {}, "error": None}
    except OSError as exc:
        return {"name": spec["name"], "bytes": 0, "found": [], "pages": {}, "error": exc.strerror or str(exc)}
    found = sorted(i for i, at in offsets.items() if at)
    stale: dict[int, set[int]] = {}
    live: set[int] = set()
    if spec.get("kind") in ("sqlite-main", "sqlite-wal") and page_size:
        stale, live = _classify(path, spec["kind"], needles, offsets, page_size)
    else:
        live = set(found)  # nothing to tell them apart by: the caller checks the data
    return {"name": spec["name"], "bytes": size, "found": found, "live": sorted(live),
            "pages": {str(i): sorted(p) for i, p in stale.items() if p}, "error": None}


def _classify(path, kind, needles, offsets, page_size) -> tuple[dict[int, set[int]], set[int]]:
    """Where each match of a SQLite file lies: in a row that exists (live: the text is
    still stored by data that stays) or in a page's unused space (stale: the old bytes
    of a row that moved or went, to be zeroed). Pages are read from the same file; a
    WAL frame is its page as of that frame."""
    stale: dict[int, set[int]] = {}
    live: set[int] = set()
    cache: dict[int, tuple[int, bytes]] = {}
    frame = WAL_FRAME_HEADER + page_size
    with open(path, "rb") as f:
        for i, ats in offsets.items():
            for at in ats:
                if kind == "sqlite-main":
                    start = at // page_size * page_size
                    key = start
                else:
                    if at < WAL_HEADER:
                        continue
                    key = WAL_HEADER + (at - WAL_HEADER) // frame * frame
                    start = key + WAL_FRAME_HEADER
                if key not in cache:
                    f.seek(key)
                    raw = f.read(start - key + page_size)
                    pgno = (key // page_size + 1) if kind == "sqlite-main" else \
                        (struct.unpack(">I", raw[:4])[0] if len(raw) >= 4 else 0)
                    cache[key] = (pgno, raw[start - key:])
                pgno, page = cache[key]
                lo, hi = at - start, at - start + len(needles[i])
                if lo < 0 or not pgno:
                    continue  # inside a WAL frame header: no text lives there
                ranges = unused_ranges(pgno, page)
                if ranges and any(lo < r_hi and hi > r_lo for r_lo, r_hi in ranges):
                    stale.setdefault(i, set()).add(pgno)
                else:
                    live.add(i)
    return stale, live


def _apart(needles: list[bytes], indexes: list[int]) -> list[list[int]]:
    """Groups in which no needle lies inside another: grep -o reports one match per
    place, so 'cust:7' inside a found 'cust:77 …' would go unreported."""
    groups: list[list[int]] = []
    for i in sorted(indexes, key=lambda i: -len(needles[i])):
        for group in groups:
            if not any(needles[i] in needles[j] or needles[j] in needles[i] for j in group):
                group.append(i)
                break
        else:
            groups.append([i])
    return groups


def _grep(path: str, needles: list[bytes], indexes: list[int]) -> dict[int, list[int]] | None:
    """Byte offsets of each needle, found by GNU grep in one pass; None when grep fails."""
    index_of = {needles[i]: i for i in indexes}
    with tempfile.NamedTemporaryFile("wb", suffix=".needles") as patterns:
        patterns.write(b"".join(needles[i] + b"\n" for i in indexes))
        patterns.flush()
        # -a: binary as text; -z: records end at NUL (database pages are full of them,
        # so no record is long); -o -b: each match with its byte offset.
        proc = subprocess.Popen(["grep", "-a", "-z", "-o", "-b", "-F", "-f", patterns.name, path],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ, "LC_ALL": "C"})
        offsets: dict[int, list[int]] = {i: [] for i in indexes}
        buffer = b""
        while chunk := proc.stdout.read(1 << 20):
            buffer += chunk
            *records, buffer = buffer.split(b"\0")
            for record in records:
                at, _, match = record.partition(b":")
                i = index_of.get(match)
                if i is not None and len(offsets[i]) < MAX_OFFSETS_PER_NEEDLE:
                    offsets[i].append(int(at))
        error = proc.stderr.read()
        code = proc.wait()
    if code == 2:
        if not os.path.exists(path):
            raise FileNotFoundError(path)
        if error:
            return None
    return offsets


def _search(path: str, needles: list[bytes], indexes: list[int]) -> dict[int, list[int]]:
    """Byte offsets of each needle, one search per needle over chunks of the file."""
    overlap = max((len(needles[i]) for i in indexes), default=1) - 1
    offsets: dict[int, list[int]] = {i: [] for i in indexes}
    size = 0
    tail = b""
    with open(path, "rb") as f:
        while True:
            chunk = f.read(READ_CHUNK)
            if not chunk:
                break
            window = tail + chunk
            base = size - len(tail)
            for i in indexes:
                needle, found, start = needles[i], offsets[i], 0
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
    return offsets


def unused_ranges(pgno: int, page: bytes) -> list[tuple[int, int]] | None:
    """The parts of a b-tree page that hold no data: the gap between the cell pointers
    and the cells, and the bodies of freeblocks (after their 4-byte headers). None for
    a page that is not a b-tree page (overflow, freelist, pointer map)."""
    h = 100 if pgno == 1 else 0
    header_size = BTREE_PAGE_TYPES.get(page[h]) if len(page) > h else None
    if header_size is None:
        return None
    cells = struct.unpack(">H", page[h + 3:h + 5])[0]
    content = struct.unpack(">H", page[h + 5:h + 7])[0] or 65536
    gap_start = h + header_size + 2 * cells
    ranges = []
    if gap_start < content <= len(page):
        ranges.append((gap_start, content))
    block = struct.unpack(">H", page[h + 1:h + 3])[0]
    seen = set()
    while block and block not in seen and block + 4 <= len(page):
        seen.add(block)
        following, size = struct.unpack(">HH", page[block:block + 4])
        ranges.append((block + 4, min(block + size, len(page))))
        block = following
    return ranges


def cleaned_page(pgno: int, data: bytes) -> bytes | None:
    """The page with its unused space zeroed, or None when there is nothing to zero
    (or it is not a b-tree page: overflow, freelist and pointer-map pages are left
    to secure_delete, which zeroes them when they are freed)."""
    ranges = unused_ranges(pgno, data)
    if not ranges:
        return None
    page = bytearray(data)
    changed = False
    for lo, hi in ranges:
        if any(page[lo:hi]):
            page[lo:hi] = bytes(hi - lo)
            changed = True
    return bytes(page) if changed else None


class PageKinds:
    """Which pages of the database are b-tree pages, read from SQLite's pointer map.

    The first byte of a page does not tell: a pointer-map page starts with an entry
    type (1 to 5), an overflow or freelist page with a page number, and those bytes
    can read as a b-tree page type (2, 5, 10, 13). "Cleaning" such a page as if it
    were a b-tree page destroys it (a pointer map zeroed is a corrupt database). In
    an auto_vacuum database the pointer map records, for every page after the first,
    whether it is a b-tree page (a root or not), an overflow page or a free page; that
    record is what decides. Read inside the write transaction that changes the pages."""

    PENDING_BYTE = 0x40000000
    ROOT, BTREE = 1, 5

    def __init__(self, db, page_size: int, header: bytes):
        self.db = db
        self.usable = page_size - header[20]
        self.per_map = self.usable // 5 + 1
        self.pending = self.PENDING_BYTE // page_size + 1
        self.maps: dict[int, bytes] = {}

    def map_page(self, pgno: int) -> int:
        at = (pgno - 2) // self.per_map * self.per_map + 2
        return at + 1 if at == self.pending else at

    def is_btree(self, pgno: int) -> bool:
        if pgno == 1:
            return True  # the schema table's root, always
        if pgno < 2 or pgno == self.pending:
            return False
        at = self.map_page(pgno)
        if at == pgno:
            return False  # a pointer-map page itself
        if at not in self.maps:
            row = self.db.execute("SELECT data FROM sqlite_dbpage WHERE pgno = ?", (at,)).fetchone()
            self.maps[at] = row[0] if row else b""
        entry = 5 * (pgno - at - 1)
        data = self.maps[at]
        return entry + 5 <= len(data) and data[entry] in (self.ROOT, self.BTREE)


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
        page_size = db.execute("PRAGMA page_size").fetchone()[0]
        for start in range(0, len(pages), PAGES_PER_TRANSACTION):
            # Each transaction is short, and followed by a pause as long, so that a writer
            # sleeping in SQLite's busy handler gets its turn.
            started = time.monotonic()
            db.execute("BEGIN IMMEDIATE")
            try:
                header = db.execute("SELECT data FROM sqlite_dbpage WHERE pgno = 1").fetchone()[0]
                if not struct.unpack(">I", header[52:56])[0]:
                    # No pointer map (not an auto_vacuum file): page kinds cannot be told
                    # apart safely, so nothing is touched.
                    db.execute("ROLLBACK")
                    return {"zeroed": zeroed, "error": "the database has no pointer map (auto_vacuum is off): "
                                                       "unused space was not cleaned"}
                kinds = PageKinds(db, page_size, header)
                for pgno in pages[start:start + PAGES_PER_TRANSACTION]:
                    if not kinds.is_btree(pgno):
                        continue  # overflow, free and pointer-map pages: secure_delete zeroes freed ones
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
            time.sleep(min(1.0, max(0.1, time.monotonic() - started)))
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
