"""Search results grouped by conversation, best match first.

One long session's repeated lines used to bury everything else: hits came newest
conversation first, row by row. Here the page lists conversations, each with how many
of its rows match and its few best rows, best conversation first; a conversation whose
title or subject has the words comes first of all.

What it costs is bounded. Scoring every match is not: at 1,000,000 messages two
common words match 540,000 rows, and bm25 over all of them took 1.8 s (FTS5, measured;
ts_rank reads every match's words too). So a search takes the first CANDIDATES hits
the index hands out under the filters (`reads._rows`: newest conversation first, with
every optimisation of the row list, and the rows still waiting to enter the SQLite
index), and ranks those: bm25 over their texts (`highlight.scores`, the same scorer on
both databases, so both rank alike). When there are fewer hits than that, which is
most searches, the ranking, the counts and the total are exact; past it, the page says
"more than" and ranks the newest CANDIDATES hits. The row list (newest first, keyset
pages) stays the way to read every hit.

Titles and subjects are matched by their text, case-insensitively (`title_matches`):
not stems, and every clause needs one of its terms.
"""

import uuid
from dataclasses import dataclass, field

from django.db.models import Q

from conversations.models import Conversation
from conversations.subjects import normalize_subject

from . import highlight, lineage, reads
from .query import Query

ORDERS = ("relevance", "newest")
CANDIDATES = 100
GROUPS_PER_PAGE = 10
HITS_PER_GROUP = 3
# Conversations whose title or subject has the words, at most.
TITLE_MATCHES = 50
MAX_PAGE = 1000


@dataclass
class Group:
    conversation_id: uuid.UUID
    title: str
    subject: str
    namespace: str
    count: int = 0
    best: float = 0.0  # the best row's score, higher is better
    latest: tuple = (0, 0)  # the latest matching row's (conversation key, position)
    title_match: bool = False
    rows: list = field(default_factory=list)  # (score, row) of its candidate hits
    hits: list = field(default_factory=list)


@dataclass
class GroupedResults:
    query: Query
    total: int  # matching rows among the candidates (all of them unless `capped`)
    capped: bool  # more rows match than were ranked
    conversations: int
    groups: list[Group]
    page: int
    next_page: int | None
    order: str = "relevance"


def parse_order(value, *, default: str = "relevance") -> str:
    if value in (None, ""):
        return default
    if value not in ORDERS:
        raise reads.BadSearch(f"order must be one of {', '.join(ORDERS)}", field="order")
    return value


def search_grouped(query: Query, *, filters: reads.Filters | None = None, page: int = 1) -> GroupedResults:
    """One page of conversations with hits for `query` under `filters`, best first."""
    filters = filters or reads.Filters()
    if not 1 <= page <= MAX_PAGE:
        raise reads.BadSearch(f"page must be between 1 and {MAX_PAGE}", field="page")
    kinds = reads.check_kinds(filters.kinds)
    rows = reads.candidate_rows(query, filters, kinds, CANDIDATES + 1)
    capped = len(rows) > CANDIDATES
    rows = rows[:CANDIDATES]
    scores = highlight.scores([highlight.index_text(r[-1]) for r in rows], query)
    groups: dict = {}
    for score, row in zip(scores, rows, strict=True):
        seq, position, cid, title, subject, namespace = row[:6]
        cid = uuid.UUID(str(cid))
        group = groups.get(cid)
        if group is None:
            group = groups[cid] = Group(conversation_id=cid, title=title, subject=subject, namespace=namespace)
        group.count += 1
        group.best = max(group.best, score)
        group.latest = max(group.latest, (int(seq), int(position)))
        group.rows.append((score, row))
    found = list(groups.values())
    found += title_matches(query, filters, exclude=set(groups))
    for group in found:
        group.title_match = group.title_match or _has_words(query, f"{group.title}\n{group.subject}")
    found.sort(key=lambda g: (not g.title_match, -g.best, -g.count, tuple(-x for x in g.latest)))
    start = (page - 1) * GROUPS_PER_PAGE
    shown = found[start:start + GROUPS_PER_PAGE]
    _fill_hits(query, shown)
    return GroupedResults(query=query, total=sum(g.count for g in found), capped=capped,
                          conversations=len(found), groups=shown, page=page,
                          next_page=page + 1 if len(found) > start + GROUPS_PER_PAGE else None)


def _fill_hits(query: Query, groups: list[Group]):
    """Each shown group's best rows (the latest first among equals), as hits with
    snippets: one snippet pass and one lineage query for the whole page."""
    chosen = []
    for group in groups:
        best = sorted(group.rows, key=lambda sr: (-sr[0], -sr[1][1]))[:HITS_PER_GROUP]
        chosen += [(group, row) for _, row in best]
        group.rows = []
    pieces = highlight.snippets([highlight.index_text(row[-1]) for _, row in chosen], query)
    held = lineage.holders([(group.conversation_id, row[1]) for group, row in chosen])
    for (group, r), snippet, holders in zip(chosen, pieces, held, strict=True):
        group.hits.append(reads.Hit(
            conversation_id=group.conversation_id, title=group.title, subject=group.subject,
            namespace=group.namespace, position=r[1], kind=r[6], created_at=reads._aware(r[7]),
            snippet=snippet, conversations=holders))


# ---- titles and subjects


def _has_words(query: Query, text: str) -> bool:
    """Whether every clause of `query` has a term in `text` (case-insensitive text, not
    stems), and no excluded term is there."""
    low = text.lower()
    if any(t.text.lower() in low for t in query.excluded):
        return False
    return all(any(t.text.lower() in low for t in clause) for clause in query.clauses)


def title_matches(query: Query, filters: reads.Filters, *, exclude: set) -> list[Group]:
    """Conversations without a ranked row whose title or subject has the words (a row
    filter asks about rows, so with one none is added)."""
    if filters.kinds or filters.since is not None or filters.before is not None:
        return []
    found = Conversation.objects.live()
    for clause in query.clauses:
        either = Q()
        for term in clause:
            either |= Q(title__icontains=term.text) | Q(subject__icontains=term.text)
        found = found.filter(either)
    for term in query.excluded:
        found = found.exclude(Q(title__icontains=term.text) | Q(subject__icontains=term.text))
    if filters.subject is not None:
        found = found.filter(subject_norm=normalize_subject(filters.subject))
    if filters.namespace is not None:
        found = found.filter(namespace=filters.namespace)
    if filters.conversation_id is not None:
        found = found.filter(pk=filters.conversation_id)
    rows = found.order_by("-last_activity_at").values_list("id", "title", "subject", "namespace")[:TITLE_MATCHES]
    return [Group(conversation_id=cid, title=title, subject=subject, namespace=namespace, title_match=True)
            for cid, title, subject, namespace in rows if cid not in exclude]
