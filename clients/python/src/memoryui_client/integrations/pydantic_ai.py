"""Pydantic AI message history kept in memoryui. Install from a memoryui checkout (the client is
not on PyPI yet): `pip install "./clients/python[pydantic-ai]"`.

    from pydantic_ai import Agent
    from memoryui_client.integrations.pydantic_ai import MemoryuiMessageHistory

    history = MemoryuiMessageHistory("chat-42", url="http://127.0.0.1:8000", api_key="mui_…")
    result = agent.run_sync("Where is my refund?", message_history=history.load())
    history.save(result.all_messages())

`save` takes the whole history (what `all_messages()` returns) and appends the
messages past those stored; `append(result.new_messages())` appends them as they
are. `load` gives back exactly what was saved (deep-equal `ModelMessage`s, through
`ModelMessagesTypeAdapter`). Async code uses `asave`, `aappend` and `aload`.

Each `ModelMessage` is kept whole (its `ModelMessagesTypeAdapter` JSON) in the meta
of the first row it is shown as, so the conversation reads like any other:

- a `ModelResponse` is one assistant row: its text, and all its tool calls;
  thinking is kept in the original only (a response of thinking alone is a `thought`);
- a `ModelRequest` is a row per part: `SystemPromptPart` → system, `UserPromptPart` →
  user, `ToolReturnPart` → tool (marked `is_error` when its `outcome` is not
  "success": a tool's `ModelRetry` is one, "retried"), `RetryPromptPart` → a tool row
  marked as an error (or a user row when it answers no call); its `instructions` are a
  system row before it when they change.

Conversations are in `namespace` (default "pydantic-ai") with the history id as
external id. A save appends conditionally on the row count it continues from, with
an idempotency key derived from the messages: a retried save stores them once, and
a save whose history does not begin with what is stored is refused (ValueError)
rather than forking silently. The key needs `read`, `write`.
"""

import hashlib
import json

from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelResponse,
    RetryPromptPart,
    SystemPromptPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

from ..client import AsyncMemoryui, Memoryui

__all__ = ["MemoryuiMessageHistory", "to_rows"]

META_KEY = "pydantic_ai"
BATCH = 500


def _dump(messages) -> list[dict]:
    return ModelMessagesTypeAdapter.dump_python(list(messages), mode="json")


def _text(value) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


def _user_content(content):
    if isinstance(content, str):
        return content
    blocks = [{"type": "text", "text": item if isinstance(item, str) else f"[{type(item).__name__}]"}
              for item in content]
    return blocks or ""


def _arguments(call: ToolCallPart) -> dict:
    args = call.args_as_dict() if call.args is not None else {}
    return args if isinstance(args, dict) else {"input": args}


def _rows_of(message: ModelMessage, instructions: str | None) -> tuple[list[dict], str | None]:
    rows = []
    if isinstance(message, ModelResponse):
        text = "".join(p.content for p in message.parts if isinstance(p, TextPart))
        calls = [{"id": p.tool_call_id, "name": p.tool_name, "arguments": _arguments(p)}
                 for p in message.parts if isinstance(p, ToolCallPart)]
        meta = {k: v for k, v in {"model": message.model_name}.items() if v}
        if message.usage and (message.usage.input_tokens or message.usage.output_tokens):
            meta["usage"] = {"input_tokens": message.usage.input_tokens, "output_tokens": message.usage.output_tokens}
        if text or calls:
            row = {"kind": "assistant", "content": text}
            if calls:
                row["tool_calls"] = calls
        else:
            thinking = "\n\n".join(p.content for p in message.parts if isinstance(p, ThinkingPart))
            row = {"kind": "thought", "text": thinking or "(an empty model response)"}
        row["meta"] = meta
        return [row], instructions
    if message.instructions and message.instructions != instructions:
        rows.append({"kind": "system", "content": message.instructions})
        instructions = message.instructions
    for part in message.parts:
        if isinstance(part, SystemPromptPart):
            rows.append({"kind": "system", "content": part.content})
        elif isinstance(part, UserPromptPart):
            rows.append({"kind": "user", "content": _user_content(part.content)})
        elif isinstance(part, ToolReturnPart):
            row = {"kind": "tool", "tool_call_id": part.tool_call_id, "name": part.tool_name,
                   "content": part.model_response_str()}
            # Since 2.68 a tool's ModelRetry (and a failed, denied or interrupted call) is a
            # return whose outcome says so: for the model, an error to correct.
            outcome = getattr(part, "outcome", "success")
            if outcome != "success":
                row["is_error"] = True
                row["meta"] = {"outcome": outcome}
            rows.append(row)
        elif isinstance(part, RetryPromptPart):
            if part.tool_name:
                rows.append({"kind": "tool", "tool_call_id": part.tool_call_id, "name": part.tool_name,
                             "content": part.model_response(), "is_error": True})
            else:
                rows.append({"kind": "user", "content": part.model_response()})
    if not rows:
        rows.append({"kind": "note", "text": "a Pydantic AI request with nothing to show"})
    return rows, instructions


def to_rows(messages: list[ModelMessage], *, instructions: str | None = None) -> list[dict]:
    """memoryui messages for Pydantic AI messages, each original whole in its first row's meta."""
    out = []
    originals = _dump(messages)
    for message, original in zip(messages, originals, strict=True):
        rows, instructions = _rows_of(message, instructions)
        for i, row in enumerate(rows):
            marker = {"message": original} if i == 0 else {"part_of_previous": True}
            row["meta"] = {**row.get("meta", {}), META_KEY: marker}
        out += rows
    return out


class _State:
    def __init__(self):
        self.originals: list[dict] = []
        self.rows = 0
        self.instructions: str | None = None
        self.conversation_id: str | None = None


def _read(items, state: _State) -> None:
    for item in items:
        state.rows = item["position"] + 1
        message = item.get("message") or {}
        marker = (message.get("meta") or {}).get(META_KEY) or {}
        if "message" in marker:
            state.originals.append(marker["message"])
    if state.originals:
        last_request = next((m for m in reversed(state.originals) if m.get("kind") == "request"
                             and m.get("instructions")), None)
        state.instructions = last_request["instructions"] if last_request else None


class MemoryuiMessageHistory:
    """A Pydantic AI message history in a memoryui conversation (see the module)."""

    def __init__(self, history_id: str, *, url: str | None = None, api_key: str | None = None,
                 project: str | None = None, namespace: str = "pydantic-ai", subject: str | None = None,
                 title: str | None = None, **client_kw):
        if not isinstance(history_id, str) or not history_id.strip():
            raise ValueError("history_id must be a non-empty string")
        self.history_id = history_id
        self.namespace = namespace
        self.subject = subject
        self.title = title
        self._url, self._api_key, self._client_kw = url, api_key, {"project": project, **client_kw}
        self.conversation_id: str | None = None

    # -- the plan of a save, shared by both clients --------------------------------------

    def _plan(self, state: _State, messages: list, *, whole: bool) -> tuple[list[dict], str] | None:
        dumped = _dump(messages)
        if whole:
            stored = state.originals
            if dumped[:len(stored)] != stored:
                raise ValueError("this history does not begin with the messages stored for "
                                 f"{self.history_id!r}; load() it, or save into another history id")
            messages = messages[len(stored):]
            dumped = dumped[len(stored):]
        if not messages:
            return None
        rows = to_rows(messages, instructions=state.instructions)
        digest = hashlib.sha256(json.dumps([self.namespace, self.history_id, state.rows, dumped],
                                           sort_keys=True).encode()).hexdigest()
        return rows, f"pydantic-ai-{digest}"

    def _conversation_args(self) -> dict:
        return {"external_id": self.history_id, "namespace": self.namespace, "subject": self.subject,
                "title": self.title or f"Pydantic AI {self.history_id[:60]}"}

    # -- sync ------------------------------------------------------------------------------

    def _client(self) -> Memoryui:
        return Memoryui(self._url, api_key=self._api_key, **self._client_kw)

    def _state(self, mui: Memoryui) -> _State:
        state = _State()
        conversation = mui.find(external_id=self.history_id, namespace=self.namespace)
        if conversation is not None:
            state.conversation_id = self.conversation_id = conversation["id"]
            _read(mui.messages(conversation["id"]), state)
        return state

    def load(self) -> list[ModelMessage]:
        """The saved messages, as they were given (empty when nothing is saved yet)."""
        with self._client() as mui:
            return ModelMessagesTypeAdapter.validate_python(self._state(mui).originals)

    def save(self, messages: list[ModelMessage]) -> None:
        """Store the whole history: the messages past those stored are appended."""
        self._write(messages, whole=True)

    def append(self, messages: list[ModelMessage]) -> None:
        """Append these messages (e.g. `result.new_messages()`) after those stored."""
        self._write(messages, whole=False)

    def _write(self, messages, *, whole: bool) -> None:
        messages = list(messages)
        with self._client() as mui:
            state = self._state(mui)
            plan = self._plan(state, messages, whole=whole)
            if plan is None:
                return
            rows, key = plan
            if state.conversation_id is None:
                conversation, _ = mui.get_or_create(**self._conversation_args())
                state.conversation_id = self.conversation_id = conversation["id"]
            for start in range(0, len(rows), BATCH):
                mui.append_batch(state.conversation_id, rows[start:start + BATCH],
                                 expected_position=state.rows + start, idempotency_key=f"{key}-{start}")

    # -- async -----------------------------------------------------------------------------

    def _aclient(self) -> AsyncMemoryui:
        return AsyncMemoryui(self._url, api_key=self._api_key, **self._client_kw)

    async def _astate(self, mui: AsyncMemoryui) -> _State:
        state = _State()
        conversation = await mui.find(external_id=self.history_id, namespace=self.namespace)
        if conversation is not None:
            state.conversation_id = self.conversation_id = conversation["id"]
            _read([item async for item in mui.messages(conversation["id"])], state)
        return state

    async def aload(self) -> list[ModelMessage]:
        async with self._aclient() as mui:
            return ModelMessagesTypeAdapter.validate_python((await self._astate(mui)).originals)

    async def asave(self, messages: list[ModelMessage]) -> None:
        await self._awrite(messages, whole=True)

    async def aappend(self, messages: list[ModelMessage]) -> None:
        await self._awrite(messages, whole=False)

    async def _awrite(self, messages, *, whole: bool) -> None:
        messages = list(messages)
        async with self._aclient() as mui:
            state = await self._astate(mui)
            plan = self._plan(state, messages, whole=whole)
            if plan is None:
                return
            rows, key = plan
            if state.conversation_id is None:
                conversation, _ = await mui.get_or_create(**self._conversation_args())
                state.conversation_id = self.conversation_id = conversation["id"]
            for start in range(0, len(rows), BATCH):
                await mui.append_batch(state.conversation_id, rows[start:start + BATCH],
                                       expected_position=state.rows + start, idempotency_key=f"{key}-{start}")
