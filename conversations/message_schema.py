"""The message schema of docs/DESIGN.md: one tagged union, discriminated by `kind`.

A message is validated and encoded once, by `encode_message`; the encoded text
is what the store keeps and what every read returns, byte for byte.
"""

import json
from typing import Annotated, Any, Literal

from django.conf import settings
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, field_validator, model_validator

from . import params
from .errors import InvalidInput, InvalidMessage, MessageTooLarge

CHAT_KINDS = ("user", "assistant", "tool", "system")
JOURNAL_KINDS = ("note", "thought", "heard", "said", "did", "woke")
KINDS = CHAT_KINDS + JOURNAL_KINDS


def _not_blank(value: str, what: str) -> str:
    if not value.strip():
        raise ValueError(f"{what} must not be blank")
    return value


class _Strict(BaseModel):
    # Unknown fields are an error: a typo in a field name must not be silently dropped.
    model_config = ConfigDict(extra="forbid", frozen=True)


class TextBlock(_Strict):
    type: Literal["text"]
    text: str

    @field_validator("text")
    @classmethod
    def _text_not_blank(cls, v: str) -> str:
        return _not_blank(v, "text")


class OtherBlock(BaseModel):
    """A non-text content block (image, document, …), kept as given."""

    model_config = ConfigDict(extra="allow", frozen=True)
    type: str

    @field_validator("type")
    @classmethod
    def _type_not_text(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("content block type must not be blank")
        if v == "text":
            raise ValueError("a text block needs non-blank text")
        return v


Content = str | list[Annotated[TextBlock | OtherBlock, Field(union_mode="left_to_right")]]


def _check_content(content: Any) -> Any:
    if isinstance(content, str):
        return _not_blank(content, "content")
    if isinstance(content, list) and not content:
        raise ValueError("content must not be an empty list")
    return content


class ToolCall(_Strict):
    id: str = Field(min_length=1)
    name: str = Field(min_length=1)
    arguments: dict[str, Any] | str = Field(default_factory=dict)


class _Message(_Strict):
    meta: dict[str, Any] | None = None


class UserMessage(_Message):
    kind: Literal["user"]
    content: Content

    _content = field_validator("content")(classmethod(lambda cls, v: _check_content(v)))


class AssistantMessage(_Message):
    kind: Literal["assistant"]
    content: Content | None = None
    tool_calls: list[ToolCall] | None = None

    @model_validator(mode="after")
    def _says_something(self):
        # An assistant turn may be only tool calls; otherwise it needs text.
        if self.tool_calls:
            if isinstance(self.content, list) and not self.content:
                raise ValueError("content must not be an empty list")
            return self
        if self.content is None:
            raise ValueError("an assistant message needs content or tool_calls")
        _check_content(self.content)
        return self


class ToolMessage(_Message):
    kind: Literal["tool"]
    tool_call_id: str = Field(min_length=1)
    name: str | None = None
    content: Content
    is_error: bool | None = None

    _content = field_validator("content")(classmethod(lambda cls, v: _check_content(v)))


class SystemMessage(_Message):
    kind: Literal["system"]
    content: Content

    _content = field_validator("content")(classmethod(lambda cls, v: _check_content(v)))


class _JournalMessage(_Message):
    text: str

    @field_validator("text")
    @classmethod
    def _text_not_blank(cls, v: str) -> str:
        return _not_blank(v, "text")


class NoteMessage(_JournalMessage):
    kind: Literal["note"]


class ThoughtMessage(_JournalMessage):
    kind: Literal["thought"]


class HeardMessage(_JournalMessage):
    kind: Literal["heard"]


class SaidMessage(_JournalMessage):
    kind: Literal["said"]


class DidMessage(_JournalMessage):
    kind: Literal["did"]


class WokeMessage(_JournalMessage):
    kind: Literal["woke"]


Message = Annotated[
    UserMessage | AssistantMessage | ToolMessage | SystemMessage
    | NoteMessage | ThoughtMessage | HeardMessage | SaidMessage | DidMessage | WokeMessage,
    Field(discriminator="kind"),
]

message_adapter: TypeAdapter = TypeAdapter(Message)


def describe_validation_error(exc: ValidationError) -> tuple[str, str | None]:
    """One sentence naming what is wrong, and the dotted field it is about."""
    parts = []
    first_field = None
    errors = exc.errors(include_url=False)
    # A value that matches no member of a union (content: text or blocks; arguments: an
    # object or text) gets one error per member. When one member got past the type check,
    # the others' "should be a valid string" only hides what is wrong.
    in_union = [any(_is_union_tag(str(p)) for p in err.get("loc", ())) for err in errors]
    if any(u and not err["type"].endswith("_type") for u, err in zip(in_union, errors, strict=True)):
        errors = [err for u, err in zip(in_union, errors, strict=True) if not (u and err["type"].endswith("_type"))]
    for err in errors:
        # The discriminator puts the kind name first in the location, and a union the name of
        # each member it tried ("str", "list[…]", "TextBlock"): neither is a field; drop them.
        loc = [str(p) for p in err.get("loc", ())]
        if loc and loc[0] in KINDS:
            loc = loc[1:]
        loc = [p for p in loc if not _is_union_tag(p)]
        field = ".".join(loc) or None
        if err.get("type") == "union_tag_invalid":
            msg = f"unknown kind {err.get('input', {}).get('kind')!r}; expected one of {', '.join(KINDS)}"
            field = "kind"
        elif err.get("type") == "union_tag_not_found":
            msg = "missing 'kind'; expected one of " + ", ".join(KINDS)
            field = "kind"
        elif err.get("type") == "extra_forbidden":
            msg = f"unknown field {field!r}"
        else:
            text = err.get("msg", "invalid").removeprefix("Value error, ")
            msg = f"{field}: {text}" if field else text
        if first_field is None:
            first_field = field
        parts.append(msg)
    return "; ".join(parts), first_field


_UNION_TAGS = {"str", "int", "float", "bool", "none", "TextBlock", "OtherBlock"}


def _is_union_tag(part: str) -> bool:
    # The schema's own fields are snake_case names and list indexes; a member's label is a
    # type ("str", "dict[str,any]", "list[union[TextBlock,OtherBlock]]") or a block model.
    return part in _UNION_TAGS or "[" in part


def max_message_bytes() -> int:
    return settings.MEMORYUI_MAX_MESSAGE_BYTES


def validate_message(data: Any):
    """Validate a dict, a JSON string/bytes or a model into a Message model."""
    try:
        if isinstance(data, BaseModel):
            data = data.model_dump(mode="json", exclude_none=True)
        if isinstance(data, (str, bytes, bytearray)):
            try:
                data = json.loads(data)
            except (ValueError, UnicodeDecodeError) as exc:
                raise InvalidMessage(f"message is not valid JSON: {exc}") from None
        if not isinstance(data, dict):
            raise InvalidMessage("a message must be a JSON object with a 'kind'")
        return message_adapter.validate_python(data)
    except ValidationError as exc:
        text, field = describe_validation_error(exc)
        raise InvalidMessage(f"invalid message: {text}", field=field) from None


# json.dumps(..., ensure_ascii=False, separators=(",", ":"), allow_nan=False) builds this
# encoder on every call; one is enough, and the output is the same.
_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)
_FIELDS: dict[type, tuple[str, ...]] = {}


def _canonical(model) -> dict:
    """The fields to store, in the stored order: `kind` first, the kind's fields in schema
    order without nulls, `meta` last. It is what `model_dump(mode="python",
    exclude_none=True)` gives (reordered), built directly from the validated model, which
    costs a tenth of the generic dump (tests/test_message_schema.py keeps the two equal)."""
    cls = type(model)
    names = _FIELDS.get(cls)
    if names is None:
        names = _FIELDS[cls] = tuple(n for n in cls.model_fields if n not in ("kind", "meta"))
    fields = {"kind": model.kind}
    for name in names:
        value = getattr(model, name)
        if value is None:
            continue
        if name == "content" and isinstance(value, list):
            value = [{"type": "text", "text": b.text} if type(b) is TextBlock
                     else b.model_dump(mode="python", exclude_none=True) for b in value]
        elif name == "tool_calls":
            value = [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in value]
        fields[name] = value
    if model.meta is not None:
        fields["meta"] = model.meta
    return fields


def _canonical_by_dump(model) -> dict:
    """The same through pydantic's serializer: also for values only it knows how to turn
    into JSON (a model or dataclass inside `meta`)."""
    fields = model.model_dump(mode="python", exclude_none=True)
    ordered = {"kind": fields.pop("kind")}
    meta = fields.pop("meta", None)
    ordered.update(fields)
    if meta is not None:
        ordered["meta"] = meta
    return ordered


def encode_message(data: Any) -> tuple[str, str]:
    """Validate once and encode once: returns (kind, encoded text).

    The encoding is compact UTF-8 JSON, `kind` first, then the fields in schema
    order, `meta` last, no null fields: the same message always encodes to the
    same text.
    """
    model = validate_message(data)
    # Python mode keeps non-finite floats as they are, so that the encoder can refuse
    # them below instead of pydantic silently turning them into null.
    fields = None
    try:
        try:
            fields = _canonical(model)
            text = _ENCODER.encode(fields)
        except TypeError:
            fields = _canonical_by_dump(model)
            text = _ENCODER.encode(fields)
        size = len(text.encode())
    except UnicodeEncodeError:  # before ValueError, of which it is a kind
        _refuse_unstorable(fields)
        raise InvalidMessage("invalid message: the text holds an unpaired surrogate, which is not UTF-8") from None
    except ValueError:
        raise InvalidMessage("invalid message: NaN and Infinity are not JSON numbers") from None
    except TypeError as exc:
        raise InvalidMessage(f"invalid message: a value is not JSON: {exc}") from None
    # The encoder writes a NUL as \u0000; only a NUL (or a backslash typed before
    # "u0000") puts that in the text, so the walk naming the field runs only then.
    if "\\u0000" in text:
        _refuse_unstorable(fields)
    limit = max_message_bytes()
    if size > limit:
        field = _largest_field(fields)
        raise MessageTooLarge(
            f"message is {size} bytes encoded; the limit is {limit} bytes ({field} is the bulk of it)", field=field
        )
    return model.kind, text


def _refuse_unstorable(fields) -> None:
    """Refuse a NUL or an unpaired surrogate anywhere in a message, naming its field.

    The message row itself could hold them (its JSON escapes both), but every reader
    past the API could not: PostgreSQL's full-text index and jsonb, the Markdown
    export, a provider's request body. So they are refused at the one door every
    message passes, the same on every database."""
    if fields is None:
        return
    try:
        params.check_tree(fields)
    except InvalidInput as exc:
        raise InvalidMessage(f"invalid message: {exc.message}", field=exc.field) from None


# Free-form values: a field of theirs is the caller's own, not a field of the message.
_OPAQUE = ("meta", "arguments")


def _largest_field(fields: dict) -> str:
    """The dotted field that makes up most of an oversized message: `text` of a journal
    kind, `content` (or `content.<i>.text`) of a chat kind, `tool_calls.<i>.arguments`,
    `meta`. It descends while one part is more than half of its parent, at most to a
    field of a content block or a tool call."""
    path: list[str] = []
    value = fields
    while len(path) < 3 and isinstance(value, (dict, list)) and not (path and path[-1] in _OPAQUE):
        items = list(value.items()) if isinstance(value, dict) else list(enumerate(value))
        sizes = [(_size(item), str(key), item) for key, item in items]
        if not sizes:
            break
        biggest, key, item = max(sizes, key=lambda s: s[0])
        if path and biggest * 2 <= sum(s[0] for s in sizes):
            break
        path.append(key)
        value = item
    return ".".join(path) or "content"


def _size(value) -> int:
    try:
        return len(_ENCODER.encode(value).encode())
    except (TypeError, ValueError):
        return 0


def decode_message(text: str):
    """Decode stored text back into a model; raises InvalidMessage when it no longer decodes."""
    try:
        return message_adapter.validate_json(text)
    except ValidationError as exc:
        raise InvalidMessage(describe_validation_error(exc)[0]) from None


def message_text(model) -> str:
    """The readable text of a message: journal text, string content or joined text blocks."""
    if hasattr(model, "text"):
        return model.text
    content = getattr(model, "content", None)
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "\n".join(b.text for b in content if isinstance(b, TextBlock))
