"""Every request gets an id, a log line (MEMORYUI_LOG_FORMAT=json) and its metrics (when on).

The id is the proxy's `X-Request-ID` when it sent a sane one (a token of letters,
digits and `._:-`, at most 128 characters: it goes into logs verbatim, so nothing
that could forge a line or carry text), otherwise a new one; it is echoed in the
answer's `X-Request-ID`, and every log record written while the request is served
carries it (memoryui/logs.py).

First in MIDDLEWARE, so redirects and refusals made by the middleware after it are
counted and logged too.
"""

import logging
import re
import time
import uuid

from django.conf import settings
from django.urls import Resolver404, resolve

from conversations import metrics
from memoryui.logs import request_id

log = logging.getLogger("memoryui.request")

HEADER = "X-Request-ID"
_SANE = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")
REPLAYED_HEADER = "Idempotent-Replayed"


def _request_id(request) -> str:
    sent = request.META.get("HTTP_X_REQUEST_ID", "")
    return sent if _SANE.match(sent) else uuid.uuid4().hex


def _route(request) -> str:
    # The pattern, never the path: a path holds ids, and a label per id would never end.
    match = getattr(request, "resolver_match", None)
    if match is None:  # answered before the URL was resolved (an idempotent replay, a redirect, a 413)
        try:
            match = resolve(request.path_info)
        except Resolver404:
            return "unmatched"
    return match.route or "unmatched"


class RequestObservationMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response
        self.json_lines = settings.MEMORYUI_LOG_FORMAT == "json"

    def __call__(self, request):
        rid = _request_id(request)
        token = request_id.set(rid)
        started = time.monotonic()
        try:
            response = self.get_response(request)
            seconds = time.monotonic() - started
            response[HEADER] = rid
            if metrics.enabled():
                route = _route(request)
                metrics.observe_request(route=route, method=request.method, status=response.status_code,
                                        seconds=seconds)
                if response.get(REPLAYED_HEADER) == "true":
                    metrics.replayed(getattr(request, "project_scope", None))
            if self.json_lines:
                route = _route(request)
                # The path without its query string (docs/operators.md, "What the server keeps about requests").
                log.info("request", extra={
                    "method": request.method, "path": request.path, "route": route,
                    "status": response.status_code, "duration_ms": round(seconds * 1000, 2),
                    "remote_addr": request.META.get("REMOTE_ADDR", ""),
                })
            return response
        finally:
            request_id.reset(token)
