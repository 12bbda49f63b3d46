"""The one NinjaAPI of the project, mounted at /api/v1/.

Each app contributes a Router; domain errors are mapped to the one JSON error
shape here, once: {"error": {"code": …, "message": …, "field": …}}.
"""

from django.core.exceptions import PermissionDenied
from django.http import Http404
from ninja import NinjaAPI
from ninja.errors import AuthenticationError, HttpError, ValidationError
from ninja.parser import Parser

from conversations import idempotency
from conversations.apiauth import ApiKeyAuth, ScopeError, SessionReadAuth, public
from conversations.errors import InvalidInput, StoreError
from conversations.http import code_for, error_body, store_error_body
from conversations.rawjson import JsonRenderer


class MemoryuiAPI(NinjaAPI):
    def get_content_type(self) -> str:
        # JSON is UTF-8 by definition (RFC 8259): no charset, as Django's JsonResponse answers.
        return self.renderer.media_type

    def get_openapi_schema(self, **kwargs):
        # Every POST takes an Idempotency-Key (conversations/idempotency.py, a middleware).
        return _document_transport_errors(idempotency.document(super().get_openapi_schema(**kwargs)))


def _document_transport_errors(schema):
    """Any operation may be refused before it runs (conversations/middleware.py):
    414 for an address over the limit, 413 for a body over it."""
    error = {"$ref": "#/components/schemas/ErrorOut"}
    if "ErrorOut" not in schema.get("components", {}).get("schemas", {}):
        return schema
    for operations in schema.get("paths", {}).values():
        for method, operation in operations.items():
            responses = operation.setdefault("responses", {})
            refusals = {414: "The address is longer than the server accepts."}
            if method in ("post", "put", "patch"):
                refusals[413] = "The request body is larger than the server accepts."
            for status, description in refusals.items():
                if status not in responses and str(status) not in responses:
                    responses[status] = {"description": description,
                                         "content": {"application/json": {"schema": error}}}
    return schema


class OneValueParser(Parser):
    """A query parameter that takes one value, sent twice, is refused rather than read as its
    last value: `?subject=a&subject=b` would otherwise list b's conversations and say nothing."""

    def parse_querydict(self, data, list_fields, request):
        for key in data.keys():
            if key not in list_fields and len(data.getlist(key)) > 1:
                raise InvalidInput(f"the query parameter {key} takes one value; it was given "
                                   f"{len(data.getlist(key))}", field=key)
        return super().parse_querydict(data, list_fields, request)


api = MemoryuiAPI(
    title="memoryui",
    version="1",
    description="The append-only memory of LLM agents: conversations, messages, checkpoints, forks, facts, "
                "task state and actions.",
    urls_namespace="api",
    auth=[ApiKeyAuth(), SessionReadAuth()],
    docs_url="/docs",
    openapi_url="/openapi.json",
    renderer=JsonRenderer(),
    parser=OneValueParser(),
)


def error_response(request, status: int, code: str, message: str, field: str | None = None):
    return api.create_response(request, error_body(code, message, field), status=status)


@api.exception_handler(StoreError)
def _store_error(request, exc: StoreError):
    response = api.create_response(request, store_error_body(exc), status=exc.status)
    if exc.retry_after:
        response["Retry-After"] = str(exc.retry_after)
    return response


@api.exception_handler(ValidationError)
def _validation_error(request, exc: ValidationError):
    errors = exc.errors or []
    parts, field = [], None
    for err in errors:
        loc = [str(p) for p in err.get("loc", ()) if p not in ("body", "query", "path", "payload", "form")]
        name = ".".join(loc)
        field = field or name or None
        msg = str(err.get("msg", "invalid")).removeprefix("Value error, ")
        parts.append(f"{name}: {msg}" if name else msg)
    return error_response(request, 422, "invalid_input", "; ".join(parts) or "invalid input", field)


@api.exception_handler(AuthenticationError)
def _unauthenticated(request, exc):
    has_key = request.headers.get("Authorization", "").strip().lower().startswith("bearer ")
    message = (
        "this API key is not valid (unknown, mistyped or revoked)"
        if has_key
        else "send a valid API key as 'Authorization: Bearer <key>'"
    )
    response = error_response(request, 401, "unauthenticated", message)
    response["WWW-Authenticate"] = 'Bearer realm="memoryui"'
    return response


@api.exception_handler(ScopeError)
def _missing_scope(request, exc: ScopeError):
    return error_response(request, 403, "forbidden", str(exc))


@api.exception_handler(PermissionDenied)
def _forbidden(request, exc):
    return error_response(request, 403, "forbidden", str(exc) or "not allowed")


@api.exception_handler(Http404)
def _not_found(request, exc):
    return error_response(request, 404, "not_found", str(exc) or "not found")


@api.exception_handler(HttpError)
def _http_error(request, exc: HttpError):
    if exc.status_code == 403 and str(exc).startswith("CSRF"):
        # A logged-in browser session writing without the page's token.
        return error_response(request, 403, "csrf_failed",
                              "CSRF check failed: send the page's token as the X-CSRFToken header, or use an API key")
    return error_response(request, exc.status_code, code_for(exc.status_code), str(exc))


from conversations.api import router as conversations_router  # noqa: E402
from conversations.api_projects import router as projects_router  # noqa: E402
from conversations.facts.api import router as facts_router  # noqa: E402
from conversations.imports.api import router as imports_router  # noqa: E402
from conversations.langgraph.api import router as langgraph_router  # noqa: E402
from conversations.ledger.api import router as ledger_router  # noqa: E402
from conversations.proofs.api import router as proofs_router  # noqa: E402
from conversations.retention.api import router as retention_router  # noqa: E402
from conversations.search.api import router as search_router  # noqa: E402

api.add_router("", conversations_router)
api.add_router("", facts_router)
api.add_router("", ledger_router)
api.add_router("", retention_router)
api.add_router("", search_router)
api.add_router("", imports_router)
api.add_router("", langgraph_router)
api.add_router("", proofs_router)
api.add_router("", projects_router)

# Keep this last: any other path under /api/v1/ answers 404 in the API's JSON
# shape rather than with the site's HTML error page (ids with a slash land here).
from ninja import Router  # noqa: E402

_fallback = Router()


@_fallback.api_operation(["GET", "POST", "PUT", "PATCH", "DELETE"], "/{path:rest}", auth=None,
                         include_in_schema=False)
@public
def _no_such_endpoint(request, rest: str):
    return error_response(request, 404, "not_found", f"no API endpoint at {request.path[:200]!r}")


api.add_router("", _fallback)
