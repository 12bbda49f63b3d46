import tempfile

from django.conf import settings
from django.core.handlers.wsgi import LimitedStream
from django.http import HttpResponse
from django.shortcuts import resolve_url

from . import bodies
from .connections import close_after_answer
from .http import API_PREFIX, error_json


class HtmxLoginRedirectMiddleware:
    """Send an htmx request whose session expired to the login page as a whole page.

    htmx follows a 302 inside its XHR and would swap the login form into whatever
    element asked for a fragment; HX-Redirect makes it load the page instead.
    """

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        if (
            getattr(request, "htmx", False)
            and response.status_code == 302
            and response.get("Location", "").startswith(resolve_url(settings.LOGIN_URL))
        ):
            location = response["Location"]
            response.status_code = 204
            response.content = b""
            del response["Location"]
            response["HX-Redirect"] = location
        return response


# Longest path and query string served (as sent, percent-encoded); gunicorn itself
# refuses request lines over limit_request_line (8190, memoryui/gunicorn_conf.py)
# with its own plain answer, so this stays under that.
MAX_URL_LENGTH = 8000
_API_ERROR_MESSAGES = {
    400: "the request could not be read",
    403: "not allowed",
    404: "no API endpoint at this address",
    405: "this endpoint does not answer that method",
    413: "the request body is larger than this server accepts",
    414: f"the address is longer than this server accepts ({MAX_URL_LENGTH} characters)",
    500: "the server failed on this request; it is logged with its traceback",
}


class ApiErrorShapeMiddleware:
    """Everything under /api/ answers in the API's JSON error shape.

    ninja answers a wrong method with an HTML 405, and Django its 404, 400 and 500
    pages as HTML; agents parse JSON. This rewrites those, answers an oversized
    body (413) and an overlong address (414) before anything reads them, and lets
    HEAD reach a GET endpoint (the body is dropped on the way out).
    """

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        is_api = request.path.startswith(API_PREFIX)
        if len(request.get_full_path()) > MAX_URL_LENGTH:
            if is_api:
                return error_json(414, _API_ERROR_MESSAGES[414])
            return HttpResponse(_API_ERROR_MESSAGES[414] + "\n", status=414, content_type="text/plain; charset=utf-8")
        # Pages take files (the import page), the API one JSON body, its import a transcript of any
        # size (conversations/bodies.py): each has its own limit.
        body_limit = bodies.limit_of(request) if is_api else settings.MEMORYUI_MAX_UPLOAD_BYTES
        if _is_chunked(request) and not _buffer_chunked_body(request, body_limit):
            close_after_answer()  # the rest of the body is still on the connection
            if is_api:
                return error_json(413, bodies.too_large_message(request))
            message = _API_ERROR_MESSAGES[413] + f" ({body_limit} bytes)"
            return HttpResponse(message + "\n", status=413, content_type="text/plain; charset=utf-8")
        if not is_api:
            return self.get_response(request)
        if _declared_length(request) > body_limit:
            close_after_answer()
            return error_json(413, bodies.too_large_message(request))
        head = request.method == "HEAD"
        if head:
            request.method = "GET"
        try:
            response = self.get_response(request)
        finally:
            bodies.close(request)
        if response.status_code >= 400 and not _is_json(response):
            allow = response.get("Allow")
            response = error_json(response.status_code,
                                 _API_ERROR_MESSAGES.get(response.status_code, response.reason_phrase or "error"))
            if allow:
                response["Allow"] = allow
        if head:
            request.method = "HEAD"
            if not response.streaming:
                response["Content-Length"] = str(len(response.content))
                response.content = b""
        return response


def _is_chunked(request) -> bool:
    return (not request.META.get("CONTENT_LENGTH")
            and "chunked" in request.META.get("HTTP_TRANSFER_ENCODING", "").lower())


def _buffer_chunked_body(request, limit: int) -> bool:
    """Read a chunked body (gunicorn hands it over de-chunked, without a Content-Length) up to
    `limit` bytes and give it to Django as a body of known length; False when it is longer.

    Django reads exactly CONTENT_LENGTH bytes of a WSGI body, so without this a chunked
    body (httpx sends one for a generator, curl for `-T -`) read as empty: 400 "the
    request body is empty". Past the limit nothing more is read, as for a declared length.
    """
    stream, size = request.environ["wsgi.input"], 0
    # In memory up to Django's in-memory limit, past it in an unnamed temporary file (gone when closed).
    body = tempfile.SpooledTemporaryFile(max_size=min(settings.DATA_UPLOAD_MAX_MEMORY_SIZE, bodies.SPOOL_IN_MEMORY))
    while size <= limit:
        block = stream.read(min(64 * 1024, limit + 1 - size))
        if not block:
            break
        body.write(block)
        size += len(block)
    if size > limit:
        body.close()
        return False
    body.seek(0)
    request.META["CONTENT_LENGTH"] = str(size)
    request._stream = LimitedStream(body, size)
    return True


def _declared_length(request) -> int:
    try:
        return int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        return 0


def _is_json(response) -> bool:
    content_type = response.get("Content-Type", "").split(";")[0].strip().lower()
    return content_type == "application/json" or content_type.endswith("+json")


# Scripts, styles, fonts and images from this app's own static files only: no inline
# script or event handler, no eval (htmx's hx-on and trigger filters included), no
# other origin. The pages are built to satisfy it (tests/test_csp_browser.py).
CONTENT_SECURITY_POLICY = "; ".join([
    "default-src 'self'",
    "script-src 'self'",
    "style-src 'self'",
    "img-src 'self' data:",
    "font-src 'self'",
    "connect-src 'self'",
    "object-src 'none'",
    "base-uri 'none'",
    "form-action 'self'",
    "frame-ancestors 'none'",
])


class SecurityHeadersMiddleware:
    """The Content-Security-Policy on every answer, and `Cache-Control: no-store` on
    every answer but the static files. Pages, fragments, downloads and API answers
    (errors included) hold conversations, facts, subjects or logs, and no browser or
    proxy cache may keep a copy; deciding per view would leave the next view out.
    Static files (whitenoise, under STATIC_URL) hold nothing personal and keep their
    own caching headers."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        response.headers.setdefault("Content-Security-Policy", CONTENT_SECURITY_POLICY)
        if not request.path.startswith(settings.STATIC_URL) and "no-store" not in response.get("Cache-Control", ""):
            response["Cache-Control"] = "no-store"
        return response
