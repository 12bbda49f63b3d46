"""Keyset pages, written once: fetch limit+1 rows, keep limit, say where the next page starts.

Every list of the JSON API answers `{"items": [...], "next": <cursor or null>}` (and
`next_url`, the same page as an address). `next` is an opaque cursor
(`params.encode_cursor`): the caller passes it back unchanged as `?cursor=`, with the
same filters, and gets the rows after it; null on the last page. A cursor of another
listing or a forged one is a 400 `invalid_cursor`. The pages that list the same way
(receipts, runs) use `take` too.
"""

from collections.abc import Callable, Iterable
from urllib.parse import urlencode

from . import params


def take(rows, limit: int) -> tuple[list, bool]:
    """The first `limit` of `rows` (a queryset or any sliceable) and whether more follow:
    one fetch of limit+1, never a count."""
    got = list(rows[: limit + 1])
    return got[:limit], len(got) > limit


def page(rows, limit: int, listing: str, key: Callable) -> tuple[list, str | None]:
    """`take`, and the cursor of the next page: `key(last row)` gives the values that
    `decode` reads back (instants, integers, UUIDs); None on the last page."""
    kept, more = take(rows, limit)
    return kept, (params.encode_cursor(listing, *key(kept[-1])) if more and kept else None)


def cursor_of(listing: str, *values) -> str:
    """The cursor of a page that ends at `values` (for pages that compute their own end)."""
    return params.encode_cursor(listing, *values)


def decode(value: str | None, listing: str, *kinds, field: str = "cursor") -> tuple | None:
    """The values of a cursor of `listing` (None when none was sent); 400 `invalid_cursor`
    for anything this listing did not give out."""
    if value is None or value == "":
        return None
    try:
        return params.decode_cursor(value, listing, *kinds)
    except ValueError as exc:
        raise params.BadParameter(f"{field} {exc}", field=field, code="invalid_cursor") from None


def next_url(request, cursor: str | None, query: Iterable[tuple[str, object]] = ()) -> str | None:
    """The next page as an address: this request's path with `query` (the filters, `limit`)
    and the cursor; None on the last page."""
    if cursor is None:
        return None
    pairs = [(k, v) for k, v in query if v is not None and k != "cursor"] + [("cursor", cursor)]
    return request.build_absolute_uri(f"{request.path}?{urlencode(pairs)}")


def same_query(request) -> list[tuple[str, str]]:
    """This request's query, repeated parameters kept, without its cursor."""
    return [(k, v) for k in request.GET for v in request.GET.getlist(k) if k != "cursor"]


def listing(items: list, next_cursor: str | None, url: str | None = None, **extra) -> dict:
    """The one list shape."""
    return {"items": items, "next": next_cursor, "next_url": url, **extra}
