"""A strict judge of request bodies: would OpenAI's Chat Completions API and Anthropic's
Messages API accept this?

The SDKs' own typed request parameters are the reference
(`openai.types.chat.completion_create_params.CompletionCreateParamsNonStreaming`,
`anthropic.types.message_create_params.MessageCreateParamsNonStreaming`). They are
TypedDicts, which neither SDK checks at run time, and pydantic refuses a config on a
TypedDict it does not own, so this module walks their annotations itself: an unknown
key is refused, a required key must be there, and every nested value is checked,
down to the last literal. Then each API's documented rules across messages, which no
type can say:

- OpenAI: the ids of an assistant message's `tool_calls` are answered by `tool`
  messages directly after it, in one block, each once, before any other message; a
  `tool` message answers a call of the assistant message just before its block.
- Anthropic: no `system` role in `messages` (it is the top-level `system`); roles
  alternate, starting with `user`; each `tool_use` of an assistant message is
  answered by a `tool_result` with its id at the start of the very next user
  message, before any other block; no `tool_result` answers nothing; tool_use ids
  match `^[a-zA-Z0-9_-]+$`; no message and no text block is empty; the final
  assistant message does not end in white space.

`openai_problems(body)` and `anthropic_problems(body)` return the list of what is
wrong (empty: valid); `assert_valid_openai` / `assert_valid_anthropic` raise with it.
"""

import re
import types
import typing
from collections.abc import Iterable, Mapping, Sequence

import typing_extensions as te
from anthropic.types.message_create_params import MessageCreateParamsNonStreaming as AnthropicParams
from openai.types.chat.completion_create_params import CompletionCreateParamsNonStreaming as OpenAIParams

_NONE = type(None)
_WRAPPERS = {typing.Required, typing.NotRequired, te.Required, te.NotRequired, getattr(te, "ReadOnly", None)}
_LISTS = {list, Iterable, Sequence, typing.Iterable, typing.Sequence, list}
_MAPS = {dict, Mapping, dict, typing.Mapping}
_HINTS: dict = {}
ANTHROPIC_ID = re.compile(r"^[a-zA-Z0-9_-]+$")


def _fields(td) -> dict:
    """{wire key: (type, required)} of a TypedDict, aliases applied."""
    if td not in _HINTS:
        out = {}
        for name, hint in te.get_type_hints(td, include_extras=True).items():
            required = bool(getattr(td, "__total__", True))
            key = name
            while True:
                origin = te.get_origin(hint)
                if origin in (typing.Required, te.Required):
                    required, hint = True, te.get_args(hint)[0]
                elif origin in _WRAPPERS and origin is not None:
                    required, hint = (False if origin in (typing.NotRequired, te.NotRequired) else required), \
                        te.get_args(hint)[0]
                elif origin is te.Annotated or origin is typing.Annotated:
                    for extra in hint.__metadata__:
                        if type(extra).__name__ == "PropertyInfo" and getattr(extra, "alias", None):
                            key = extra.alias
                    hint = te.get_args(hint)[0]
                else:
                    break
            out[key] = (hint, required)
        _HINTS[td] = out
    return _HINTS[td]


def _discriminated(members, value):
    """Union members that can hold `value`, judged by its `type` / `role` literal first,
    so a refusal names the member the body meant."""
    if not isinstance(value, Mapping):
        return members
    for key in ("type", "role"):
        if key not in value:
            continue
        fitting = []
        for m in members:
            if te.is_typeddict(m) and key in _fields(m):
                hint = _fields(m)[key][0]
                if te.get_origin(hint) is typing.Literal and value[key] in te.get_args(hint):
                    fitting.append(m)
        if fitting:
            return fitting
    return members


def check(value, hint, where: str = "body") -> list[str]:
    """What is wrong with `value` as a `hint` (an SDK param type); empty when nothing."""
    origin = te.get_origin(hint)
    if hint is typing.Any or hint is object:
        return []
    if origin is te.Annotated or origin is typing.Annotated or origin in _WRAPPERS and origin is not None:
        return check(value, te.get_args(hint)[0], where)
    if origin in (typing.Union, types.UnionType):
        return _check_union(value, hint, where)
    if origin is typing.Literal:
        if any(value == a and type(value) is type(a) for a in te.get_args(hint)):
            return []
        return [f"{where}: {value!r} is not one of {te.get_args(hint)!r}"[:300]]
    if hint in _SCALARS:
        fits, what = _SCALARS[hint]
        return [] if fits(value) else [f"{where}: must be {what(value)}"]
    if te.is_typeddict(hint):
        return _check_typeddict(value, hint, where)
    if origin in _LISTS or hint in _LISTS or (origin is not None and getattr(origin, "__name__", "") ==
                                               "SequenceNotStr") or getattr(hint, "__name__", "") == "SequenceNotStr":
        if not isinstance(value, (list, tuple)):
            return [f"{where}: must be an array, not {type(value).__name__}"]
        args = te.get_args(hint)
        item = args[0] if args else typing.Any
        return [p for i, v in enumerate(value) for p in check(v, item, f"{where}[{i}]")]
    if origin in _MAPS or hint in _MAPS:
        if not isinstance(value, Mapping):
            return [f"{where}: must be an object"]
        args = te.get_args(hint)
        if not args:
            return []
        problems = [f"{where}: key {k!r} is not a string" for k in value if not isinstance(k, str)]
        return problems + [p for k, v in value.items() for p in check(v, args[1], f"{where}.{k}")]
    if isinstance(hint, type):
        return [] if isinstance(value, hint) else [f"{where}: must be a {hint.__name__}"]
    return [f"{where}: the oracle does not know the type {hint!r}"]


# A scalar hint: (does the value fit, what it must be).
_SCALARS = {
    _NONE: (lambda v: v is None, lambda v: "null"),
    str: (lambda v: isinstance(v, str), lambda v: f"a string, not {type(v).__name__}"),
    bool: (lambda v: isinstance(v, bool), lambda v: "a boolean"),
    int: (lambda v: isinstance(v, int) and not isinstance(v, bool), lambda v: "an integer"),
    float: (lambda v: isinstance(v, (int, float)) and not isinstance(v, bool), lambda v: "a number"),
}


def _check_union(value, hint, where: str) -> list[str]:
    members = _discriminated(list(te.get_args(hint)), value)
    failures = []
    for member in members:
        problems = check(value, member, where)
        if not problems:
            return []
        failures.append(problems)
    # The most telling refusal: one from inside a member that had the right shape.
    return min(failures, key=lambda ps: (all(p.startswith(f"{where}: must be") for p in ps), len(ps)))


def _check_typeddict(value, hint, where: str) -> list[str]:
    if not isinstance(value, Mapping):
        return [f"{where}: must be an object ({hint.__name__}), not {type(value).__name__}"]
    fields = _fields(hint)
    problems = [f"{where}: unknown key {k!r} in {hint.__name__}" for k in value if k not in fields]
    problems += [f"{where}: missing required key {k!r} of {hint.__name__}" for k, (_, req) in fields.items()
                 if req and k not in value]
    for k, v in value.items():
        if k in fields:
            problems += check(v, fields[k][0], f"{where}.{k}")
    return problems


def _blocks(content) -> list:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return list(content or [])


def openai_problems(body) -> list[str]:
    problems = check(body, OpenAIParams)
    if problems:
        return problems
    messages = list(body["messages"])
    if not messages:
        return ["messages: must not be empty"]
    pending: set[str] = set()
    answering = False  # inside the block of tool messages that follows an assistant's calls
    for i, m in enumerate(messages):
        role = m["role"]
        if role == "tool":
            if not answering:
                problems.append(f"messages[{i}]: a tool message must follow an assistant message with tool_calls "
                                f"(or another tool message of its block)")
            elif m["tool_call_id"] not in pending:
                problems.append(f"messages[{i}]: tool_call_id {m['tool_call_id']!r} answers no pending call")
            else:
                pending.discard(m["tool_call_id"])
            continue
        if pending:
            problems.append(f"messages[{i}]: the calls {sorted(pending)} of the assistant message before are not "
                            f"answered by tool messages directly after it")
        pending, answering = set(), False
        if role == "assistant" and m.get("tool_calls"):
            ids = [c["id"] for c in m["tool_calls"]]
            if len(set(ids)) != len(ids):
                problems.append(f"messages[{i}]: duplicate tool call ids {ids}")
            pending, answering = set(ids), True
    if pending:
        problems.append(f"messages: the calls {sorted(pending)} of the last assistant message are not answered")
    return problems


def anthropic_problems(body) -> list[str]:
    problems = check(body, AnthropicParams)
    if problems:
        return problems
    messages = list(body["messages"])
    if not messages:
        return ["messages: must not be empty"]
    expected = "user"
    pending: list[str] = []
    for i, m in enumerate(messages):
        role = m["role"]
        where = f"messages[{i}]"
        if role not in ("user", "assistant"):
            problems.append(f"{where}: role {role!r} is not allowed in messages (system is the top-level param)")
            continue
        if role != expected:
            problems.append(f"{where}: roles must alternate starting with user; expected {expected}, got {role}")
        expected = "assistant" if role == "user" else "user"
        blocks = _blocks(m["content"])
        if not blocks and not (role == "assistant" and i == len(messages) - 1):
            problems.append(f"{where}: content must not be empty")
        for j, b in enumerate(blocks):
            if b.get("type") == "text" and not b["text"].strip():
                problems.append(f"{where}.content[{j}]: text blocks must contain non-whitespace text")
        if role == "assistant":
            pending = _anthropic_assistant_problems(where, blocks, pending, problems, last=i == len(messages) - 1)
        else:
            _anthropic_user_problems(where, blocks, pending, problems)
            pending = []
    if pending:
        problems.append(f"messages: the tool_use ids {pending} of the last assistant message are not answered")
    return problems


def _anthropic_assistant_problems(where: str, blocks: list, pending: list, problems: list, *, last: bool) -> list:
    """An assistant message's problems (added to `problems`); returns its tool_use ids, now pending."""
    if any(b.get("type") == "tool_result" for b in blocks):
        problems.append(f"{where}: tool_result blocks belong in user messages")
    if pending:
        problems.append(f"{where}: the tool_use ids {pending} are not answered by the next user message")
    pending = [b["id"] for b in blocks if b.get("type") == "tool_use"]
    if len(set(pending)) != len(pending):
        problems.append(f"{where}: duplicate tool_use ids {pending}")
    for tool_id in pending:
        if not ANTHROPIC_ID.match(tool_id):
            problems.append(f"{where}: tool_use id {tool_id!r} does not match {ANTHROPIC_ID.pattern}")
    if last and blocks and blocks[-1].get("type") == "text" and \
            blocks[-1]["text"] != blocks[-1]["text"].rstrip():
        problems.append(f"{where}: the final assistant content must not end with white space")
    return pending


def _anthropic_user_problems(where: str, blocks: list, pending: list, problems: list) -> None:
    """A user message's problems (added to `problems`): its tool_results answer `pending`, first and once."""
    results = [b for b in blocks if b.get("type") == "tool_result"]
    if any(b.get("type") == "tool_use" for b in blocks):
        problems.append(f"{where}: tool_use blocks belong in assistant messages")
    lead = 0
    while lead < len(blocks) and blocks[lead].get("type") == "tool_result":
        lead += 1
    if len(results) != lead:
        problems.append(f"{where}: tool_result blocks must come before any other block in the message")
    answered = [b["tool_use_id"] for b in results]
    for tool_id in answered:
        if tool_id not in pending:
            problems.append(f"{where}: tool_result {tool_id!r} answers no tool_use of the message just before")
    if len(set(answered)) != len(answered):
        problems.append(f"{where}: a tool_use is answered twice: {answered}")
    missing = [t for t in pending if t not in answered]
    if missing:
        problems.append(f"{where}: the tool_use ids {missing} of the message before are not answered here")


# ---- Gemini ------------------------------------------------------------------------------------

_GEMINI_BODY_KEYS = {"contents", "systemInstruction", "system_instruction", "tools", "toolConfig",
                     "generationConfig", "safetySettings", "cachedContent"}


def gemini_problems(body) -> list[str]:
    """What Gemini's generateContent would refuse in this body: every content and the system
    instruction checked by google-genai's own `types.Content` (unknown keys forbidden, every
    value typed), then the rules across turns: roles `user` and `model` only, the first turn
    the user's, no empty turn and no empty text part; each `functionCall` of a model turn
    answered by a `functionResponse` with its name (and id) at the start of the very next
    user turn, and no `functionResponse` answering nothing."""
    from google.genai import types
    from pydantic import ValidationError

    problems = []
    if not isinstance(body, dict):
        return ["the body must be an object"]
    unknown = set(body) - _GEMINI_BODY_KEYS
    if unknown:
        problems.append(f"unknown keys {sorted(unknown)}")
    contents = body.get("contents")
    if not isinstance(contents, list) or not contents:
        return problems + ["contents must be a non-empty list"]
    for name in ("systemInstruction", "system_instruction"):
        if name in body:
            try:
                types.Content.model_validate(body[name])
            except ValidationError as exc:
                problems.append(f"{name}: {str(exc).splitlines()[0]}")
    pending: list[tuple[str, str]] = []
    for i, content in enumerate(contents):
        where = f"contents[{i}]"
        try:
            types.Content.model_validate(content)
        except ValidationError as exc:
            problems.append(f"{where}: {' '.join(str(exc).split())[:300]}")
            continue
        if i == 0 and content.get("role") != "user":
            problems.append(f"{where}: the first turn must be the user's")
        pending = _gemini_turn_problems(where, content.get("role"), content.get("parts") or [], pending, problems)
    return problems


def _gemini_turn_problems(where: str, role, parts: list, pending: list, problems: list) -> list:
    """One turn's problems (added to `problems`); the calls the next turn must answer."""
    if role not in ("user", "model"):
        problems.append(f"{where}: role must be user or model, not {role!r}")
    if not parts:
        problems.append(f"{where}: a turn needs at least one part")
    if any("text" in part and not str(part["text"]).strip() and len(part) == 1 for part in parts):
        problems.append(f"{where}: an empty text part")
    answers = [(part["functionResponse"].get("name"), part["functionResponse"].get("id"))
               for part in parts if "functionResponse" in part]
    lead = 0
    while lead < len(parts) and "functionResponse" in parts[lead]:
        lead += 1
    if answers and lead != len(answers):
        problems.append(f"{where}: functionResponse parts must come before any other part")
    if role == "model":
        if answers:
            problems.append(f"{where}: functionResponse parts belong in a user turn")
        if pending:
            problems.append(f"{where}: the functionCalls {pending} of the turn before are not answered")
        return [(part["functionCall"].get("name"), part["functionCall"].get("id"))
                for part in parts if "functionCall" in part]
    for answer in answers:
        if answer not in pending:
            problems.append(f"{where}: functionResponse {answer} answers no functionCall of the turn before")
    missing = [call for call in pending if call not in answers]
    if missing:
        problems.append(f"{where}: the functionCalls {missing} of the turn before are not answered here")
    return []


def assert_valid_gemini(body, context: str = "") -> None:
    problems = gemini_problems(body)
    assert not problems, f"Gemini would refuse this body{' (' + context + ')' if context else ''}: {problems[:5]}"


def openai_body(messages: list, model: str = "gpt-4o") -> dict:
    """A Chat Completions request around a `messages` list (what to_openai_messages returns)."""
    return {"model": model, "messages": messages}


def anthropic_body(request: dict, model: str = "claude-sonnet-4-5", max_tokens: int = 1024) -> dict:
    """A Messages request around {"system", "messages"} (what to_anthropic_messages returns)."""
    return {"model": model, "max_tokens": max_tokens, **request}


def assert_valid_openai(body, context: str = "") -> None:
    problems = openai_problems(body)
    assert not problems, f"OpenAI would refuse this body{' (' + context + ')' if context else ''}: {problems[:5]}"


def assert_valid_anthropic(body, context: str = "") -> None:
    problems = anthropic_problems(body)
    assert not problems, f"Anthropic would refuse this body{' (' + context + ')' if context else ''}: {problems[:5]}"


def rendered_bodies(handoff: str | None, messages: list[dict], *, model_row_meta: bool = False) -> dict:
    """Every request body memoryui renders for one active view (`handoff`: the checkpoint
    summary or None; `messages`: the rows after the fold): the client's `to_openai_messages`,
    `to_anthropic_messages` and `to_gemini_contents` and the server's `openai-chat`,
    `anthropic` and `gemini` renderers, each with the journal dropped and kept as text.
    {name: (provider, body)}; a body is None where the renderer said there is nothing to send."""
    from conversations.errors import NothingToSend as ServerNothing
    from conversations.formats import requests
    from memoryui_client import NothingToSend, to_anthropic_messages, to_gemini_contents, to_openai_messages

    view = {"handoff": {"kind": "system", "content": handoff} if handoff else None,
            "items": [{"position": i, "message": m} for i, m in enumerate(messages)]}
    rows = [(m["kind"], m) for m in messages]

    def body(make, wrap, *empty):
        try:
            return wrap(make())
        except empty:
            return None

    out = {}
    for journal in ("drop", "text"):
        out[f"client openai journal={journal}"] = ("openai", body(
            lambda j=journal: to_openai_messages(view, journal=j), openai_body, NothingToSend))
        out[f"client anthropic journal={journal}"] = ("anthropic", body(
            lambda j=journal: to_anthropic_messages(view, journal=j), anthropic_body, NothingToSend))
        out[f"client gemini journal={journal}"] = ("gemini", body(
            lambda j=journal: to_gemini_contents(view, journal=j), dict, NothingToSend))
        out[f"export openai-chat journal={journal}"] = ("openai", body(
            lambda j=journal: list(requests.openai_body(rows, handoff, journal=j)), openai_body, ServerNothing))
        out[f"export anthropic journal={journal}"] = ("anthropic", body(
            lambda j=journal: requests.anthropic_body(rows, handoff, journal=j), anthropic_body, ServerNothing))
        out[f"export gemini journal={journal}"] = ("gemini", body(
            lambda j=journal: requests.gemini_body(rows, handoff, journal=j), dict, ServerNothing))
    return out


def invalid_renderings(handoff: str | None, messages: list[dict]) -> dict:
    """{renderer: problems} for each rendering of this view that a provider would refuse. A
    renderer that found nothing to send made no body (NothingToSend): then every renderer of
    the same journal mode must agree, and none may make a body with no message."""
    judges = {"openai": openai_problems, "anthropic": anthropic_problems, "gemini": gemini_problems}
    bad = {}
    bodies = rendered_bodies(handoff, messages)
    for journal in ("drop", "text"):
        made = {name: b is not None for name, (_, b) in bodies.items() if name.endswith(f"journal={journal}")}
        if len(set(made.values())) > 1:
            bad[f"journal={journal}"] = [f"renderers disagree on whether there is anything to send: {made}"]
    for name, (provider, body) in bodies.items():
        if body is None:
            continue
        problems = judges[provider](body)
        if problems:
            bad[name] = problems[:3]
    return bad
