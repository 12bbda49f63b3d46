"""Domain errors raised by the store and the reads.

Each carries a stable machine code, a sentence a person can act on, and the
field it is about (when there is one). The API and the views map them to 4xx
answers in one place; nothing below them knows about HTTP.
"""


class StoreError(Exception):
    code = "store_error"
    status = 400
    # Seconds after which sending the same request again may succeed (the API sends it as Retry-After).
    retry_after: int | None = None

    def __init__(self, message: str, *, field: str | None = None, code: str | None = None):
        super().__init__(message)
        self.message = message
        self.field = field
        if code:
            self.code = code

    def as_dict(self) -> dict:
        error = {"code": self.code, "message": self.message}
        if self.field:
            error["field"] = self.field
        return error


class NotFound(StoreError):
    code = "not_found"
    status = 404


class InvalidMessage(StoreError):
    code = "invalid_message"
    status = 422


class MessageTooLarge(StoreError):
    code = "message_too_large"
    status = 413


class PositionOutOfRange(StoreError):
    code = "position_out_of_range"
    status = 422


class CheckpointBeforeLatest(StoreError):
    code = "checkpoint_before_latest"
    status = 409


class CheckpointSplitsToolCall(StoreError):
    """A fold there would leave a tool result in the active view without its call."""

    code = "checkpoint_splits_tool_call"
    status = 409


class Conflict(StoreError):
    code = "conflict"
    status = 409


class ImportInProgress(Conflict):
    """Another request is importing the same source (or session) right now. Nothing was
    written; the same request sent again once that import has finished succeeds (it
    then finds the source imported, or appends what is new)."""

    code = "import_in_progress"
    retry_after = 2


class InvalidInput(StoreError):
    code = "invalid_input"
    status = 422


# What is wrong with a request body as a whole (jsonbody.read_json raises them).


class BadRequest(StoreError):
    code = "bad_request"
    status = 400


class BodyTooLarge(StoreError):
    code = "body_too_large"
    status = 413


class UnsupportedMediaType(StoreError):
    code = "unsupported_media_type"
    status = 415


class Forbidden(StoreError):
    """A known caller acting outside what it was given (a namespace its key is not for)."""

    code = "forbidden"
    status = 403


class NothingToSend(StoreError):
    """An active view with nothing a model could be sent (no message, no summary): no request
    body would be valid, so none is made."""

    code = "nothing_to_send"
    status = 409
