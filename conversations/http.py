"""The doors' side of errors and answers: one JSON error body, one code table, one page handler.

`errors.py` names what went wrong and knows no HTTP. This module is where that
becomes an answer, for every door:

- the agent API (memoryui/api.py's exception handlers, the middleware that refuses a
  request before ninja sees it, the idempotency middleware) answers with
  `error_body()`: {"error": {"code": …, "message": …, "field": …}}, the code from the
  one table `ERROR_CODES` when the error has none of its own;
- a page whose view lets a `StoreError` escape gets one page (`error_page`, wired in by
  `StoreErrorPageMiddleware`): 404 for what does not exist, 409 for a conflict, 400
  for anything else the person sent, with `Vary` set here once.

Handlers return data that ninja serializes through their `*Out` schemas; `json_response`
is for an answer that must exist before its handler returns (an import records it with its
last write: imports/api.py), and for the appends' two-field answers, the API's hottest,
whose validation and rendering by ninja cost twice the answer built here (the bytes are
the same: tests/test_api_append_answer.py). `absolute_url` builds the addresses answers carry.
"""

from django.http import Http404, JsonResponse
from django.shortcuts import render
from django.utils.cache import patch_vary_headers

from .errors import NotFound, StoreError
from .models import Conversation, parse_conversation_id

API_PREFIX = "/api/"

# The code an error answer carries when nothing more specific names it. One table: the
# middleware, ninja's handlers and the clients (clients/python, clients/typescript) agree on it.
ERROR_CODES = {
    400: "bad_request", 401: "unauthenticated", 403: "forbidden", 404: "not_found",
    405: "method_not_allowed", 406: "not_acceptable", 408: "request_timeout", 409: "conflict",
    413: "body_too_large", 414: "uri_too_long", 415: "unsupported_media_type", 422: "invalid_input",
    429: "too_many_requests", 500: "internal_error",
}


def code_for(status: int) -> str:
    return ERROR_CODES.get(status, "error")


def error_body(code: str, message: str, field: str | None = None, **extra) -> dict:
    """The one JSON error shape; `extra` carries what an error adds (a deletion request's suggestions)."""
    error = {"code": code, "message": message}
    if field:
        error["field"] = field
    error.update(extra)
    return {"error": error}


def store_error_body(exc: StoreError) -> dict:
    # as_dict: code, message, field, and whatever a StoreError subclass adds to them.
    return {"error": exc.as_dict()}


def json_response(data, status: int = 200) -> JsonResponse:
    """A JSON answer with text as sent (no \\u escapes for non-ASCII), lists allowed at the top."""
    return JsonResponse(data, status=status, safe=False, json_dumps_params={"ensure_ascii": False})


def error_json(status: int, message: str, *, code: str | None = None, field: str | None = None,
               retry_after: int | None = None) -> JsonResponse:
    """An error answer built outside ninja's handlers (middleware, idempotency)."""
    response = JsonResponse(error_body(code or code_for(status), message, field), status=status)
    if retry_after:
        response["Retry-After"] = str(retry_after)
    return response


def absolute_url(request, path: str) -> str:
    return request.build_absolute_uri(path)


# -- pages ------------------------------------------------------------------------------


def conversation_or_404(conversation_id) -> Conversation:
    """The live conversation a page is about, or the site's 404 page."""
    try:
        return Conversation.objects.get_live(parse_conversation_id(conversation_id))
    except NotFound as exc:
        raise Http404(exc.message) from None


def position_or_404(conversation: Conversation, position: int) -> int:
    if position >= conversation.next_position:
        raise Http404(f"position {position} does not exist in this conversation")
    return position


PAGE_HEADINGS = {
    400: "That address has a bad parameter",
    404: "Not found",
    409: "That cannot be done right now",
}


def page_status(exc: StoreError) -> int:
    """A page answers 404 for what does not exist, 409 for a conflict, 400 for the rest."""
    return exc.status if exc.status in (404, 409) else 400


def error_page(request, exc: StoreError):
    status = page_status(exc)
    response = render(request, "conversations/bad_request.html",
                      {"error": exc, "heading": PAGE_HEADINGS[status]}, status=status)
    # Pages answer htmx with fragments at the same URL: caches key on these headers too.
    patch_vary_headers(response, ("HX-Request", "HX-Target"))
    return response


class StoreErrorPageMiddleware:
    """A `StoreError` a page view lets escape becomes `error_page` (the API maps its own)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_exception(self, request, exception):
        if isinstance(exception, StoreError) and not request.path.startswith(API_PREFIX):
            return error_page(request, exception)
        return None
