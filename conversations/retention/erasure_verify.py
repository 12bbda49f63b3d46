"""Erasure, steps 5 and 7 (erasure.py): search the raw bytes of every database file for
what was deleted, from another process (rawfiles.py), set aside what data which stays
still holds, clean stale copies and search again. Files outside the database
(`plugins.leftover_files`) are removed and searched the same way.
"""

import json
import subprocess
import sys
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from django.apps import apps
from django.conf import settings
from django.db import connection, models
from django.db.models.functions import Cast

from conversations import partitions, personal, plugins, projects
from conversations.models import Conversation, Message

from . import disk, pgfiles
from . import erasure_scrub as scrub
from .lease import Lease

# Conversation ids searched as stored (SQLite): one needle finds a stale copy of any of its rows.
MAX_ID_NEEDLES = 200
# PostgreSQL compresses values over ~2 KB (TOAST); compressed text is not in the
VERIFY_PASSES = 3
HELPER_TIMEOUT_SECONDS = 3600
# Text needles searched in leftover files are at least this long: a removal on a match of
# "a" would take every waiting upload. A shorter subject still matches through a file's record.
LEFTOVER_NEEDLE_MIN = 6


# --- what data which stays still holds -------------------------------------------

def _text_fields() -> list[tuple[type[models.Model], str]]:
    """(model, field) of every text that data which stays can hold: what each model declares
    as its `text` (conversations/personal.py), so a new column is searched once declared."""
    return [(model, name) for model in personal.searched_models() for name in personal.declared(model).text]


def _text_columns() -> list[tuple[str, str]]:
    """(table, column) of every text that data which stays can hold."""
    return list(dict.fromkeys((model._meta.db_table, model._meta.get_field(name).column)
                              for model, name in _text_fields()))


def _bytes_columns() -> list[tuple[str, str]]:
    """(table, column) of every vector that data which stays can hold."""
    return list(dict.fromkeys((model._meta.db_table, model._meta.get_field(name).column)
                              for model in personal.searched_models() for name in personal.declared(model).vectors))


def _strings_in_live_data(values: list[str | bytes]) -> set[str | bytes]:
    """Which of `values` still occur in rows that exist after the deletion? One pass per column
    (texts in text columns, vectors' bytes in vector columns)."""
    if not values:
        return set()
    found: set[str | bytes] = set()
    vectors = [v for v in values if isinstance(v, bytes)]
    if vectors:
        with connection.cursor() as cursor:
            for table, column in _bytes_columns():
                flags = ", ".join(f"MAX(CASE WHEN position(%s in {column}) > 0 THEN 1 ELSE 0 END)" for _ in vectors)
                cursor.execute(f"SELECT {flags} FROM {table}", vectors)
                row = cursor.fetchone() or ()
                found |= {v for v, flag in zip(vectors, row, strict=False) if flag}
    values = [v for v in values if isinstance(v, str)]
    if not values:
        return found
    find = "instr(CAST({col} AS TEXT), %s) > 0" if connection.vendor == "sqlite" else "strpos({col}::text, %s) > 0"
    with connection.cursor() as cursor:
        for table, column in _text_columns():
            flags = ", ".join(f"MAX(CASE WHEN {find.format(col=column)} THEN 1 ELSE 0 END)" for _ in values)
            cursor.execute(f"SELECT {flags} FROM {table}", values)
            row = cursor.fetchone() or ()
            found |= {v for v, flag in zip(values, row, strict=False) if flag}
    return found


def set_aside_in_view(set_aside: set[str]) -> set[str]:
    """The needles set aside that the current project's own rows still hold.

    A needle is set aside wherever rows that stay hold it, whichever project they are of: the
    files cannot tell one project's copy from another's. A receipt of one project says so only
    of the needles its own rows hold; one only another project's rows hold counts as checked,
    since saying otherwise would tell this project's admin that another project holds that
    text (a guessed name, say). Its own copies are gone all the same: its rows were deleted."""
    if not set_aside or projects.current().every:
        return set(set_aside)
    own = set()
    for value in set_aside:
        for model, name in _text_fields():
            rows = _containing(model, name, value)
            if any(f.name == "conversation" for f in model._meta.concrete_fields):
                rows = rows.filter(conversation__in=Conversation.objects.all())
            if rows.exists():
                own.add(value)
                break
    return own


def _containing(model, name: str, value: str):
    """The model's rows whose column holds `value` as text: a JSON column declared `text` is
    searched in its stored form, as the files hold it (its `contains` means JSON containment)."""
    if isinstance(model._meta.get_field(name), models.CharField | models.TextField):
        return model.objects.filter(**{f"{name}__contains": value})
    return model.objects.annotate(_stored=Cast(name, models.TextField())).filter(_stored__contains=value)


def ids_in_live_data(ids: list[uuid.UUID]) -> set[uuid.UUID]:
    """Which conversation ids are still stored somewhere (a fork's parent_id, a fact's source, …)?"""
    if not ids:
        return set()
    found: set[uuid.UUID] = set()
    for model in apps.get_models():
        for f in model._meta.concrete_fields:
            if isinstance(f, models.UUIDField) or (
                    isinstance(f, models.ForeignKey) and isinstance(f.target_field, models.UUIDField)):
                values = model._base_manager.filter(**{f"{f.attname}__in": ids}).values_list(f.attname, flat=True)
                found |= set(values.distinct())
    return found


def id_needle(cid: uuid.UUID) -> str:
    """How SQLite stores a conversation id (Django's UUIDField: 32 hex characters)."""
    return cid.hex


def id_needles(victim_ids: list[uuid.UUID]) -> list[str]:
    """SQLite: the deleted conversations' ids as stored. A conversation id that some row
    still holds (a fork's parent_id, a fact's source) proves nothing when found."""
    if connection.vendor != "sqlite":
        return []
    still_stored = ids_in_live_data(victim_ids)
    return [id_needle(cid) for cid in victim_ids if cid not in still_stored][:MAX_ID_NEEDLES]


# --- searching the files, from another process -----------------------------------

@dataclass
class FileSearch:
    status: str  # "searched" or "not_possible"
    files: list[dict]
    found: bool | None
    found_in: list[str]
    found_count: int
    problem: str = ""
    # SQLite: per found needle (its index), the database pages that hold it (main file and WAL frames).
    pages: dict[int, set[int]] = field(default_factory=dict)
    # Per found needle, the files it was found in.
    found_needles: dict[int, list[str]] = field(default_factory=dict)
    # SQLite: per found needle, the files where a match lies in a row that exists.
    live: dict[int, list[str]] = field(default_factory=dict)
    passes: int = 0

    def without(self, dropped: set[int]) -> "FileSearch":
        """The same search with some needles no longer counted (set aside as still stored)."""
        kept = {i: files for i, files in self.found_needles.items() if i not in dropped}
        found_in = [name for name in self.found_in if any(name in files for files in kept.values())]
        return FileSearch(status=self.status, files=self.files, found=bool(kept) if self.found is not None else None,
                          found_in=found_in, found_count=len(kept), problem=self.problem,
                          pages={i: p for i, p in self.pages.items() if i in kept}, found_needles=kept,
                          live={i: f for i, f in self.live.items() if i in kept}, passes=self.passes)


def _run_helper(request: dict) -> dict:
    done = subprocess.run(
        [sys.executable, "-m", "conversations.retention.rawfiles"], input=json.dumps(request),
        capture_output=True, text=True, timeout=HELPER_TIMEOUT_SECONDS, cwd=str(settings.BASE_DIR),
    )
    if done.returncode != 0:
        raise RuntimeError(f"the file helper failed: {done.stderr.strip()[-500:]}")
    return json.loads(done.stdout)


def checkpoint_to_disk() -> bool:
    """Push everything the database holds in memory into the files searched; False when the
    database role may not (PostgreSQL without pg_checkpoint: pgfiles.checkpoint)."""
    if connection.vendor != "sqlite":
        return pgfiles.checkpoint()
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA wal_checkpoint(PASSIVE)")
    return True


def _page_size() -> int:
    if connection.vendor != "sqlite":
        return 0
    with connection.cursor() as cursor:
        return int(cursor.execute("PRAGMA page_size").fetchone()[0])


def search_database_files(needles: list[str | bytes], touched: set[str] | None = None,
                          carried: dict[str, dict] | None = None) -> FileSearch:
    """Search the raw bytes of every database file for each needle (str as UTF-8, or bytes);
    on PostgreSQL, of a partitioned table only the partitions in `touched` (the ones the
    deleted rows were in: no other ever held them), all when it is None. The files named in
    `carried` (name → its entry in the last pass's `files`) were searched clean by that pass
    and are not read again; their entries are counted with this search's.

    The files are read by a separate process. Found needles are counted, never
    returned: the result goes into receipts.
    """
    if connection.vendor == "sqlite":
        paths, problem = disk.sqlite_files(), None
        if not paths:
            problem = "the database file was not found"
        main = Path(str(connection.settings_dict["NAME"]))
        specs = [{"path": str(p), "name": p.name,
                  "kind": "sqlite-main" if p == main else "sqlite-wal" if p.name.endswith("-wal") else "other"}
                 for p in paths]
    else:
        paths, problem = disk.postgres_relation_files(skip_relations=_untouched_partitions(touched))
        specs = [{"path": str(p), "name": "/".join(p.parts[-3:]), "kind": "postgres"} for p in paths]
        if not problem:
            # The write-ahead log's segments too: a receipt is verified only for what was searched.
            wal, problem = pgfiles.wal_segment_files()
            specs += wal
    if problem:
        return FileSearch(status="not_possible", files=[], found=None, found_in=[], found_count=0, problem=problem)
    carried = carried or {}
    search = search_files([s for s in specs if s["name"] not in carried], needles, page_size=_page_size(),
                          relation_names=connection.vendor == "postgresql")
    if carried and search.status == "searched":
        search.files = [carried[s["name"]] for s in specs if s["name"] in carried] + search.files
    return search


# A relation `c` of pg_class that holds planner statistics: pg_statistic or its TOAST table.
_STATISTICS_RELATION = ("(c.oid = 'pg_statistic'::regclass OR c.oid = (SELECT reltoastrelid FROM pg_class "
                        "WHERE oid = 'pg_statistic'::regclass))")


def _clean_and_unchanged(search: FileSearch) -> dict[str, dict]:
    """PostgreSQL: the files of `search` (a pass made after a CHECKPOINT) that held no needle and
    that clearing the WAL and sampling the statistics again cannot change: every file but the
    WAL segments and the statistics' own. Their erased rows were rewritten away before the pass,
    and nothing between two passes writes erased text anywhere, so the next pass need not read
    them again (at 4,000,000 messages the second pass read the rewritten partitions again, about
    half of a window's search)."""
    holding = {name.split(" (", 1)[0] for name in search.found_in}
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT pg_relation_filenode(c.oid) FROM pg_class c WHERE {_STATISTICS_RELATION}")
        statistics = {str(node) for (node,) in cursor.fetchall() if node}
    return {f["file"]: f for f in search.files
            if f["file"] not in holding and not is_wal_file(f["file"])
            and disk.relation_file_stem(f["file"]) not in statistics}


def _untouched_partitions(touched: set[str] | None) -> list[str]:
    if touched is None:
        return []
    return [leaf for leaf in partitions.leaves(Message._meta.db_table) if leaf not in touched]


def search_files(specs: list[dict], needles: list[str | bytes], *, page_size: int = 0,
                 relation_names: bool = False) -> FileSearch:
    """Search the raw bytes of these files ({"path", "name", "kind"}) for each needle, by the file helper."""
    encoded = [n.encode("utf-8") if isinstance(n, str) else n for n in needles if n]
    try:
        answer = _run_helper({"op": "scan", "files": specs, "needles": [n.hex() for n in encoded],
                              "page_size": page_size})
    except (RuntimeError, subprocess.SubprocessError, OSError, ValueError) as exc:
        return FileSearch(status="not_possible", files=[], found=None, found_in=[], found_count=0,
                          problem=f"the files could not be searched ({exc})"[:500])
    files, found_in, hits, pages, live = [], [], {}, {}, {}
    for result in answer["files"]:
        if result["error"]:
            return FileSearch(status="not_possible", files=files, found=None, found_in=[], found_count=0,
                              problem=f"{result['name']} could not be read ({result['error']})")
        files.append({"file": result["name"], "bytes": result["bytes"]})
        if result["found"]:
            name = _with_relation_name(result["name"]) if relation_names else result["name"]
            found_in.append(name)
            for i in result["found"]:
                hits.setdefault(i, []).append(name)
            for i, numbers in result["pages"].items():
                pages.setdefault(int(i), set()).update(numbers)
            for i in result.get("live", []):
                live.setdefault(i, []).append(name)
    return FileSearch(status="searched", files=files, found=bool(hits), found_in=found_in, found_count=len(hits),
                      pages=pages, found_needles=hits, live=live)


def erase_leftovers(*, subject: str, conversation_ids: list[uuid.UUID], needles: list[str]) -> dict:
    """Remove the files outside the database (`plugins.leftover_files`) that are about the subject or the
    conversations, by their records or by their bytes, then search what is left for the same needles.

    Returns the receipt's account: which files were removed and why, what was searched after.
    Each kind answers for the current scope only (the request's project, or every project for
    a request filed for all), so another project's files are neither removed, searched nor named."""
    ids = [str(c) for c in conversation_ids]
    needles = [n for n in dict.fromkeys([*needles, *ids]) if len(n.encode("utf-8")) >= LEFTOVER_NEEDLE_MIN]
    removed: list[dict] = []
    problems: list[str] = []
    for kind in plugins.leftover_files.registered():
        why: dict[Path, list[str]] = {}
        for path in kind.about(subject=subject, conversation_ids=ids):
            why.setdefault(Path(path), []).append("record")
        paths = {f"{kind.name}/{Path(p).name}": Path(p) for p in kind.files()}
        if paths and needles:
            search = search_files([{"path": str(p), "name": name, "kind": "other"} for name, p in paths.items()],
                                  needles)
            if search.status != "searched":
                problems.append(search.problem)
            for name in search.found_in:
                why.setdefault(paths[name], []).append("text")
        for path, reasons in sorted(why.items()):
            removed.append({"file": f"{kind.name}/{path.name}", "bytes": kind.remove(path), "why": reasons,
                            "removed": not path.exists()})
    # What is left, searched again: the verdict covers these files too.
    left = {f"{kind.name}/{Path(p).name}": Path(p)
            for kind in plugins.leftover_files.registered() for p in kind.files()}
    after = FileSearch(status="searched", files=[], found=False, found_in=[], found_count=0)
    if left and needles:
        after = search_files([{"path": str(p), "name": name, "kind": "other"} for name, p in left.items()], needles)
    still_about = [f"{kind.name}/{Path(p).name}" for kind in plugins.leftover_files.registered()
                   for p in kind.about(subject=subject, conversation_ids=ids)]
    not_removed = [r["file"] for r in removed if not r["removed"]]
    found_in = list(dict.fromkeys(after.found_in + still_about + not_removed))
    problems += [after.problem] if after.problem else []
    return {
        "status": "not_possible" if problems else "found" if found_in else "verified",
        "folders": [kind.name for kind in plugins.leftover_files.registered()],
        "strings_checked": len(needles),
        "files_searched": len(left),
        "bytes_searched": sum(f["bytes"] for f in after.files),
        "removed": removed,
        "found_in": found_in,
        "problems": [p for p in problems if p],
    }


def _with_relation_name(name: str) -> str:
    """'base/16384/2619' → 'base/16384/2619 (pg_statistic)', so a finding says where."""
    stem = disk.relation_file_stem(name)
    if name.startswith("pg_wal/") or not stem.isascii() or not stem.isdigit():
        return name
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_filenode_relation(0, %s)::text", [int(stem)])
        row = cursor.fetchone()
    return f"{name} ({row[0]})" if row and row[0] else f"{name} (no relation: an old file)"


def searched_by_kind(files: list[dict]) -> dict:
    """How many files of each kind were searched, for the receipt: the SQLite main file,
    -wal and -shm; PostgreSQL's table files, TOAST, indexes, planner statistics, other
    relations (catalogs, sequences, old files) and WAL segments."""
    if connection.vendor == "sqlite":
        kinds = {"main file": 0, "wal": 0, "shm": 0}
        for f in files:
            name = f["file"]
            kinds["wal" if name.endswith("-wal") else "shm" if name.endswith("-shm") else "main file"] += 1
        return kinds
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT pg_relation_filenode(c.oid), c.relkind, {_STATISTICS_RELATION} "
            "FROM pg_class c WHERE pg_relation_filenode(c.oid) IS NOT NULL")
        relations = {int(node): (kind, stats) for node, kind, stats in cursor.fetchall()}
    kinds = {"table files": 0, "toast": 0, "indexes": 0, "statistics": 0, "other relation files": 0,
             "wal segments": 0}
    for f in files:
        name = f["file"]
        if name.startswith("pg_wal/"):
            kinds["wal segments"] += 1
            continue
        stem = disk.relation_file_stem(name)
        kind, stats = relations.get(int(stem), ("", False)) if stem.isdigit() else ("", False)
        key = ("statistics" if stats else "toast" if kind == "t" else "indexes" if kind == "i"
               else "table files" if kind in ("r", "m") else "other relation files")
        kinds[key] += 1
    return kinds


def zero_unused_space(pages: list[int]) -> tuple[int, str | None]:
    """SQLite: overwrite the unused space of these pages with zeros, through SQLite, in another process."""
    try:
        answer = _run_helper({"op": "zero", "database": str(connection.settings_dict["NAME"]),
                              "pages": pages, "busy_ms": scrub.STEP_BUSY_MS * scrub.STEP_ATTEMPTS})
    except (RuntimeError, subprocess.SubprocessError, OSError, ValueError) as exc:
        return 0, f"pages could not be cleaned ({exc})"[:500]
    return int(answer.get("zeroed", 0)), answer.get("error")


def is_wal_file(name: str) -> bool:
    return name.startswith("pg_wal/")


def _clear_wal(found_in: list[str], wal: pgfiles.WalState, lease: Lease | None) -> bool:
    """PostgreSQL: overwrite the recycled WAL segments that hold a needle by switching
    segments up to and past them (within WAL_FLUSH_MAX_BYTES), then switch and checkpoint
    so the older segments are recycled too (the next pass finds them ahead and goes past
    them). False when nothing could be done (every such segment is kept, or too far)."""
    segments = [name.rsplit("/", 1)[-1] for name in found_in if is_wal_file(name)]
    with connection.cursor() as cursor:
        current = pgfiles._current_segment(cursor)
        size = pgfiles.segment_bytes(cursor)

    def number(segment: str) -> int:
        return pgfiles.segment_number(segment, size)

    ahead = [s for s in segments if number(s) > number(current)]
    reachable = [s for s in ahead if (number(s) - number(current)) * size <= pgfiles.WAL_FLUSH_MAX_BYTES]
    if reachable:
        wal.switches += pgfiles.advance_past(max(reachable, key=number), lease)
    behind = len(segments) > len(ahead)
    if behind:
        pgfiles.switch_and_checkpoint()
        wal.switches += 1
    return bool(reachable) or behind


def _in_log_or_statistics_only(search: FileSearch) -> bool:
    return all(scrub.is_statistics_file(name) or is_wal_file(name) for name in search.found_in)


def _clear_log_and_statistics(search: FileSearch, notes: list[str], lease: Lease | None, touched: set[str] | None,
                              wal: pgfiles.WalState, wal_rounds: int) -> int | None:
    """PostgreSQL: sample the statistics again and clear the WAL segments where `search` found a
    needle; returns the WAL rounds used (0 or 1), or None when nothing could be done."""
    acted, rounds = False, 0
    if any(scrub.is_statistics_file(name) for name in search.found_in):
        scrub.resample_statistics(notes, lease, touched)
        acted = True
    if any(is_wal_file(name) for name in search.found_in) and wal_rounds < pgfiles.WAL_ROUNDS:
        # Each WAL round earns one more pass, so the WAL never eats the passes the statistics need.
        if _clear_wal(search.found_in, wal, lease):
            rounds, acted = 1, True
    return rounds if acted else None


def verify(needles: list[str], notes: list[str], lease: Lease | None,
           wal: pgfiles.WalState | None = None, touched: set[str] | None = None) -> tuple[FileSearch, set[str]]:
    """Search the files for the needles; returns the last search and the needles set aside.

    A needle found where data which stays holds it proves nothing: it is set aside.
    On SQLite the file helper tells that apart by the page structure (a match inside a
    row that exists, or in a page's unused space), and what lies in unused space is
    zeroed and searched for again. On PostgreSQL, where the tables were rewritten, the
    data itself is searched for the needles found (a full read, done only for those).
    """
    set_aside: set[str] = set()
    search = FileSearch(status="searched", files=[], found=False, found_in=[], found_count=0)
    wal = wal if wal is not None else pgfiles.WalState()
    wal_rounds = 0
    passes = 0
    # SQLite: the WAL was cut to nothing by this loop since the deletion, so every frame in it
    # was written afterwards and a match in a row of such a frame is data that stays (a key of
    # an index's interior page, say, rewritten by a writer's page split).
    wal_cut = False
    # PostgreSQL: whether a finding in the WAL or statistics alone was cleared before asking
    # rows that stay about it (see below); once is enough.
    cleared_first = False
    carried: dict[str, dict] = {}  # PostgreSQL: files the last pass searched clean (see below)
    while passes < VERIFY_PASSES + wal_rounds:
        passes += 1
        # Without pg_checkpoint (the scrub before said so) every pass reads every file.
        checkpointed = checkpoint_to_disk()
        search = search_database_files(needles, touched, carried if checkpointed else None)
        search.passes = passes
        if search.status != "searched" or not search.found:
            break
        if connection.vendor != "sqlite":
            # Found in the WAL or the statistics only (the deletion's own WAL records, every time):
            # those are cleared and searched again before asking whether rows that stay hold the
            # needles, a read of every text column of the database, which grows with it. Only what
            # is still found afterwards is asked about.
            if not cleared_first and passes < VERIFY_PASSES + wal_rounds and _in_log_or_statistics_only(search):
                cleared_first = True
                cleared = _clear_log_and_statistics(search, notes, lease, touched, wal, wal_rounds)
                if cleared is not None:
                    wal_rounds += cleared
                    carried = _clean_and_unchanged(search) if checkpointed else {}
                    continue
            cleared_first = True
            shared = _strings_in_live_data([needles[i] for i in search.found_needles])
            set_aside |= shared
            search = search.without({i for i in search.found_needles if needles[i] in shared})
            if search.found and passes < VERIFY_PASSES + wal_rounds and _in_log_or_statistics_only(search):
                cleared = _clear_log_and_statistics(search, notes, lease, touched, wal, wal_rounds)
                if cleared is not None:
                    wal_rounds += cleared
                    carried = _clean_and_unchanged(search) if checkpointed else {}
                    continue
            break
        main = Path(str(connection.settings_dict["NAME"])).name
        # In a row of the main file (just checkpointed): data that stays holds it, and
        # a stale copy of it may as well be of that row; it is set aside (its stale
        # copies are still cleaned). A row seen only in WAL frames may be a deleted
        # row's image from before the deletion: the WAL is emptied and searched again.
        kept = {i for i, files in search.live.items()
                if main in files or (wal_cut and any(name.endswith("-wal") for name in files))}
        set_aside |= {needles[i] for i in kept}
        pages = sorted(set().union(*search.pages.values())) if search.pages else []
        search = search.without(kept)
        if not search.found or passes == VERIFY_PASSES:
            if pages and not search.found:
                zero_unused_space(pages)
            break
        zeroed, problem = zero_unused_space(pages)
        if problem:
            notes.append(problem)
            break
        if zeroed:
            notes.append(f"pass {passes}: zeroed unused space in {zeroed} database pages that held stale copies")
        wal_cut = scrub.truncate_wal_or_note(notes, lease)
    if connection.vendor != "sqlite" and search.status == "searched":
        wal.segments_searched = sum(1 for f in search.files if is_wal_file(f["file"]))
        wal.still_in = pgfiles.explain_segments([n for n in search.found_in if is_wal_file(n)])
    return search, set_aside
