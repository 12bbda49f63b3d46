"""GET /api/v1/search: message content across every conversation, in keyset pages."""

from ninja import Query, Router, Schema

from conversations import keyset, params
from conversations.api_schemas import ListOut, errors_doc, example_doc
from conversations.apiauth import scope
from conversations.project_http import page_url

from . import meaning, ranked
from .params import parse_search
from .reads import BadSearch, search_messages

router = Router(tags=["search"])


class HitConversation(Schema):
    id: str
    title: str
    page_url: str


class SearchHit(Schema):
    conversation_id: str
    conversation_title: str
    subject: str
    namespace: str
    position: int
    kind: str
    created_at: str
    snippet: str
    highlights: list[list[int]]
    url: str
    page_url: str
    # mode=meaning: the cosine with the query; mode=both: the fused score (null for words).
    score: float | None = None
    # Which kinds of search found the row: "words", "meaning" (mode=both may say both).
    matched: list[str] = []
    # The row is the same bytes in each (the one that wrote it first, then the forks
    # that copied it): a row shared by a parent and its forks is one hit.
    conversations: list[HitConversation]


class SearchPage(ListOut):
    query: str
    items: list[SearchHit]
    # order=relevance: the matching rows counted (at least this many when
    # total_is_lower_bound); order=newest counts nothing (null).
    total: int | None = None
    total_is_lower_bound: bool | None = None


def hit_json(request, hit) -> dict:
    cid = str(hit.conversation_id)
    return {
        "conversation_id": cid,
        "conversation_title": hit.title,
        "subject": hit.subject,
        "namespace": hit.namespace,
        "position": hit.position,
        "kind": hit.kind,
        "created_at": params.iso(hit.created_at),
        "snippet": hit.snippet_text,
        "highlights": [list(span) for span in hit.highlights],
        "url": request.build_absolute_uri(f"/api/v1/conversations/{cid}/messages?after={hit.position - 1}&limit=1"),
        "page_url": page_url(request, f"/conversations/{cid}/?at={hit.position}#p{hit.position}"),
        "conversations": [
            {"id": str(c.id), "title": c.title,
             "page_url": page_url(request, f"/conversations/{c.id}/?at={hit.position}#p{hit.position}")}
            for c in hit.conversations
        ],
        "score": hit.score,
        "matched": list(hit.matched) if hit.matched else ["words"],
    }


@router.get(
    "/search",
    operation_id="search_messages",
    summary="Search message content",
    response={200: SearchPage, **errors_doc(400)},
    openapi_extra=example_doc(200, {
        "query": "refund", "next": None, "next_url": None,
        "items": [{"conversation_id": "3f1c2a9e-8d4b-4c61-9a57-0b7e6f2d1c88", "conversation_title": "Order 7",
                   "subject": "customer:42", "namespace": "", "position": 12, "kind": "user",
                   "created_at": "2026-05-04T09:30:12.512301Z", "snippet": "…I want a refund for order 7…",
                   "highlights": [[9, 15]],
                   "url": "http://127.0.0.1:8000/api/v1/conversations/3f1c2a9e-8d4b-4c61-9a57-0b7e6f2d1c88/messages?after=11&limit=1",
                   "page_url": "http://127.0.0.1:8000/conversations/3f1c2a9e-8d4b-4c61-9a57-0b7e6f2d1c88/?at=12#p12",
                   "conversations": [
                       {"id": "3f1c2a9e-8d4b-4c61-9a57-0b7e6f2d1c88", "title": "Order 7",
                        "page_url": "http://127.0.0.1:8000/conversations/3f1c2a9e-8d4b-4c61-9a57-0b7e6f2d1c88/?at=12#p12"},
                       {"id": "a0c5e7d1-2b3f-4e8a-9c6d-1f2e3d4c5b6a", "title": "Order 7 (fork at 14)",
                        "page_url": "http://127.0.0.1:8000/conversations/a0c5e7d1-2b3f-4e8a-9c6d-1f2e3d4c5b6a/?at=12#p12"}]}],
    }),
)
@scope("read")
def search(
    request,
    q: str = Query(..., max_length=300, description=(
        'Words (all must match; stems match too), "a phrase", a prefix* , a OR b, -excluded.'), example="refund"),
    kind: list[str] | None = Query(None, description="Only these message kinds (repeat the parameter)."),
    subject: str | None = Query(None, max_length=300, description="Only conversations about this subject."),
    namespace: str | None = Query(None, max_length=300),
    since: str | None = Query(None, alias="from", description="Rows written at or after: YYYY-MM-DD or ISO time."),
    to: str | None = Query(None, description="Rows written before the end of this day (or before this time)."),
    conversation: str | None = Query(None, description="Only inside this conversation (its id)."),
    cursor: str | None = Query(None, max_length=200, description="The `next` value of the previous page."),
    limit: int = Query(20, ge=1, le=100),
    order: str = Query("newest", max_length=20, description=(
        "newest (the default): newest conversation first, latest row first, every hit in keyset pages. "
        "relevance: conversations best match first, each with its few best rows (`limit` does not apply), "
        "and `total`.")),
    mode: str = Query("words", max_length=20, description=(
        "words (the default): the words as written. meaning: the rows nearest the query by meaning (an "
        "embedding model; binary codes for a first pass, exact vectors to rank), best first, each with its "
        "cosine as `score`. both: words and meaning fused by reciprocal rank; `matched` says which found "
        "each row. `order` applies to words only.")),
):
    """Newest conversation first, latest row first within one; each hit with a snippet
    (plain text), the character spans of the matched words, and `conversations`: every
    conversation holding the row (the one that wrote it, then forks that copied it; a
    shared row is one hit). Needs `read`."""
    if meaning.parse_mode(mode) != "words":
        return _by_meaning(request, q, kind, subject, namespace, since, to, conversation, cursor, limit, mode)
    if ranked.parse_order(order, default="newest") == "relevance":
        return _ranked(request, q, kind, subject, namespace, since, to, conversation, cursor)
    data = {"q": q, "subject": subject, "namespace": namespace, "from": since, "to": to,
            "conversation": conversation, "cursor": cursor, "limit": str(limit)}
    parsed = parse_search(data, kinds=kind or [])
    page = search_messages(parsed.query, filters=parsed.filters, cursor=parsed.cursor, limit=parsed.limit)
    next_url = keyset.next_url(request, page.next_cursor, keyset.same_query(request))
    return keyset.listing([hit_json(request, h) for h in page.hits], page.next_cursor, next_url,
                          query=parsed.raw_query, total=None, total_is_lower_bound=None)


RANKED_CURSOR = "search-ranked"
MEANING_CURSOR = "search-meaning"


def _by_meaning(request, q, kind, subject, namespace, since, to, conversation, cursor, limit, mode):
    """mode=meaning or both: one page of the nearest rows (search.meaning), best first."""
    page = 1
    if cursor:
        try:
            (page,) = params.decode_cursor(cursor, MEANING_CURSOR, int)
        except ValueError as exc:
            raise BadSearch(f"cursor {exc}", field="cursor", code="invalid_cursor") from None
    data = {"q": q, "subject": subject, "namespace": namespace, "from": since, "to": to,
            "conversation": conversation}
    parsed = parse_search(data, kinds=kind or [], words=False)
    found = meaning.search(q, filters=parsed.filters, mode=mode, page=page, limit=limit)
    next_cursor = keyset.cursor_of(MEANING_CURSOR, found.next_page) if found.next_page else None
    return keyset.listing([hit_json(request, h) for h in found.hits], next_cursor,
                          keyset.next_url(request, next_cursor, keyset.same_query(request)),
                          query=q, total=None, total_is_lower_bound=None)


def _ranked(request, q, kind, subject, namespace, since, to, conversation, cursor):
    """order=relevance: one page of conversations (search.ranked), their best rows as items."""
    page = 1
    if cursor:
        try:
            (page,) = params.decode_cursor(cursor, RANKED_CURSOR, int)
        except ValueError as exc:
            raise BadSearch(f"cursor {exc}", field="cursor", code="invalid_cursor") from None
    data = {"q": q, "subject": subject, "namespace": namespace, "from": since, "to": to,
            "conversation": conversation}
    parsed = parse_search(data, kinds=kind or [])
    results = ranked.search_grouped(parsed.query, filters=parsed.filters, page=page)
    items = [hit_json(request, h) for g in results.groups for h in g.hits]
    next_cursor = keyset.cursor_of(RANKED_CURSOR, results.next_page) if results.next_page else None
    return keyset.listing(items, next_cursor, keyset.next_url(request, next_cursor, keyset.same_query(request)),
                          query=parsed.raw_query, total=results.total, total_is_lower_bound=results.capped)

