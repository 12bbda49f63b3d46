"""Erasure on disk: the subject in any spelling, stale copies of rows in pages, and
never a database file opened by the server process itself."""

import builtins
import io
import json
import subprocess
import sys
import unicodedata

import pytest
from django.db import connection

from conversations import store
from conversations.models import Conversation, Message
from conversations.retention import erasure, rawfiles
from tests.retention_support import ROOT, conversation, raw_bytes_of_database, sqlite_integrity_check

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_subject_is_matched_in_normal_form_and_case_folded():
    facts = pytest.importorskip("conversations.facts.store")
    composed = "Zoë Quinton-Ärmel"
    decomposed = unicodedata.normalize("NFD", composed)
    a = conversation(title="a", subject=composed, messages=1)
    b = conversation(title="b", subject=decomposed.upper(), messages=1)
    c = conversation(title="c", subject="  zoë quinton-ärmel ", messages=1)
    kept = conversation(title="d", subject="Zoë Quinton", messages=1)
    fact = facts.propose_fact(subject=decomposed, text="Zoë likes the blue plan best", importance=3,
                              created_by="key:agent")
    facts.record_access(actor="user:rev", subject="ZOË QUINTON-ÄRMEL")

    preview = erasure.preview_deletion(subject="zoë quinton-ärmel")
    assert {r.id for r in preview.conversations} == {str(a.pk), str(b.pk), str(c.pk)}
    assert preview.facts["facts"] == 1 and preview.facts["access_log"] == 1

    receipt = erasure.execute_deletion(subject="ZOË Quinton-Ärmel", actor="user:boss")
    assert receipt.counts["conversations"] == 3 and receipt.counts["facts"] == 1
    assert set(Conversation.objects.values_list("pk", flat=True)) == {kept.pk}
    from conversations.facts.models import Fact, FactAccess
    assert not Fact.objects.filter(pk=fact.pk).exists() and not FactAccess.objects.exists()
    # Shown as stored: the kept conversation's subject is untouched.
    assert Conversation.objects.get(pk=kept.pk).subject == "Zoë Quinton"


def _plant_stale_copy(needle: bytes) -> int:
    """Write `needle` into the unused gap of a live page of the message table, the way a
    b-tree rebalance leaves a moved row's old bytes behind. Done through SQLite in
    another process; returns the page number."""
    code = f"""
import json, struct, sys, sqlean
db = sqlean.connect({str(connection.settings_dict['NAME'])!r}, isolation_level=None, timeout=30)
needle = bytes.fromhex(sys.argv[1])
db.execute("BEGIN IMMEDIATE")
for (pgno,) in db.execute("SELECT pageno FROM dbstat "
                          "WHERE name = 'conversations_message' AND pagetype = 'leaf'").fetchall():
    page = bytearray(db.execute("SELECT data FROM sqlite_dbpage WHERE pgno = ?", (pgno,)).fetchone()[0])
    h = 100 if pgno == 1 else 0
    cells = struct.unpack(">H", page[h + 3:h + 5])[0]
    content = struct.unpack(">H", page[h + 5:h + 7])[0] or 65536
    gap = h + 8 + 2 * cells
    if content - gap > len(needle) + 8:
        page[gap + 4:gap + 4 + len(needle)] = needle
        db.execute("UPDATE sqlite_dbpage SET data = ? WHERE pgno = ?", (bytes(page), pgno))
        db.execute("COMMIT")
        print(pgno)
        break
else:
    db.execute("ROLLBACK")
print(db.execute("PRAGMA integrity_check").fetchone()[0])
"""
    done = subprocess.run([sys.executable, "-c", code, needle.hex()], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    pgno, check = done.stdout.split()
    assert check == "ok"
    return int(pgno)


def test_a_stale_copy_of_a_deleted_row_in_a_page_is_found_and_cleaned():
    victim = conversation(title="victim", subject="cust:stale", messages=0)
    secret = "the vault code is 7781-stale-copy-Ω"
    store.append_message(conversation_id=victim.pk, message={"kind": "user", "content": secret})
    kept = conversation(title="kept", subject="cust:keep", messages=60, text="row {i} stays put " + "x" * 300)
    if connection.vendor != "sqlite":
        # PostgreSQL leaves a deleted row's bytes in its page until the table is
        # rewritten; erasure rewrites the tables, so the same promise holds.
        assert secret.encode() in raw_bytes_of_database()
        receipt = erasure.execute_deletion(subject="cust:stale", actor="user:boss")
        assert receipt.verification["status"] == "verified"
        assert secret.encode() not in raw_bytes_of_database()
        assert Message.objects.of(kept.pk).count() == 60
        return
    # A copy of the victim's row left in a page that holds only the kept conversation's rows.
    _plant_stale_copy(victim.pk.hex.encode() + b"\x00" + secret.encode())
    assert secret.encode() in raw_bytes_of_database()

    receipt = erasure.execute_deletion(subject="cust:stale", actor="user:boss")

    v = receipt.verification
    assert v["status"] == "verified", v
    assert v["conversation_ids_checked"] == 1 and v["verify_passes"] >= 2
    assert any("zeroed unused space" in note for note in v["notes"])
    data = raw_bytes_of_database()
    assert secret.encode() not in data and victim.pk.hex.encode() not in data
    assert Message.objects.of(kept.pk).count() == 60
    assert sqlite_integrity_check() == ["ok"]


def test_cleaning_a_page_zeroes_only_its_unused_space():
    page = bytearray(4096)
    page[0] = 13  # a table leaf
    page[3:5] = (2).to_bytes(2, "big")  # two cells
    page[5:7] = (4000).to_bytes(2, "big")  # content starts at 4000
    page[8:12] = bytes([0x0F, 0xA0, 0x0F, 0xD0])  # pointers to 4000 and 4048
    page[4000:4096] = b"L" * 96  # the live cells
    page[100:140] = b"stale copy of a moved row, never a cell!"
    cleaned = rawfiles.cleaned_page(2, bytes(page))
    assert cleaned is not None and b"stale" not in cleaned
    assert cleaned[:12] == bytes(page[:12]) and cleaned[4000:] == bytes(page[4000:])
    assert rawfiles.cleaned_page(2, cleaned) is None  # nothing left to do
    assert rawfiles.cleaned_page(3, bytes(4096)) is None  # not a b-tree page: left alone


ZERO_EVERY_PAGE = """
import hashlib, json, random, sqlean, sys
path = sys.argv[1]
db = sqlean.connect(path, isolation_level=None)
db.executescript("PRAGMA auto_vacuum=INCREMENTAL; PRAGMA journal_mode=WAL; PRAGMA secure_delete=ON;"
                 "CREATE TABLE m(id INTEGER PRIMARY KEY, t TEXT); CREATE INDEX mi ON m(t);"
                 "CREATE TABLE w(a INT, b INT, t TEXT, PRIMARY KEY(a, b)) WITHOUT ROWID;")
random.seed(7)
db.execute("BEGIN")
for i in range(15000):
    db.execute("INSERT INTO m(t) VALUES (?)", ("x" * random.randint(10, 900) + f" cust:{i % 50}",))
    db.execute("INSERT INTO w VALUES (?, ?, ?)", (i % 97, i, "y" * random.randint(10, 300)))
db.execute("COMMIT")
db.execute("DELETE FROM m WHERE id % 3 = 0")
db.execute("DELETE FROM w WHERE b % 5 = 0")
pages = db.execute("PRAGMA page_count").fetchone()[0]
first = [db.execute("SELECT data FROM sqlite_dbpage WHERE pgno = ?", (p,)).fetchone()[0][0]
         for p in range(2, pages + 1)]
dump = hashlib.sha256(repr([db.execute("SELECT * FROM m ORDER BY id").fetchall(),
                            db.execute("SELECT * FROM w ORDER BY a, b").fetchall()]).encode()).hexdigest()
print(json.dumps({"pages": pages, "first_bytes": first, "dump": dump}))
"""


def test_cleaning_every_page_of_an_auto_vacuum_file_leaves_it_intact(tmp_path):
    """Pointer-map pages start with an entry type (1 to 5) that reads like a b-tree page
    type; cleaning one as a b-tree page corrupts the database (found by workload 13:
    "database disk image is malformed" at the next incremental vacuum)."""
    path = str(tmp_path / "pages.sqlite3")
    done = subprocess.run([sys.executable, "-c", ZERO_EVERY_PAGE, path], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    built = json.loads(done.stdout)
    per_map = 4096 // 5 + 1
    maps = range(2, built["pages"] + 1, per_map)
    assert len(maps) >= 3 and any(built["first_bytes"][m - 2] in (2, 5) for m in maps)

    def helper(request):
        done = subprocess.run([sys.executable, "-m", "conversations.retention.rawfiles"], input=json.dumps(request),
                              capture_output=True, text=True, cwd=ROOT, check=True)
        return json.loads(done.stdout)

    answer = helper({"op": "zero", "database": path, "pages": list(range(1, built["pages"] + 1)), "busy_ms": 200})
    assert answer["error"] is None and answer["zeroed"] > 100
    assert helper({"op": "integrity_check", "database": path})["result"] == ["ok"]
    check = ("import hashlib, sqlean, sys; db = sqlean.connect(sys.argv[1], isolation_level=None); "
             "db.execute('PRAGMA incremental_vacuum'); "
             "print(db.execute('PRAGMA integrity_check').fetchone()[0]); print(hashlib.sha256(repr(["
             "db.execute('SELECT * FROM m ORDER BY id').fetchall(), db.execute('SELECT * FROM w ORDER BY a, b')"
             ".fetchall()]).encode()).hexdigest())")
    after = subprocess.run([sys.executable, "-c", check, path], capture_output=True, text=True, check=True).stdout
    verdict, _, dump = after.partition("\n")
    assert verdict == "ok"
    assert dump.rstrip("\n") == built["dump"]


def test_a_file_without_a_pointer_map_is_left_untouched(tmp_path):
    path = str(tmp_path / "plain.sqlite3")
    subprocess.run([sys.executable, "-c", "import sqlean, sys; db = sqlean.connect(sys.argv[1]); "
                    "db.execute('CREATE TABLE t(x)'); db.execute('INSERT INTO t VALUES (1)'); db.commit()", path],
                   check=True)
    done = subprocess.run([sys.executable, "-m", "conversations.retention.rawfiles"], capture_output=True, text=True,
                          input=json.dumps({"op": "zero", "database": path, "pages": [1, 2], "busy_ms": 200}),
                          cwd=ROOT, check=True)
    answer = json.loads(done.stdout)
    assert answer["zeroed"] == 0 and "pointer map" in answer["error"]


def test_the_server_process_never_opens_a_database_file(monkeypatch):
    """Closing a descriptor of the live SQLite file drops every lock this process holds."""
    conversation(title="x", subject="cust:locks", messages=3, text="a sentence about locks number {i}")
    name = str(connection.settings_dict["NAME"])
    real_open, real_io_open = builtins.open, io.open

    def guarded(opener):
        def open_(file, *args, **kwargs):
            if str(file).startswith(name) or "base/" in str(file):
                raise AssertionError(f"the server process opened {file}")
            return opener(file, *args, **kwargs)
        return open_

    monkeypatch.setattr(builtins, "open", guarded(real_open))
    monkeypatch.setattr(io, "open", guarded(real_io_open))
    receipt = erasure.execute_deletion(subject="cust:locks", actor="user:boss")
    assert receipt.verification["status"] == "verified"
    assert receipt.verification["bytes_searched"] > 0


def test_the_file_helper_reports_pages_for_matches_in_the_main_file_and_the_wal(tmp_path):
    main = tmp_path / "db"
    main.write_bytes(b"\0" * 4096 + b"x" * 100 + b"needle-one" + b"\0" * (4096 - 110))
    wal = tmp_path / "db-wal"
    frame = (7).to_bytes(4, "big") + b"\0" * 20 + b"\0" * 50 + b"needle-one" + b"\0" * (4096 - 60)
    wal.write_bytes(b"\0" * 32 + frame)
    request = {"op": "scan", "page_size": 4096, "needles": [b"needle-one".hex(), b"absent".hex()],
               "files": [{"path": str(main), "name": "db", "kind": "sqlite-main"},
                         {"path": str(wal), "name": "db-wal", "kind": "sqlite-wal"},
                         {"path": str(tmp_path / "gone"), "name": "gone", "kind": "other"}]}
    done = subprocess.run([sys.executable, "-m", "conversations.retention.rawfiles"], input=json.dumps(request),
                          capture_output=True, text=True, cwd=ROOT)
    files = json.loads(done.stdout)["files"]
    # Pages of zeros are not b-tree pages: a match there counts as stored data (live).
    assert files[0]["found"] == [0] and files[0]["live"] == [0] and files[0]["pages"] == {}
    assert files[1]["found"] == [0] and files[1]["live"] == [0]
    assert files[2] == {"name": "gone", "bytes": 0, "found": [], "pages": {}, "error": None}


def test_the_file_helper_tells_a_match_in_a_row_from_one_in_unused_space(tmp_path):
    page = bytearray(4096)
    page[0] = 10  # an index-leaf page (the message table is WITHOUT ROWID)
    page[3:5] = (1).to_bytes(2, "big")
    page[5:7] = (4000).to_bytes(2, "big")
    page[8:10] = (4000).to_bytes(2, "big")
    page[4000:4040] = b"kept row: shared words live here........"
    page[200:240] = b"gone row: shared words live here........"
    main = tmp_path / "db"
    main.write_bytes(bytes(4096) + bytes(page))
    request = {"op": "scan", "page_size": 4096, "needles": [b"kept row".hex(), b"gone row".hex(),
                                                             b"shared words".hex()],
               "files": [{"path": str(main), "name": "db", "kind": "sqlite-main"}]}
    done = subprocess.run([sys.executable, "-m", "conversations.retention.rawfiles"], input=json.dumps(request),
                          capture_output=True, text=True, cwd=ROOT)
    result = json.loads(done.stdout)["files"][0]
    assert result["found"] == [0, 1, 2]
    assert result["live"] == [0, 2]  # in the row that exists
    assert result["pages"] == {"1": [2], "2": [2]}  # the stale copy in the gap, on page 2


def test_the_file_helper_finds_needles_inside_other_needles_and_with_newlines(tmp_path):
    data = tmp_path / "db"
    data.write_bytes(b"\0" * 100 + b"xx cust:77 and more text" + b"\0" * 50 + b"cust:7\0" + b"line\nwith newline")
    needles = [b"cust:7", b"cust:77 and more", b"line\nwith", b"absent"]
    found = rawfiles._scan_file({"path": str(data), "name": "db", "kind": "other"}, needles, 64)
    # grep -o reports one match per place: 'cust:7' inside 'cust:77 …' is found by a second pass.
    assert found["found"] == [0, 1, 2] and found["bytes"] == len(data.read_bytes())
