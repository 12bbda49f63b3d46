"""How every router of the agent API reads a request body: strictly, one way.

Bodies are read here rather than by ninja so that every kind of bad body gets
its own clear 4xx in the one error shape: a content type other than JSON 415,
a body that is not JSON (or is empty) 400, a body larger than the server takes
413, the wrong shape 422 naming the field. `"5"` is not an integer, an unknown
field is refused, and text no database can store (NUL where it would land in a
text column, unpaired surrogates anywhere) is refused before any handler runs.
"""

from datetime import datetime
from typing import Annotated, TypeVar

from django.core.exceptions import RequestDataTooBig
from django.http.request import RawPostDataException
from pydantic import BaseModel, ConfigDict, PlainValidator, ValidationError, WithJsonSchema

from . import params
from .errors import BadRequest, BodyTooLarge, InvalidInput, UnsupportedMediaType
from .message_schema import describe_validation_error

M = TypeVar("M", bound=BaseModel)


class StrictBody(BaseModel):
    """A request body: unknown fields are errors, never ignored."""

    model_config = ConfigDict(extra="forbid")


def _instant(value) -> datetime:
    if not isinstance(value, str):
        raise ValueError("must be a date and time as text, like 2026-01-31T12:00:00Z")
    return params.parse_instant(value, require_tz=True)


# A moment in a JSON body: ISO 8601 text with a time zone, refused (422) when it
# overflows on the way to UTC instead of failing in the database driver.
Instant = Annotated[
    datetime,
    PlainValidator(_instant),
    WithJsonSchema({"type": "string", "format": "date-time", "example": "2026-01-31T12:00:00Z"}),
]


def read_json(request, *, allow_nul: bool = False) -> dict:
    """The body as a JSON object, or the 4xx that says what is wrong with it."""
    content_type = (request.content_type or "").lower()
    # No Content-Type at all is read as JSON; any other type than JSON is refused.
    if content_type and content_type != "application/json" and not content_type.endswith("+json"):
        raise UnsupportedMediaType(
            f"send the body as JSON with 'Content-Type: application/json' (got {content_type[:80]!r})",
            field="body")
    try:
        raw = request.body
    except RequestDataTooBig:
        raise BodyTooLarge("the request body is larger than this server accepts", field="body") from None
    except RawPostDataException:
        raise UnsupportedMediaType("the body was read as a form; send it as application/json", field="body") from None
    if not raw.strip():
        raise BadRequest("the request body is empty; send a JSON object", field="body", code="invalid_json")
    try:
        data = params.strict_json(raw)
    except (ValueError, RecursionError) as exc:
        raise BadRequest(f"the request body is not valid JSON: {exc}", field="body", code="invalid_json") from None
    if not isinstance(data, dict):
        raise InvalidInput(f"the request body must be a JSON object, not {type(data).__name__}", field="body")
    params.check_tree(data, allow_nul=allow_nul)
    return data


def parse_body(model: type[M], data: dict) -> M:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        text, field = describe_validation_error(exc)
        raise InvalidInput(text, field=field) from None


def read_body(request, model: type[M]) -> M:
    """read_json, then validate against `model` (strict types, no unknown fields)."""
    return parse_body(model, read_json(request))
