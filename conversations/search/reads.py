"""Search over message content: one keyset page of hits, newest conversation first.

Hits come in index order, descending: conversations by their search key (newest
first), rows within one by position (latest first). The cursor is the last hit's
(key, position), so page N costs what page 1 costs and a row appended meanwhile
never shifts a page. Filters narrow the hits in the same statement.
"""

import importlib
import json
import threading
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime

from django.db import connection
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from sqlean import dbapi2 as Database

from conversations import keyset, projects
from conversations.errors import StoreError
from conversations.message_schema import KINDS
from conversations.models import Conversation, Message
from conversations.params import decode_cursor as decode_keyset
from conversations.params import encode_cursor as encode_keyset
from conversations.subjects import normalize_subject

from . import highlight, lineage
from .models import POSITION_SPAN, ConversationKey, project_token
from .query import Query, parse_query

PAGE = 20
MAX_PAGE = 100

_FTS = "search_message_fts"
# Rows appended since the index last took in a batch (SQLite; migration 0002).
_PENDING = "search_message_pending"
# The index's tokenizer (migration 0001), for matching the waiting rows in memory.
TOKENIZE = "porter unicode61 remove_diacritics 2"
# SQLite: (created_at, index id) of every row the index holds (migration 0005).
_DATES = importlib.import_module("conversations.search.migrations.0005_dates_of_indexed_rows").DATES
_KEY = ConversationKey._meta.db_table
_CONV = Conversation._meta.db_table
_MSG = Message._meta.db_table


class BadSearch(StoreError):
    code = "bad_request"
    status = 400


@dataclass(frozen=True)
class Hit:
    conversation_id: uuid.UUID
    title: str
    subject: str
    namespace: str
    position: int
    kind: str
    created_at: datetime
    snippet: list[tuple[str, bool]]
    # Every live conversation holding this row: the one that wrote it, then the forks
    # that copied it (conversations.search.lineage). A row shared is one hit.
    conversations: tuple[lineage.Holder, ...] = ()
    # Search by meaning (search.meaning): the cosine, or the fused score, and which kinds
    # of search found the row ("words", "meaning"); full-text search leaves them empty.
    score: float | None = None
    matched: tuple[str, ...] = ()

    @property
    def also_in(self) -> list[lineage.Holder]:
        """The other conversations holding this row (forks that copied it, or its source)."""
        return [c for c in self.conversations if c.id != self.conversation_id]

    @property
    def snippet_text(self) -> str:
        return "".join(text for text, _ in self.snippet)

    @property
    def highlights(self) -> list[tuple[int, int]]:
        spans, at = [], 0
        for text, marked in self.snippet:
            if marked:
                spans.append((at, at + len(text)))
            at += len(text)
        return spans


@dataclass
class SearchPage:
    query: Query
    hits: list[Hit] = field(default_factory=list)
    # Pass as `cursor` for the next page; None at the end.
    next_cursor: str | None = None


@dataclass(frozen=True)
class Filters:
    kinds: tuple[str, ...] = ()
    subject: str | None = None
    namespace: str | None = None
    since: datetime | None = None  # created_at >= since
    before: datetime | None = None  # created_at < before
    conversation_id: uuid.UUID | None = None


SEARCH_CURSOR = "search"


def encode_cursor(seq: int, position: int) -> str:
    return encode_keyset(SEARCH_CURSOR, seq, position)


def decode_cursor(value: str) -> tuple[int, int]:
    try:
        seq, position = decode_keyset(value, SEARCH_CURSOR, int, int)
        if not 0 <= position < POSITION_SPAN or seq >= 2**31:
            raise ValueError("out of range")
    except ValueError:
        raise BadSearch("cursor is not one this search gave out; pass the previous page's `next` unchanged",
                        field="cursor", code="invalid_cursor") from None
    return seq, position


def check_kinds(kinds) -> tuple[str, ...]:
    unknown = [k for k in kinds if k not in KINDS]
    if unknown:
        raise BadSearch(f"unknown kind {unknown[0][:40]!r}; expected some of {', '.join(KINDS)}", field="kind")
    return tuple(sorted(set(kinds), key=KINDS.index))


def search_messages(q, *, filters: Filters = Filters(), cursor: str | None = None, limit: int = PAGE) -> SearchPage:
    """Hits for `q` (a query string or a parsed Query) under `filters`, one page."""
    query = q if isinstance(q, Query) else parse_query(q)
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_PAGE:
        raise BadSearch(f"limit must be between 1 and {MAX_PAGE}", field="limit")
    after = decode_cursor(cursor) if cursor else None
    kinds = check_kinds(filters.kinds)
    shown_as = None
    if filters.conversation_id is not None:
        found = lineage.stretches(filters.conversation_id)
        if found is None:
            return SearchPage(query=query)
        rows = _rows_in_one(query, filters, kinds, found, after, limit + 1)
        if len(found) > 1:  # a fork: its copied rows are found as its source's, shown as its own
            shown_as = (Conversation.objects.filter(pk=filters.conversation_id)
                        .values_list("id", "title", "subject", "namespace").first())
    else:
        rows = _rows(query, filters, kinds, None, after, limit + 1)
    rows, more = keyset.take(rows, limit)
    texts = [highlight.index_text(r[-1]) for r in rows]
    pieces = highlight.snippets(texts, query)
    held = lineage.holders([(r[2], r[1]) for r in rows])
    if shown_as is not None:
        rows = [r[:2] + tuple(shown_as) + r[6:] for r in rows]
    hits = [
        Hit(conversation_id=uuid.UUID(str(cid)), title=title, subject=subject, namespace=namespace,
            position=position, kind=kind, created_at=_aware(created_at), snippet=snippet, conversations=holders)
        for (seq, position, cid, title, subject, namespace, kind, created_at, _), snippet, holders
        in zip(rows, pieces, held, strict=True)
    ]
    next_cursor = encode_cursor(rows[-1][0], rows[-1][1]) if more and rows else None
    return SearchPage(query=query, hits=hits, next_cursor=next_cursor)


def candidate_rows(query, filters: Filters, kinds, limit: int) -> list[tuple]:
    """The first `limit` hits in index order (newest conversation first), each row
    (seq, position, id, title, subject, namespace, kind, created_at, content), for
    search.ranked to rank; no cap of a page applies. With a conversation filter, the
    conversation's own rows and its copied prefix, each shown as the conversation's."""
    if filters.conversation_id is None:
        return _rows(query, filters, kinds, None, None, limit)
    found = lineage.stretches(filters.conversation_id)
    if found is None:
        return []
    rows = _rows_in_one(query, filters, kinds, found, None, limit)
    if len(found) > 1:  # a fork: its copies are found as its source's rows
        shown_as = (Conversation.objects.filter(pk=filters.conversation_id)
                    .values_list("id", "title", "subject", "namespace").first())
        rows = [(*row[:2], *shown_as, *row[6:]) for row in rows]
    return rows


def _rows(query, filters, kinds, seq, after, limit):
    if connection.vendor == "sqlite":
        return _sqlite_rows(query, filters, kinds, seq, after, limit)
    return _postgres_rows(query, filters, kinds, seq, after, limit)


def _rows_in_one(query, filters, kinds, stretches, after, limit):
    """Hits inside one conversation, latest row first: its own rows, and its copied
    prefix through the rows the index holds it as (`lineage.stretches`), each a row
    of the conversation that wrote it, at the same position. Paged by position."""
    if len(stretches) == 1:
        return _rows(query, filters, kinds, stretches[0].seq, after, limit)
    before = after[1] if after is not None else POSITION_SPAN
    found = []
    for stretch in stretches:
        below = min(stretch.last + 1, before)
        if below > 0:
            found += _rows(query, filters, kinds, stretch.seq, (stretch.seq, below), limit)
    found.sort(key=lambda r: r[1], reverse=True)
    return found[:limit]


def _aware(value):
    if isinstance(value, str):  # SQLite hands a raw cursor the stored text
        value = parse_datetime(value)
    if value is not None and timezone.is_naive(value):
        value = timezone.make_aware(value, UTC)
    return value


def _common_filters(filters: Filters, kinds, params: list) -> list[str]:
    # The index holds every project's rows: a hit is the current project's (and namespaces') only,
    # told by its key (search migration 0007), before its conversation and message are read.
    fence, fenced = projects.sql_fence("k.project_id", "c.namespace")
    where = ["NOT c.deleting AND NOT c.staged"] + ([fence.removeprefix(" AND ")] if fence else [])
    params += fenced
    if kinds:
        where.append(f"m.kind IN ({', '.join(['%s'] * len(kinds))})")
        params += list(kinds)
    if filters.subject is not None:
        where.append("c.subject_norm = %s")
        params.append(normalize_subject(filters.subject))
    if filters.namespace is not None:
        where.append("c.namespace = %s")
        params.append(filters.namespace)
    dates, date_params = _date_conditions(filters, "m.created_at")
    params += date_params
    return where + dates


_COLUMNS = "c.id, c.title, c.subject, c.namespace, m.kind, m.created_at, m.content"


def _sqlite_rows(query, filters, kinds, seq, after, limit):
    # The rows still waiting to enter the index are read first, the index second: a
    # row that moves from the one to the other in between is found twice (and kept
    # once), never missed. At most FLUSH_AT - 1 rows wait (migration 0002).
    waiting = _matching(query, _sqlite_select(_PENDING, "f.id", None, filters, kinds, seq, after, None))
    if _few_rows_in_dates(filters):
        indexed = _sqlite_dates_first(query, filters, kinds, seq, after, limit)
    else:
        # Inside one conversation the index reads a rowid range: no other project's rows to skip.
        match = _index_match(query, fenced=seq is None)
        indexed = _sqlite_select(_FTS, "f.rowid", match, filters, kinds, seq, after, limit)
    if not waiting:
        return indexed
    rows = {(r[0], r[1]): r for r in waiting}
    rows.update({(r[0], r[1]): r for r in indexed})
    return [rows[key] for key in sorted(rows, reverse=True)[:limit]]


# A project's search asks the index for the project's token too (search migration 0011) when
# the query's words have at least this many hits in the index, every project's together. FTS5
# reads a doclist newest first by starting at its end in every segment, and the token's doclist
# holds every row of the project: 0.25 ms at 1,000,000 rows in 13 segments, whatever the words.
# Common words pay it gladly (a page of a phrase, 0.54 ms against 1.24 ms walking every
# project's hits with the key's fence); a rare word's few hits are cheaper walked with the key
# (0.02 ms). Whether a query's words are common is asked once a minute per process.
FEW_HITS = 64
_HITS_KNOWN_FOR = 60.0
_HITS_KEPT = 4096
_many_hits_known: dict[str, tuple[bool, float]] = {}


def _remembered(known: dict, key, ask) -> bool:
    """`ask()`'s answer for `key`, asked again once _HITS_KNOWN_FOR seconds have passed; at most
    _HITS_KEPT keys are kept (the whole dict is dropped when full)."""
    now = time.monotonic()
    found = known.get(key)
    if found is not None and found[1] > now:
        return found[0]
    answer = ask()
    if len(known) >= _HITS_KEPT:
        known.clear()
    known[key] = (answer, now + _HITS_KNOWN_FOR)
    return answer


def _many_hits(match: str) -> bool:
    """Whether the index holds at least FEW_HITS rows for `match` (in every project: the
    answer chooses how to read, never what is found), remembered for a minute."""

    def count() -> bool:
        with connection.cursor() as cursor:
            # Oldest first, the order FTS5 reads a doclist from its start in: the cheap one.
            cursor.execute(f"SELECT count(*) FROM (SELECT 1 FROM {_FTS} WHERE {_FTS} MATCH %s "
                           f"LIMIT {FEW_HITS})", [match])
            return cursor.fetchone()[0] >= FEW_HITS

    return _remembered(_many_hits_known, match, count)


def _index_match(query, *, fenced: bool) -> str:
    """The FTS5 expression over the index: the query's words in the text column only (a word
    never matches a project's token); with `fenced`, on a project's scope and for common words,
    the project's token as well, so that FTS5 skips every other project's rows before any is
    read. The key's fence (`_common_filters`) holds whatever the expression: for the
    namespaces, the rare words and the rows waiting outside the index."""
    match = f"body : ({query.fts5()})"
    scope = projects.current()
    if fenced and not scope.every and scope.project_id is not None and _many_hits(match):
        match += f' AND project : "{project_token(scope.project_id)}"'
    return match


def _sqlite_select(table, rowid, match, filters, kinds, seq, after, limit, positions=(0, POSITION_SPAN - 1)):
    """Hits from the FTS5 index (`match` an FTS5 expression), or every row waiting to
    enter it (`match` None, each with its index text last), under `filters`; with
    `seq`, inside that conversation, between `positions` (first, last)."""
    span = POSITION_SPAN
    params: list = []
    where = []
    if match is not None:
        where.append(f"{_FTS} MATCH %s")
        params.append(match)
    if seq is not None:
        where.append(f"{rowid} BETWEEN %s AND %s")
        params += [seq * span + positions[0], seq * span + positions[1]]
    if after is not None:
        where.append(f"{rowid} < %s")
        params.append(after[0] * span + after[1])
    where += _common_filters(filters, kinds, params)
    columns = _COLUMNS if match is not None else f"{_COLUMNS}, {_WAITING_TEXT}"
    sql = (
        f"SELECT {rowid} >> 32, {rowid} & {span - 1}, {columns} FROM {table} f "
        f"JOIN {_KEY} k ON k.seq = {rowid} >> 32 "
        f"JOIN {_CONV} c ON c.id = k.conversation_id "
        f"JOIN {_MSG} m ON m.conversation_id = k.conversation_id AND m.position = {rowid} & {span - 1} "
        f"WHERE {' AND '.join(where)} ORDER BY {rowid} DESC"
        + (f" LIMIT {int(limit)}" if limit is not None else "")
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


# A date filter that holds fewer rows than this is searched from the dates' side
# (on SQLite, when they lie in at most DATES_FIRST_SPANS conversations).
DATES_FIRST_BELOW = 20_000
DATES_FIRST_SPANS = 500


def _few_rows_in_dates(filters: Filters) -> bool:
    """Whether the date filter keeps few enough rows to start from them (counted on the
    dates of indexed rows, migration 0005, on SQLite, and on the created_at index of
    migration 0003 on PostgreSQL; never past DATES_FIRST_BELOW rows).

    SQLite: the full-text index hands out its hits newest first, and a filter it
    cannot see is checked hit by hit: a phrase with 20,000 hits in 1,000,000 rows
    and a one-day filter read all 20,000 rows (~0.1 s, ~0.35 s with a kind as well).
    Starting from the day's ~3,000 rows, the index is asked only about
    the stretch of each conversation they lie in. PostgreSQL: see `_postgres_rows`."""
    if filters.since is None and filters.before is None:
        return False
    conditions, params = _date_conditions(filters)
    where = " AND ".join(conditions)
    with connection.cursor() as cursor:
        table = _DATES if connection.vendor == "sqlite" else _MSG
        cursor.execute(f"SELECT count(*) FROM (SELECT 1 FROM {table} WHERE {where} "
                       f"LIMIT {DATES_FIRST_BELOW}) d", params)
        return cursor.fetchone()[0] < DATES_FIRST_BELOW


def _date_conditions(filters: Filters, column: str = "created_at") -> tuple[list[str], list]:
    """The conditions on `column` that the date filters ask for, and their parameters."""
    where, params = [], []
    if filters.since is not None:
        where.append(f"{column} >= %s")
        params.append(connection.ops.adapt_datetimefield_value(filters.since))
    if filters.before is not None:
        where.append(f"{column} < %s")
        params.append(connection.ops.adapt_datetimefield_value(filters.before))
    return where, params


def _sqlite_dates_first(query, filters, kinds, seq, after, limit):
    """`_sqlite_select`'s hits from the index, found from the rows in the date range:
    for each conversation with rows in it, the index's hits between its first and
    last row in the range (a rowid range FTS5 seeks to, where asking it for every
    hit of a phrase reads its words' whole doclists: 130 ms at 1,000,000 rows), then
    the filters over those hits in one statement."""
    span = POSITION_SPAN
    where, params = _date_conditions(filters)
    if seq is not None:
        where.append("d.id BETWEEN %s AND %s")
        params += [seq * span, seq * span + span - 1]
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT d.id >> 32, min(d.id & {span - 1}), max(d.id & {span - 1}) FROM {_DATES} d "
            f"WHERE {' AND '.join(where)} GROUP BY d.id >> 32 LIMIT {DATES_FIRST_SPANS + 1}", params)
        spans = cursor.fetchall()
        if len(spans) > DATES_FIRST_SPANS:
            return _sqlite_select(_FTS, "f.rowid", _index_match(query, fenced=seq is None), filters, kinds,
                                  seq, after, limit)
        match = _index_match(query, fenced=False)
        found = []
        ceiling = after[0] * span + after[1] - 1 if after is not None else None
        for conversation, first, last in spans:
            low, high = conversation * span + first, conversation * span + min(last, span - 1)
            if ceiling is not None:
                high = min(high, ceiling)
            if high < low:
                continue
            # Ascending: FTS5 walks a rowid range backwards several times slower.
            cursor.execute(f"SELECT rowid FROM {_FTS} WHERE {_FTS} MATCH %s AND rowid BETWEEN %s AND %s",
                           [match, low, high])
            found += [rowid for (rowid,) in cursor.fetchall()]
        if not found:
            return []
        params = [json.dumps(found)]
        where = _common_filters(filters, kinds, params)
        cursor.execute(
            f"SELECT h.value >> 32, h.value & {span - 1}, {_COLUMNS} FROM json_each(%s) h "
            f"JOIN {_KEY} k ON k.seq = h.value >> 32 "
            f"JOIN {_CONV} c ON c.id = k.conversation_id "
            f"JOIN {_MSG} m ON m.conversation_id = k.conversation_id AND m.position = h.value & {span - 1} "
            f"WHERE {' AND '.join(where)} ORDER BY h.value DESC LIMIT {int(limit)}", params)
        return cursor.fetchall()


# The text the index holds for a waiting row's message: the expression its triggers use.
_WAITING_TEXT = importlib.import_module("conversations.search.migrations.0001_initial").sqlite_text("m.content")


_memory = threading.local()


def _matching(query, rows):
    """The `rows` (index text last) that `query` matches, by an FTS5 index in memory
    with the same tokenizer; returned without their index text."""
    if not rows:
        return []
    db = getattr(_memory, "db", None)
    if db is None:
        db = Database.connect(":memory:")
        db.execute(f"CREATE VIRTUAL TABLE waiting USING fts5(body, tokenize='{TOKENIZE}')")
        _memory.db = db
    try:
        db.executemany("INSERT INTO waiting(rowid, body) VALUES (?, ?)",
                       [(i, row[-1] or "") for i, row in enumerate(rows)])
        found = {i for (i,) in db.execute("SELECT rowid FROM waiting WHERE waiting MATCH ?", (query.fts5(),))}
    finally:
        db.execute("DELETE FROM waiting")
    return [row[:-1] for i, row in enumerate(rows) if i in found]


def _postgres_rows(query, filters, kinds, seq, after, limit):
    tsquery, params = query.tsquery_sql()
    dates_first = _few_rows_in_dates(filters)
    scope = projects.current()
    if (seq is None and not dates_first and not scope.every and scope.project_id is not None
            and _postgres_common(tsquery, params)):
        return _postgres_walk(tsquery, params, filters, kinds, after, limit, scope.project_id)
    # The row's words as stored when it was written (migration 0003): GIN finds the
    # candidates, and a phrase's recheck reads them instead of computing them again.
    where = [f"m.search_tsv @@ ({tsquery})"]
    if seq is not None:
        where.append("k.seq = %s")
        params.append(seq)
    if after is not None:
        where.append("(k.seq, m.position) < (%s, %s)")
        params += [after[0], after[1]]
    where += _common_filters(filters, kinds, params)
    source = f"{_MSG} m"
    if dates_first:
        # The range's rows first, fenced off: left free, the planner walks conversations
        # newest first and, for each, intersects the range with the conversation's rows
        # (60 ms at 1,000,000 messages for a day's tool rows, 3 ms fenced).
        dates, date_params = _date_conditions(filters)
        source = f"(SELECT * FROM {_MSG} WHERE {' AND '.join(dates)} OFFSET 0) m"
        params = date_params + params
    sql = (
        f"SELECT k.seq, m.position, {_COLUMNS} FROM {source} "
        f"JOIN {_KEY} k ON k.conversation_id = m.conversation_id "
        f"JOIN {_CONV} c ON c.id = m.conversation_id "
        f"WHERE {' AND '.join(where)} ORDER BY k.seq DESC, m.position DESC LIMIT {int(limit)}"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


# PostgreSQL: a project's search for words the planner expects in at least this share of the
# message rows walks the project's conversations newest first and checks their rows.
# Under the row-level security policies the planner reads each conversation's rows through
# a BitmapAnd of its key and the GIN index, which for a common word matches some 35,000
# rows of the partition: 4 ms a conversation at 1,000,000 messages, where checking the
# conversation's own rows takes 0.3 ms (bench/NOTES.md, workload 20). Rarer words keep the
# GIN index, which finds their few rows at once (a walk would check every row of the
# project: 95 ms for one ticket number). The planner's estimate is asked once a minute per
# process; it counts at least a row for each partition, so below COMMON_ROWS nothing is common.
COMMON_SHARE = 0.01
COMMON_ROWS = 100
_postgres_common_known: dict[tuple, tuple[bool, float]] = {}


def _postgres_common(tsquery: str, params: list) -> bool:
    """Whether the planner expects `tsquery` in COMMON_SHARE of the message rows or more, and
    in COMMON_ROWS (in every project: the answer chooses how to read, never what is found)."""

    def estimate() -> bool:
        with connection.cursor() as cursor:
            cursor.execute(f"EXPLAIN (FORMAT JSON) SELECT 1 FROM {_MSG} m WHERE m.search_tsv @@ ({tsquery})", params)
            plan = cursor.fetchone()[0]
            expected = (json.loads(plan) if isinstance(plan, str) else plan)[0]["Plan"]["Plan Rows"]
            cursor.execute("SELECT coalesce(sum(greatest(c.reltuples, 0)), 0) FROM pg_class c "
                           "WHERE c.oid IN (SELECT inhrelid FROM pg_inherits WHERE inhparent = %s::regclass) "
                           "OR (c.oid = %s::regclass AND c.relkind = 'r')", [_MSG, _MSG])
            rows = float(cursor.fetchone()[0])
        return expected >= max(COMMON_SHARE * rows, COMMON_ROWS)

    return _remembered(_postgres_common_known, (tsquery, *params), estimate)


def _postgres_walk(tsquery, params, filters, kinds, after, limit, project_id):
    """`_postgres_rows` for common words in one project: its conversations newest first (the
    key's index on the project), each one's rows newest first checked against the words with
    `ts_match_vq`, the function behind @@, which no index serves, so the planner cannot turn
    the check into the GIN index's BitmapAnd."""
    keys, key_params = ["project_id = %s"], [project_id]
    where, outer = [], []
    if after is not None:
        keys.append("seq <= %s")
        key_params.append(after[0])
        where.append("(k.seq, m.position) < (%s, %s)")
        outer += [after[0], after[1]]
    where += _common_filters(filters, kinds, outer)
    sql = (
        f"SELECT k.seq, m.position, {_COLUMNS} FROM "
        f"(SELECT seq, conversation_id, project_id FROM {_KEY} WHERE {' AND '.join(keys)} ORDER BY seq DESC) k "
        f"CROSS JOIN LATERAL (SELECT position, kind, created_at, content FROM {_MSG} "
        f"WHERE conversation_id = k.conversation_id AND ts_match_vq(search_tsv, ({tsquery})) "
        f"ORDER BY position DESC) m "
        f"JOIN {_CONV} c ON c.id = k.conversation_id "
        f"WHERE {' AND '.join(where)} ORDER BY k.seq DESC, m.position DESC LIMIT {int(limit)}"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, key_params + params + outer)
        return cursor.fetchall()
