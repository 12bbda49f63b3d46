"""Reading a search request (page or API) into a query, filters, cursor and limit.

Both doors call `parse_search`, so a bad date or kind reads the same on the
page (a 400 page naming the field) and in the API (the one JSON error shape).
"""

from dataclasses import dataclass
from datetime import date, datetime, time, timedelta, timezone as dt_timezone

from conversations.errors import NotFound
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
    if "\x00" in value:
        raise BadSearch(f"{field} must not contain NUL characters", field=field)
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
        if len(value) == 10:
            day = date.fromisoformat(value)
            moment = datetime.combine(day, time.min, tzinfo=dt_timezone.utc)
            return moment + timedelta(days=1) if end else moment
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=dt_timezone.utc)
        return moment.astimezone(dt_timezone.utc)
    except (ValueError, OverflowError):
        raise BadSearch(f"{field} must be a date (YYYY-MM-DD) or an ISO date-time, not {value[:40]!r}",
                        field=field) from None


def parse_limit(value, *, default: int = PAGE, maximum: int = 100) -> int:
    if value in (None, ""):
        return default
    try:
        limit = int(str(value).strip())
    except ValueError:
        raise BadSearch(f"limit must be a whole number, not {str(value)[:40]!r}", field="limit") from None
    if not 1 <= limit <= maximum:
        raise BadSearch(f"limit must be between 1 and {maximum}", field="limit")
    return limit


def parse_search(data, *, kinds=None, conversation_id=None) -> SearchRequest:
    """`data`: a QueryDict or a dict of strings (q, subject, namespace, from, to,
    conversation, cursor, limit); `kinds`: the list of `kind` values."""
    raw_query = data.get("q") or ""
    query = parse_query(raw_query)
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
