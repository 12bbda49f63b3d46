"""OpenTelemetry GenAI spans (OTLP/HTTP `POST /v1/traces`) as conversations: the OTLP door.

Semantic conventions supported: GenAI **v1.37** and later (`gen_ai.input.messages`,
`gen_ai.output.messages`, `gen_ai.system_instructions` as JSON attributes, the
shape Pydantic AI's instrumentation versions 2-6 emit), and the older per-event
form (v1.28-v1.36: span events `gen_ai.system.message`, `gen_ai.user.message`,
`gen_ai.assistant.message`, `gen_ai.tool.message`, `gen_ai.choice`).

A span is a model call when it carries messages (`gen_ai.operation.name` "chat",
or those attributes or events). Its conversation is `gen_ai.conversation.id`, or
the trace id when it has none, in namespace `otel`, kept as an import stream
(format `otel`) whose entries are the spans themselves, each exactly as it came
(in OTLP/JSON form), keyed by span id: a span seen before adds nothing, so a
re-sent batch is harmless. The rows follow the one mapping of every door:

- a call's input is the whole history the model was sent; the rows it adds are
  the messages past those the conversation has already (its stream counts them),
  then the call's output: one assistant row per reply, with all its tool calls;
- a `tool_call_response` part is a `tool` row after its call; text parts of a
  user message are a `user` row; system instructions are a `system` row, once;
- the reply's meta holds the model (`gen_ai.response.model`, else the request's),
  the usage (`gen_ai.usage.input_tokens` / `output_tokens`), the timing (start,
  end, duration in ms), the trace and span ids, and every attribute this mapping
  does not use (`otel.attributes`).

A model call whose messages were not captured (an instrumentation's default: the
OpenAI instrumentation without its content variables, Pydantic AI with
`include_content=False`) is still a row: a `did` journal entry naming the model,
the usage, the timing and the tools it asked for, with `otel.content` "not
captured" in its meta. A tool execution span without content is a `did` row
naming the tool. Journal rows are the agent's record, not turns: what is re-sent
stays valid (no tool result without its call). Other spans (agent runs, tool
executions whose calls carry the content) are accepted and left out: the model
calls carry their content. The answer's `partialSuccess.errorMessage` says what
was not kept (content not captured, spans left out); a span whose messages do not
decode is rejected and counted there; the rest are written.

Everything is checked before anything is written, as at every other door, and a
request that fails a check is refused whole with 400 naming the field: ids are
hex of their OTLP length (trace 32, span 16), timestamps whole nanoseconds from 0
to 2^64 - 1 with the end not before the start, and no text (names, attribute keys
and values, the messages inside them) holds NUL or an unpaired surrogate.
`gen_ai.conversation.id` is an identifier (`params.identifier`): up to 200
characters it is the conversation's external id; longer (up to 4,096) it is kept
whole in the conversation's meta and keyed by its SHA-256, never cut, so two ids
that share a prefix are two conversations.
"""

import hashlib
import json
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime

from django.db import IntegrityError, transaction
from django.utils import timezone

from conversations import store as conversation_store
from conversations.errors import ImportInProgress, InvalidInput
from conversations.formats.base import ConvPlan, Entry, dumps, first_text, make_row, storable
from conversations.models import Conversation
from conversations.params import check_tree, identifier
from conversations.store import EXTERNAL_ID_MAX

from . import store
from .models import ImportSource, SourceEntry
from .otlp_wire import Limits, OtlpError, attributes, checked, spans_of

FORMAT = "otel"
NAMESPACE = "otel"
SEMCONV_VERSION = "1.37"
MESSAGE_ATTRIBUTES = ("gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.system_instructions")
# Attributes the rows hold in their own places (so not again under otel.attributes).
USED = set(MESSAGE_ATTRIBUTES) | {"gen_ai.conversation.id", "gen_ai.request.model", "gen_ai.response.model",
                                  "gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens"}
# The operations of a model call (GenAI semantic conventions), and of a tool's execution.
CALL_OPERATIONS = {"chat", "text_completion", "generate_content", "completion"}
TOOL_OPERATION = "execute_tool"
TOOL_CONTENT = ("gen_ai.tool.call.arguments", "gen_ai.tool.call.result", "tool_arguments", "tool_response")
CONVERSATION_ID_MAX = 4096
NOT_CAPTURED = "not captured"
CAPTURE_HINT = ("capture them with OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental and "
                "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=SPAN_ONLY (OpenAI and other "
                "opentelemetry-util-genai instrumentations), or include_content=True (Pydantic AI)")
EVENT_ROLES = {"gen_ai.system.message": "system", "gen_ai.user.message": "user",
               "gen_ai.assistant.message": "assistant", "gen_ai.tool.message": "tool"}


@dataclass
class Result:
    accepted: int = 0
    written: int = 0
    duplicates: int = 0
    ignored: int = 0
    rejected: list = field(default_factory=list)  # (span id, reason)
    conversations: list = field(default_factory=list)
    # Written without their messages (the instrumentation did not capture them).
    not_captured: int = 0
    # Accepted and left out (agent runs, …): their operation names, counted.
    left_out: dict = field(default_factory=dict)

    def not_kept(self) -> str:
        """What the OTLP answer's partialSuccess.errorMessage says was not kept."""
        parts = [f"span {sid or '?'}: {reason}" for sid, reason in self.rejected[:20]]
        if self.not_captured:
            parts.append(f"{self.not_captured} model call(s) came without their messages, kept as `did` rows "
                         f"with model, usage and timing; {CAPTURE_HINT}")
        if self.left_out:
            names = ", ".join(f"{n} {name}" for name, n in sorted(self.left_out.items()))
            parts.append(f"spans that are not model calls were left out ({names})")
        return "; ".join(parts)[:2000]


# ---- mapping a model call to rows -----------------------------------------------------------


def _json_attr(attrs: dict, name: str, where: str):
    value = attrs.get(name)
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except (ValueError, RecursionError):
            raise ValueError(f"{name} is not JSON") from None
        # What the JSON held: its escapes may spell a NUL or half a surrogate pair.
        checked(check_tree, value, where=f"{where}.attributes.{name}")
    if value is not None and not isinstance(value, list):
        raise ValueError(f"{name} must be a JSON array")
    return value


def _event_messages(span: dict) -> tuple[list, list]:
    """The older form: one span event per message (v1.28-v1.36)."""
    inputs, outputs = [], []
    for event in span.get("events", []) or []:
        if not isinstance(event, dict):
            continue
        name = event.get("name")
        attrs = attributes(event.get("attributes", []), "events.attributes")
        if name in EVENT_ROLES:
            role = EVENT_ROLES[name]
            parts = []
            if role == "tool":
                parts.append({"type": "tool_call_response", "id": attrs.get("id", ""),
                              "response": attrs.get("content")})
            else:
                if attrs.get("content") not in (None, ""):
                    parts.append({"type": "text", "content": attrs["content"]})
                parts += _event_calls(attrs.get("tool_calls"))
            inputs.append({"role": role, "parts": parts})
        elif name == "gen_ai.choice":
            message = attrs.get("message")
            if isinstance(message, str):
                try:
                    message = json.loads(message)
                except ValueError:
                    message = {"content": message}
            message = message if isinstance(message, dict) else {}
            parts = [{"type": "text", "content": message["content"]}] if message.get("content") else []
            parts += _event_calls(message.get("tool_calls"))
            outputs.append({"role": "assistant", "parts": parts})
    return inputs, outputs


def _event_calls(calls) -> list:
    if isinstance(calls, str):
        try:
            calls = json.loads(calls)
        except ValueError:
            return []
    out = []
    for call in calls if isinstance(calls, list) else []:
        if isinstance(call, dict):
            fn = call.get("function") or {}
            out.append({"type": "tool_call", "id": call.get("id", ""), "name": fn.get("name", ""),
                        "arguments": fn.get("arguments")})
    return out


def messages_of(span: dict, attrs: dict, where: str = "span") -> tuple[list, list, list] | None:
    """(system instructions, input messages, output messages) of a model call; None when the
    span carries no messages. ValueError when its messages do not decode."""
    if any(name in attrs for name in MESSAGE_ATTRIBUTES):
        system = _json_attr(attrs, "gen_ai.system_instructions", where) or []
        return system, _json_attr(attrs, "gen_ai.input.messages", where) or [], \
            _json_attr(attrs, "gen_ai.output.messages", where) or []
    inputs, outputs = _event_messages(span)
    if inputs or outputs:
        return [], inputs, outputs
    return None


def is_model_call(attrs: dict) -> bool:
    """A model call by its attributes alone (its messages may not have been captured)."""
    operation = attrs.get("gen_ai.operation.name")
    if operation is not None:
        return operation in CALL_OPERATIONS
    return any(name in attrs for name in ("gen_ai.request.model", "gen_ai.response.model",
                                          "gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens"))


def _captured_part(part) -> bool:
    """A part holds content: more than its type, id and name (a tool call's name and id are
    recorded even when the content is not)."""
    return not isinstance(part, dict) or any(v is not None for k, v in part.items() if k not in ("type", "id", "name"))


def captured(messages: tuple[list, list, list]) -> bool:
    """Whether any message of a call holds content (instrumentations that do not capture
    content may still send the messages' roles and parts, empty)."""
    system, inputs, outputs = messages
    if any(_captured_part(p) for p in system):
        return True
    return any(not isinstance(m, dict) or not isinstance(m.get("parts"), list)
               or any(_captured_part(p) for p in m["parts"]) for m in inputs + outputs)


def _tools_asked(outputs: list) -> list[dict]:
    return [{"id": str(p.get("id") or ""), "name": str(p.get("name") or "")}
            for m in outputs if isinstance(m, dict) and isinstance(m.get("parts"), list)
            for p in m["parts"] if isinstance(p, dict) and p.get("type") == "tool_call"]


def uncaptured_call_row(attrs: dict, outputs: list) -> dict:
    """The `did` row of a model call whose messages were not captured: what is known of it."""
    model = attrs.get("gen_ai.response.model") or attrs.get("gen_ai.request.model") or "a model"
    text = f"called {model}"
    tokens = [f"{attrs[f'gen_ai.usage.{k}_tokens']} {k}" for k in ("input", "output")
              if isinstance(attrs.get(f"gen_ai.usage.{k}_tokens"), int)]
    if tokens:
        text += f" ({' and '.join(tokens)} tokens)"
    tools = _tools_asked(outputs)
    if tools:
        text += ", which asked for " + ", ".join(t["name"] or "a tool" for t in tools)
    reasons = attrs.get("gen_ai.response.finish_reasons")
    if isinstance(reasons, list) and reasons and not tools:
        text += f", which finished with {', '.join(str(r) for r in reasons)}"
    row = {"kind": "did", "text": text + "; its messages were not captured"}
    if tools:
        row["meta"] = {"tools_asked": tools}
    return row


def uncaptured_tool_row(attrs: dict) -> dict | None:
    """The `did` row of a tool execution span that carries no content; None when it carries
    some (the model calls around it then hold the call and its result)."""
    if attrs.get("gen_ai.operation.name") != TOOL_OPERATION or any(name in attrs for name in TOOL_CONTENT):
        return None
    name = attrs.get("gen_ai.tool.name") or "a tool"
    call = attrs.get("gen_ai.tool.call.id")
    return {"kind": "did", "text": f"ran the tool {name}" + (f" (call {call})" if call else "")
            + "; its arguments and result were not captured"}


def _text(part) -> str:
    content = part.get("content")
    return content if isinstance(content, str) else dumps(content)


def _texts(parts) -> list[str]:
    # A text part without content: the instrumentation did not capture it.
    return [_text(p) for p in parts if p.get("type") == "text" and p.get("content") is not None]


def _arguments(value) -> dict:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return {"input": value}
    return value if isinstance(value, dict) else {"input": value}


def rows_of(message: dict) -> list[dict]:
    """memoryui messages for one semantic-convention message (its `parts`)."""
    if not isinstance(message, dict):
        raise ValueError("a message must be an object")
    role = message.get("role")
    parts = message.get("parts") or []
    if not isinstance(parts, list) or not all(isinstance(p, dict) for p in parts):
        raise ValueError("a message's parts must be a list of objects")
    texts = _texts(parts)
    if role == "assistant":
        calls = [{"id": str(p.get("id") or f"call_{i}"), "name": str(p.get("name") or "tool"),
                  "arguments": _arguments(p.get("arguments"))}
                 for i, p in enumerate(parts) if p.get("type") == "tool_call"]
        out = {"kind": "assistant", "content": "\n\n".join(texts)}
        if calls:
            out["tool_calls"] = calls
        return [out] if texts or calls else []
    if role in ("system", "developer"):
        return [{"kind": "system", "content": "\n\n".join(texts)}] if texts else []
    rows = []
    for p in parts:
        if p.get("type") == "tool_call_response":
            response = p.get("response", p.get("result"))
            if response is None:
                response = f"({NOT_CAPTURED})"
            rows.append({"kind": "tool", "tool_call_id": str(p.get("id") or ""),
                         **({"name": str(p["name"])} if p.get("name") else {}),
                         "content": response if isinstance(response, str) else dumps(response)})
    if texts:
        rows.append({"kind": "user", "content": "\n\n".join(texts)})
    return rows


def _nanos(value) -> datetime | None:
    try:
        n = int(value)
    except (TypeError, ValueError):
        return None
    if n <= 0:
        return None
    try:
        return datetime.fromtimestamp(n / 1e9, tz=UTC)
    except (OverflowError, OSError, ValueError):
        return None


def _reply_meta(span: dict, attrs: dict) -> dict:
    start, end = _nanos(span.get("startTimeUnixNano")), _nanos(span.get("endTimeUnixNano"))
    meta = {}
    model = attrs.get("gen_ai.response.model") or attrs.get("gen_ai.request.model")
    if model:
        meta["model"] = str(model)
    usage = {k: attrs[f"gen_ai.usage.{k}"] for k in ("input_tokens", "output_tokens")
             if isinstance(attrs.get(f"gen_ai.usage.{k}"), int)}
    if usage:
        meta["usage"] = usage
    otel = {"trace_id": span.get("traceId", ""), "span_id": span.get("spanId", ""), "name": span.get("name", "")}
    if attrs.get("gen_ai.request.model"):
        otel["request_model"] = attrs["gen_ai.request.model"]
    if start:
        otel["start"] = start.isoformat()
    if end:
        otel["end"] = end.isoformat()
    if start and end:
        otel["duration_ms"] = round((end - start).total_seconds() * 1000, 3)
    unused = {k: v for k, v in attrs.items() if k not in USED}
    if unused:
        otel["attributes"] = unused
    meta["otel"] = otel
    return storable(meta)


# ---- writing, through the import pipeline's store ----------------------------------------


_DIGEST_KEY = re.compile(r"sha256:[0-9a-f]{64}")


def conversation_key(conversation_id: str) -> str:
    """The external id of an OTel conversation id (or trace id): itself up to EXTERNAL_ID_MAX characters,
    else `sha256:` and its digest, so a long id is kept whole (in the conversation's meta)
    and never cut into another's. An id spelled like a digest key is keyed by its digest too."""
    if len(conversation_id) <= EXTERNAL_ID_MAX and not _DIGEST_KEY.fullmatch(conversation_id):
        return conversation_id
    return "sha256:" + hashlib.sha256(conversation_id.encode()).hexdigest()


def _conversation_id_of(span: dict, attrs: dict, where: str) -> str:
    """`gen_ai.conversation.id` as an identifier (400 naming it when it is not one), else the trace id."""
    value = attrs.get("gen_ai.conversation.id")
    if value in (None, ""):
        return span["traceId"]
    field = f"{where}.attributes.gen_ai.conversation.id"
    if not isinstance(value, str):
        raise OtlpError(f"{field} must be a string", field=field)
    return checked(identifier, value, field, max_length=CONVERSATION_ID_MAX, required=True)


def ingest(doc: dict, *, actor: str, limits: Limits | None = None, namespace: str = NAMESPACE) -> Result:
    """Write the model calls of an export request; one transaction per conversation. Every
    span is checked first: a request with one that fails a check writes nothing (400)."""
    limits = limits or Limits()
    result = Result()
    calls: dict[str, list] = {}
    for span, attrs, where in spans_of(doc, limits):
        span_id = span["spanId"]
        try:
            messages = messages_of(span, attrs, where)
        except ValueError as exc:
            result.rejected.append((span_id, str(exc)))
            continue
        if messages is not None and captured(messages):
            mode = "messages"
        elif messages is not None or is_model_call(attrs):
            mode = "uncaptured"
            messages = messages or ([], [], [])
        elif uncaptured_tool_row(attrs) is not None:
            mode, messages = "tool", ([], [], [])
        else:
            result.ignored += 1
            operation = str(attrs.get("gen_ai.operation.name") or span.get("name") or "unnamed")[:40]
            result.left_out[operation] = result.left_out.get(operation, 0) + 1
            continue
        conversation_id = _conversation_id_of(span, attrs, where)
        calls.setdefault(conversation_id, []).append((span, attrs, messages, mode))
    for conversation_id, group in calls.items():
        group.sort(key=lambda c: int(c[0].get("startTimeUnixNano") or 0))
        try:
            _write_conversation(conversation_id, group, actor=actor, namespace=namespace, result=result)
        except IntegrityError:
            raise ImportInProgress("another request is writing this conversation right now; send it again",
                                   field="spans") from None
    result.accepted = result.written + result.duplicates + result.ignored
    return result


def _locked_source(namespace: str, key: str) -> ImportSource | None:
    return ImportSource.objects.for_update().filter(format=FORMAT, namespace=namespace, source_key=key).first()


def _new_source(conversation_id: str, group: list, *, namespace: str) -> ImportSource:
    """The conversation of an id seen for the first time (titled by its first user message), and its source."""
    key = conversation_key(conversation_id)
    first_user = next((r for _, _, (_, inputs, _), _ in group for m in inputs for r in _safe_rows(m)
                       if r["kind"] == "user"), None)
    title = first_text(first_user["content"]) if first_user else f"Trace {conversation_id[:40]}"
    otel = {"conversation_key": key, **({"conversation_id": conversation_id} if key != conversation_id else {})}
    conversation, _ = conversation_store.get_or_create_conversation(
        namespace=namespace, external_id=key, title=" ".join(storable(title).split())[:200], meta={"otel": otel})
    store.get_or_create_source(format=FORMAT, namespace=namespace, source_key=key,
                               conversation_id=conversation.pk)
    # Locked now, read again: a request that created it first has committed by here (the
    # store's create-or-get waited for it), and its spans and counts must be seen.
    return _locked_source(namespace, key)


def _attach_meta(meta: dict, new: list, replies: list) -> None:
    """A span's reply metadata goes on its assistant rows (else its first reply, else its last new row)."""
    for r in replies:
        if r["kind"] == "assistant":
            r["meta"] = meta
    if replies and not any(r["kind"] == "assistant" for r in replies):
        replies[0]["meta"] = meta
    if not replies and new:
        new[-1]["meta"] = meta


def _write_conversation(conversation_id: str, group: list, *, actor: str, namespace: str, result: Result) -> None:
    key = conversation_key(conversation_id)
    with transaction.atomic():
        source = _locked_source(namespace, key)
        if source is not None and not Conversation.objects.live().filter(pk=source.conversation_id).exists():
            raise InvalidInput("that conversation is being deleted", field="gen_ai.conversation.id")
        if source is None:
            source = _new_source(conversation_id, group, namespace=namespace)
        cid = str(source.conversation_id)
        seen_ids = {span.get("spanId") for span, _, _, _ in group}
        stored = set(SourceEntry.objects.filter(source_id=source.pk, uuid__in=list(seen_ids))
                     .values_list("uuid", flat=True))
        state = dict(source.state or {})
        counted = int(state.get("messages", 0))
        system_done = bool(state.get("system", False))
        conversation = Conversation.objects.get(pk=cid)
        conv = ConvPlan(key="main", existing_id=cid, base=conversation.next_position)
        entries, problems, written = [], [], set()
        for span, attrs, (system, inputs, outputs), mode in group:
            span_id = span["spanId"]
            if span_id in stored or span_id in written:
                result.duplicates += 1
                continue
            at = _nanos(span.get("endTimeUnixNano")) or timezone.now()
            if mode != "messages":
                row = uncaptured_call_row(attrs, outputs) if mode == "uncaptured" else uncaptured_tool_row(attrs)
                meta = _reply_meta(span, attrs)
                meta["otel"]["content"] = NOT_CAPTURED
                row["meta"] = {**meta, **row.get("meta", {})}
                made = make_row(row, at, len(entries), problems, None)
                if made is not None:
                    conv.rows.append(made)
                result.not_captured += mode == "uncaptured"
                counted = max(counted, len(inputs)) + len(outputs)
                entries.append(_entry(source, entries, conv, span))
                written.add(span_id)
                continue
            try:
                new = []
                if system and not system_done and counted == 0:
                    text = "\n\n".join(_text(p) for p in system if isinstance(p, dict))
                    if text:
                        new.append({"kind": "system", "content": text})
                    system_done = True
                for message in (inputs[counted:] if len(inputs) >= counted else []):
                    new += rows_of(message)
                replies = []
                for message in outputs:
                    replies += rows_of(message)
            except ValueError as exc:
                result.rejected.append((span_id, str(exc)))
                continue
            _attach_meta(_reply_meta(span, attrs), new, replies)
            for message in new + replies:
                row = make_row(message, at, len(entries), problems, None)
                if row is not None:
                    conv.rows.append(row)
            counted = max(counted, len(inputs)) + len(outputs)
            entries.append(_entry(source, entries, conv, span))
            written.add(span_id)
        if not entries:
            return
        end = store.append_imported(conversation_id=cid, rows=conv.rows, expected_position=conv.base)
        store.add_entries(source=source, entries=entries, conversation_ids={"main": cid})
        store.save_source(source=source, entries=source.entries + len(entries),
                          state={**state, "messages": counted, "system": system_done})
        store.record_import(actor=actor, conversation_id=cid, detail={
            "format": FORMAT, "messages": len(conv.rows), "checkpoints": 0, "appended": True,
            "next_position": end, "spans": len(entries)})
        result.written += len(entries)
        result.conversations.append(cid)


def _entry(source: ImportSource, entries: list, conv: ConvPlan, span: dict) -> Entry:
    """The span kept as it came, as the stream's next entry, at the last row it added."""
    return Entry(seq=source.entries + len(entries), line=None, raw=dumps(storable(span)),
                 position=conv.base + len(conv.rows) - 1, uuid=span["spanId"],
                 parent_uuid=span.get("parentSpanId") or None, group=span["traceId"], real=True)


def _safe_rows(message) -> list:
    try:
        return rows_of(message)
    except ValueError:
        return []


