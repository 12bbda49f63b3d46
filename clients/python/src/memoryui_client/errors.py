"""The API's errors as exceptions: each carries the API's `code`, `message` and `field`."""


class MemoryuiError(Exception):
    """An error answer of the API ({"error": {"code", "message", "field"}}), or a transport failure."""

    def __init__(self, message: str, *, code: str = "error", field: str | None = None, status: int | None = None,
                 response=None):
        super().__init__(message)
        self.message = message
        self.code = code
        self.field = field
        self.status = status
        self.response = response

    def __str__(self) -> str:
        where = f" [{self.field}]" if self.field else ""
        status = f"{self.status} " if self.status else ""
        return f"{status}{self.code}{where}: {self.message}"


class BadRequest(MemoryuiError):
    """400: the body is not JSON, a cursor is not one the API gave out."""


class Unauthenticated(MemoryuiError):
    """401: no key, or an unknown or revoked one."""


class Forbidden(MemoryuiError):
    """403: the key lacks the scope."""


class NotFound(MemoryuiError):
    """404: no such conversation (or fact, receipt)."""


class Conflict(MemoryuiError):
    """409: e.g. `position_conflict` (another writer appended first), `checkpoint_before_latest`,
    `external_id_taken`, `idempotency_key_in_progress`."""


class PositionConflict(Conflict):
    """409 `position_conflict`: expected_position was not the next position; nothing was written."""


class CheckpointSplitsToolCall(Conflict):
    """409 `checkpoint_splits_tool_call`: a fold at that position would leave a tool result
    without its call; the message names the nearest positions that are allowed."""


class PayloadTooLarge(MemoryuiError):
    """413: a message over the server's limit, or a body over its request size."""


class UnsupportedMediaType(MemoryuiError):
    """415."""


class InvalidInput(MemoryuiError):
    """422: the request is invalid; `field` names what (e.g. `messages.3.tool_call_id`)."""


class Unencodable(InvalidInput):
    """`unencodable`, raised by the client before anything is sent: a value is not JSON
    (a set, bytes, an object; NaN or infinity) or a string holds an unpaired surrogate,
    which is not UTF-8. `field` is its path in the body (`content`, `entries.3.output`)."""


class IdempotencyKeyReused(InvalidInput):
    """422 `idempotency_key_reused`: the key was used for a different request."""


class RateLimited(MemoryuiError):
    """429, after the retries ran out."""


class ServerError(MemoryuiError):
    """5xx, after the retries ran out (for 502/503/504)."""


class TransportError(MemoryuiError):
    """The server could not be reached or the connection broke, after the retries ran out."""


_BY_STATUS = {400: BadRequest, 401: Unauthenticated, 403: Forbidden, 404: NotFound, 409: Conflict,
              413: PayloadTooLarge, 415: UnsupportedMediaType, 422: InvalidInput, 429: RateLimited}
_BY_CODE = {"position_conflict": PositionConflict, "idempotency_key_reused": IdempotencyKeyReused,
            "checkpoint_splits_tool_call": CheckpointSplitsToolCall}


def error_from_response(response) -> MemoryuiError:
    """The typed exception for an error answer (an httpx.Response)."""
    code, message, field = f"http_{response.status_code}", response.reason_phrase or "error", None
    try:
        error = response.json().get("error") or {}
        code = error.get("code") or code
        message = error.get("message") or message
        field = error.get("field")
    except (ValueError, AttributeError):
        text = response.text[:300] if hasattr(response, "text") else ""
        message = text or message
    cls = _BY_CODE.get(code) or _BY_STATUS.get(response.status_code)
    if cls is None:
        cls = ServerError if response.status_code >= 500 else MemoryuiError
    return cls(message, code=code, field=field, status=response.status_code, response=response)
