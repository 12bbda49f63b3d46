"""Reading a search request (page or API) into a query, filters, cursor and limit.

Both doors call `parse_search`, so a bad date or kind reads the same on the
page (a 400 page naming the field) and in the API (the one JSON error shape).
"""

from dataclasses import dataclass
from datetime import datetime

from conversations import params
from conversations.errors import NotFound, StoreError
from conversations.models import parse_conversation_id

from .query import Query, parse_query
from .reads import PAGE, BadSearch, Filters, check_kinds

TEXT_MAX = 300


@dataclass
class SearchRequest:
    query: Query
    raw_query: str
    filters: Filters
    cursor: str | None
    limit: int


def _text(value, field: str) -> str | None:
    if value is None:
        return None
    value = str(value).strip()
    try:
        params.check_text(value, field)
    except StoreError as exc:
        raise BadSearch(exc.message, field=field) from None
    if len(value) > TEXT_MAX:
        raise BadSearch(f"{field} is {len(value)} characters; at most {TEXT_MAX}", field=field)
    return value or None


def parse_moment(value, field: str, *, end: bool = False) -> datetime | None:
    """A date (YYYY-MM-DD, the whole day) or an ISO date-time; naive means UTC.

    `end` makes a plain date mean the end of that day (the start of the next),
    so ?to=2026-05-04 includes the 4th."""
    value = _text(value, field)
    if value is None:
        return None
    try:
        if end and len(value) == 10:
            # None after 9999-12-31: there is no later moment to stop before.
            return params.day_after(params.parse_day(value))
        return params.parse_instant(value)
    except ValueError as exc:
        raise BadSearch(f"{field} {exc}", field=field) from None


def parse_limit(value, *, default: int = PAGE, maximum: int = 100) -> int:
    if value in (None, ""):
        return default
    try:
        return params.parse_int(value, minimum=1, maximum=maximum)
    except ValueError as exc:
        raise BadSearch(f"limit {exc}", field="limit") from None


def parse_search(data, *, kinds=None, conversation_id=None, words: bool = True) -> SearchRequest:
    """`data`: a QueryDict or a dict of strings (q, subject, namespace, from, to,
    conversation, cursor, limit); `kinds`: the list of `kind` values. `words=False`: the
    query is free text for search by meaning, not the words syntax (its `query` is None)."""
    raw_query = data.get("q") or ""
    query = parse_query(raw_query) if words else None
    if not words and (len(raw_query) > TEXT_MAX or not raw_query.strip()):
        raise BadSearch(f"q must be 1 to {TEXT_MAX} characters", field="q")
    since = parse_moment(data.get("from"), "from")
    before = parse_moment(data.get("to"), "to", end=True)
    if since and before and since >= before:
        raise BadSearch("from must be before to", field="from")
    conversation = conversation_id if conversation_id is not None else _text(data.get("conversation"), "conversation")
    cid = None
    if conversation:
        try:
            cid = parse_conversation_id(conversation)
        except NotFound:
            raise BadSearch(f"conversation {str(conversation)[:40]!r} is not a conversation id",
                            field="conversation") from None
    filters = Filters(
        kinds=check_kinds([k for k in (kinds or []) if k]),
        subject=_text(data.get("subject"), "subject"),
        namespace=_text(data.get("namespace"), "namespace"),
        since=since,
        before=before,
        conversation_id=cid,
    )
    return SearchRequest(query=query, raw_query=raw_query.strip(), filters=filters,
                         cursor=_text(data.get("cursor"), "cursor"), limit=parse_limit(data.get("limit")))


def parse_page(value, *, maximum: int = 1000) -> int:
    """The page of grouped results (1 for the first)."""
    if value in (None, ""):
        return 1
    try:
        return params.parse_int(value, minimum=1, maximum=maximum)
    except ValueError as exc:
        raise BadSearch(f"page {exc}", field="page") from None
