"""Search by meaning: the rows whose vectors are nearest the query's, and both kinds fused.

A million messages are too many to compare exactly per search (a 1 KiB vector each), so a
search goes in two passes:

1. **binary codes, in memory.** Each server process keeps the codes (32 bytes a row for
   256 dimensions) of the rows its scope may see, per project, in one numpy array, and
   takes in only the rows written since it last looked (`MessageVector.id` grows); the
   Hamming distance from the query's code to every one is a few milliseconds at 1,000,000
   rows. A conversation, subject or namespace filter narrows the array first.
2. **exact vectors, from the database.** The CANDIDATES nearest codes are read back with
   their rows under every filter and the project fence (the same conditions as full-text
   search), ranked by cosine, and those under MIN_SIMILARITY dropped. When the filters
   leave too few, the first pass hands out eight times as many, up to all of them.

Rows still queued for their vectors (meaning_queue.py; the background embedder empties
the queue within seconds) are embedded in the request, up to WAITING_SCANNED of them, so
a row is findable by meaning as soon as its append returns. A fork's copied rows are
found through their source's vectors and reported in every conversation that holds them
(lineage.holders), as full-text search reports them.

`mode=both` fuses the full-text hits (ranked by bm25 among the first CANDIDATES the index
hands out: search.ranked) with the meaning hits by reciprocal rank fusion; each hit says
which kind found it.
"""

import threading
import uuid
from dataclasses import dataclass, field

import numpy as np
from django.db import connection

from conversations import projects
from conversations.embeddings import embedders
from conversations.embeddings import vectors as vec
from conversations.embeddings.models import model_id
from conversations.models import Conversation
from conversations.subjects import normalize_subject

from . import highlight, lineage, meaning_queue, reads
from .models import POSITION_SPAN, ConversationKey, MessageVector
from .query import InvalidQuery, parse_query

MODES = ("words", "meaning", "both")
# Rows read back exactly per round of the first pass.
CANDIDATES = 400
# A cosine under this is no match: nearest is not the same as near.
MIN_SIMILARITY = 0.25
# Queued rows embedded in the request at most (the background embedder keeps it small).
WAITING_SCANNED = 2000
MAX_PAGE = 10
RRF_K = 60

_VEC = MessageVector._meta.db_table


def parse_mode(value, *, default: str = "words") -> str:
    if value in (None, ""):
        return default
    if value not in MODES:
        raise reads.BadSearch(f"mode must be one of {', '.join(MODES)}", field="mode")
    return value


@dataclass
class MeaningPage:
    hits: list = field(default_factory=list)
    page: int = 1
    next_page: int | None = None


# ---------------------------------------------------------------- the codes in memory


class _Codes:
    """One scope's binary codes: the vector ids, index ids and codes of every row it may see."""

    def __init__(self, model: int, width: int):
        self.model, self.width, self.last = model, width, 0
        self.msgs = np.zeros(0, dtype=np.int64)
        self.codes = np.zeros((0, width), dtype=np.uint8)
        self.lock = threading.Lock()

    def refresh(self) -> None:
        """Take in the rows written since the last look (ids only grow)."""
        fence, fenced = projects.sql_fence("c.project_id")
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT v.id, v.msg, v.code FROM {_VEC} v "
                f"JOIN {reads._KEY} k ON k.seq = v.msg / {POSITION_SPAN} "
                f"JOIN {reads._CONV} c ON c.id = k.conversation_id "
                f"WHERE v.model_id = %s AND v.id > %s{fence} ORDER BY v.id", [self.model, self.last, *fenced])
            rows = cursor.fetchall()
        if not rows:
            return
        self.last = rows[-1][0]
        msgs = np.fromiter((r[1] for r in rows), dtype=np.int64, count=len(rows))
        codes = np.frombuffer(b"".join(bytes(r[2]) for r in rows), dtype=np.uint8).reshape(len(rows), self.width)
        self.msgs = np.concatenate([self.msgs, msgs])
        self.codes = np.concatenate([self.codes, codes])


_cache: dict[tuple, _Codes] = {}
_cache_lock = threading.Lock()


def _codes_for(model: int, width: int) -> _Codes:
    scope = projects.current()
    key = (connection.alias, connection.settings_dict.get("NAME"), "every" if scope.every else scope.project_id)
    with _cache_lock:
        found = _cache.get(key)
        if found is None or found.model != model or found.width != width:
            found = _cache[key] = _Codes(model, width)
    with found.lock:
        found.refresh()
        return found


def forget_codes() -> None:
    """Drop every process cache (tests that roll back the rows they were built from)."""
    with _cache_lock:
        _cache.clear()


# ---------------------------------------------------------------- the search


def _allowed(codes: _Codes, filters: reads.Filters):
    """A mask of the rows a conversation, subject or namespace filter leaves (None: all),
    and the stretches of a conversation filter."""
    seqs = codes.msgs // POSITION_SPAN
    if filters.conversation_id is not None:
        stretches = lineage.stretches(filters.conversation_id) or []
        positions = codes.msgs % POSITION_SPAN
        mask = np.zeros(len(codes.msgs), dtype=bool)
        for stretch in stretches:
            mask |= (seqs == stretch.seq) & (positions <= stretch.last)
        return mask, stretches
    if filters.subject is None and filters.namespace is None:
        return None, None
    found = Conversation.objects.live()
    if filters.subject is not None:
        found = found.filter(subject_norm=normalize_subject(filters.subject))
    if filters.namespace is not None:
        found = found.filter(namespace=filters.namespace)
    keys = list(ConversationKey.objects.filter(conversation_id__in=found.values("id"))
                .values_list("seq", flat=True))
    return np.isin(seqs, np.asarray(keys, dtype=np.int64)), None


def _rows_of(msgs: list[int], filters: reads.Filters, kinds) -> list[tuple]:
    """The rows of these index ids under the filters and the fence: (seq, position, id, title,
    subject, namespace, kind, created_at, content, vector)."""
    if not msgs:
        return []
    params: list = list(msgs)
    where = [f"v.msg IN ({', '.join(['%s'] * len(msgs))})"]
    where += reads._common_filters(filters, kinds, params)
    fence, fenced = projects.sql_fence("c.project_id", "c.namespace")
    sql = (f"SELECT k.seq, m.position, {reads._COLUMNS}, v.vector FROM {_VEC} v "
           f"JOIN {reads._KEY} k ON k.seq = v.msg / {POSITION_SPAN} "
           f"JOIN {reads._CONV} c ON c.id = k.conversation_id "
           f"JOIN {reads._MSG} m ON m.conversation_id = k.conversation_id AND m.position = v.msg & {POSITION_SPAN - 1} "
           f"WHERE {' AND '.join(where)}{fence}")
    with connection.cursor() as cursor:
        cursor.execute(sql, params + fenced)
        return cursor.fetchall()


def _waiting(filters: reads.Filters, kinds, stretches) -> list[tuple]:
    """Queued rows (no vector yet) under the filters and the fence, as _rows_of's rows
    with the content last but one and no vector."""
    params: list = []
    where = reads._common_filters(filters, kinds, params)
    fence, fenced = projects.sql_fence("c.project_id", "c.namespace")
    if stretches is not None:
        parts = []
        for stretch in stretches:
            parts.append("(k.seq = %s AND m.position <= %s)")
            fenced += [stretch.seq, stretch.last]
        fence += f" AND ({' OR '.join(parts) or '1 = 0'})"
    sql = (f"SELECT k.seq, m.position, {reads._COLUMNS}, NULL FROM {meaning_queue.PENDING} p "
           f"JOIN {reads._KEY} k ON k.seq = p.id / {POSITION_SPAN} "
           f"JOIN {reads._CONV} c ON c.id = k.conversation_id "
           f"JOIN {reads._MSG} m ON m.conversation_id = k.conversation_id AND m.position = p.id & {POSITION_SPAN - 1} "
           f"WHERE {' AND '.join(where)}{fence} ORDER BY p.id DESC LIMIT {WAITING_SCANNED}")
    with connection.cursor() as cursor:
        cursor.execute(sql, params + fenced)
        return cursor.fetchall()


def nearest(text: str, *, filters: reads.Filters, want: int) -> list[tuple[float, tuple]]:
    """The `want` rows nearest `text` by meaning, best first: (cosine, row)."""
    kinds = reads.check_kinds(filters.kinds)
    embedder = embedders.active()
    query = embedder.embed([text])[0]
    dimension = int(query.shape[0])
    codes = _codes_for(model_id(embedder.name, dimension), (dimension + 7) // 8)
    mask, stretches = _allowed(codes, filters)
    msgs, table = codes.msgs, codes.codes
    if mask is not None:
        msgs, table = msgs[mask], table[mask]
    scored: dict[tuple, tuple[float, tuple]] = {}
    if len(msgs):
        distance = vec.hamming(table, np.frombuffer(vec.binary_code(query), dtype=np.uint8))
        take = CANDIDATES
        while True:
            take = min(take, len(msgs))
            picked = np.argpartition(distance, take - 1)[:take] if take < len(msgs) else np.arange(len(msgs))
            rows = _rows_of(msgs[picked].tolist(), filters, kinds)
            _score(rows, query, dimension, scored)
            if len(scored) >= want or take >= len(msgs):
                break
            take *= 8
    waiting = _waiting(filters, kinds, stretches)
    if waiting:
        found = embedder.embed([highlight.index_text(r[8]) for r in waiting])
        for row, v in zip(waiting, found, strict=True):
            similarity = float(v @ query)
            if similarity >= MIN_SIMILARITY:
                scored.setdefault((row[0], row[1]), (similarity, row))
    best = sorted(scored.values(), key=lambda sr: (-sr[0], -sr[1][0], -sr[1][1]))
    return best[:want]


def _score(rows, query, dimension, scored) -> None:
    vectors = vec.matrix([r[9] for r in rows if len(r[9]) == dimension * 4], dimension)
    kept = [r for r in rows if len(r[9]) == dimension * 4]
    for row, similarity in zip(kept, (vectors @ query).tolist(), strict=True):
        if similarity >= MIN_SIMILARITY:
            scored[(row[0], row[1])] = (similarity, row)


def _snippet_query(text: str):
    try:
        return parse_query(text)
    except (InvalidQuery, reads.BadSearch):
        return None


def _hits(scored: list[tuple[float, tuple, tuple]], text: str, shown_as=None) -> list[reads.Hit]:
    """Hits for (score, row, matched) triples, with snippets and the conversations holding each row."""
    rows = [row for _, row, _ in scored]
    texts = [highlight.index_text(r[8]) for r in rows]
    query = _snippet_query(text)
    pieces = (highlight.snippets(texts, query) if query is not None
              else [[(t[:highlight.PLAIN_CHARS], False)] for t in texts])
    held = lineage.holders([(r[2], r[1]) for r in rows])
    hits = []
    for (score, r, matched), snippet, holders in zip(scored, pieces, held, strict=True):
        cid, title, subject, namespace = r[2:6] if shown_as is None else shown_as
        hits.append(reads.Hit(conversation_id=uuid.UUID(str(cid)), title=title, subject=subject,
                              namespace=namespace, position=r[1], kind=r[6], created_at=reads._aware(r[7]),
                              snippet=snippet, conversations=holders, score=round(score, 6), matched=matched))
    return hits


def _shown_as(filters: reads.Filters):
    """A fork searched inside shows its copied rows as its own (as full-text search does)."""
    if filters.conversation_id is None:
        return None
    return (Conversation.objects.filter(pk=filters.conversation_id)
            .values_list("id", "title", "subject", "namespace").first())


def search(text: str, *, filters: reads.Filters | None = None, mode: str = "meaning", page: int = 1,
           limit: int = reads.PAGE) -> MeaningPage:
    """One page of hits by meaning (`mode="meaning"`) or by words and meaning fused ("both")."""
    filters = filters or reads.Filters()
    if not isinstance(text, str) or not text.strip():
        raise reads.BadSearch("enter what to search for", field="q")
    if not 1 <= page <= MAX_PAGE:
        raise reads.BadSearch(f"page must be between 1 and {MAX_PAGE}", field="cursor")
    want = page * limit + 1
    near = nearest(text, filters=filters, want=max(want, CANDIDATES if mode == "both" else 0))
    if mode == "meaning":
        found = [(score, row, ("meaning",)) for score, row in near]
    else:
        found = _fused(text, filters, near)
    start = (page - 1) * limit
    shown = found[start:start + limit]
    return MeaningPage(hits=_hits(shown, text, _shown_as(filters)), page=page,
                       next_page=page + 1 if len(found) > start + limit and page < MAX_PAGE else None)


def _fused(text: str, filters: reads.Filters, near) -> list[tuple[float, tuple, tuple]]:
    """Full-text hits (bm25 among the first CANDIDATES) and meaning hits, by reciprocal rank."""
    query = _snippet_query(text)
    words: list[tuple] = []
    if query is not None:
        kinds = reads.check_kinds(filters.kinds)
        rows = reads.candidate_rows(query, filters, kinds, CANDIDATES)
        if not rows and len(query.clauses) > 1 and not query.excluded:
            # Every word is not in one row: any of them, for the words' side of the fusion.
            query = _snippet_query(" OR ".join(t.text for clause in query.clauses for t in clause))
            rows = reads.candidate_rows(query, filters, kinds, CANDIDATES) if query is not None else []
        bm25 = highlight.scores([highlight.index_text(r[-1]) for r in rows], query)
        words = [row for _, row in sorted(zip(bm25, rows, strict=True), key=lambda sr: (-sr[0], -sr[1][0], -sr[1][1]))]
    fused: dict[tuple, list] = {}
    for rank, row in enumerate(words, 1):
        fused[(row[0], row[1])] = [1.0 / (RRF_K + rank), tuple(row) + (None,), ["words"]]
    for rank, (_, row) in enumerate(near, 1):
        entry = fused.setdefault((row[0], row[1]), [0.0, row, []])
        entry[0] += 1.0 / (RRF_K + rank)
        entry[2].append("meaning")
    ordered = sorted(fused.values(), key=lambda e: (-e[0], -e[1][0], -e[1][1]))
    return [(score, row, tuple(matched)) for score, row, matched in ordered]

