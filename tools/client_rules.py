#!/usr/bin/env python3
"""The server's message kinds and request limits, written into both clients.

The Python client is a package of its own (it must not import the server) and the
TypeScript client is another language, so each carries the rules as constants. They are
written here, from the server's one definition, into a block between two marker lines:
the message kinds (`conversations/message_schema.py`: CHAT_KINDS, JOURNAL_KINDS, KINDS),
the fields each kind must and may carry (its schema model), and the limits of a request
body (messages per append, items per session batch, characters of a namespace).

`python tools/client_rules.py` rewrites the blocks; `--check` writes nothing and exits 1
naming each client file whose block differs (run by `make lint`, and by
tests/test_client_rules.py).
"""

import os
import sys
import typing
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCE = "conversations/message_schema.py"
NOTICE = f"generated from {SOURCE} by tools/client_rules.py, do not edit by hand"
BEGIN = f"BEGIN {NOTICE}"
END = "END of the generated block"
PYTHON = "clients/python/src/memoryui_client/formats.py"
TYPESCRIPT = "clients/typescript/src/formats.ts"


def server_rules() -> dict:
    """The rules as the server defines them, read from its modules."""
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memoryui.settings")
    import django

    django.setup()
    from conversations import message_schema, store
    from conversations.imports import sessions

    fields = {}
    for model in typing.get_args(typing.get_args(message_schema.Message)[0]):
        (kind,) = typing.get_args(model.model_fields["kind"].annotation)
        names = [n for n in model.model_fields if n != "kind"]
        fields[kind] = {"required": [n for n in names if model.model_fields[n].is_required()],
                        "optional": [n for n in names if not model.model_fields[n].is_required()]}
    assert tuple(fields) == message_schema.KINDS, "the union's order is the order of KINDS"
    return {
        "chat_kinds": list(message_schema.CHAT_KINDS),
        "journal_kinds": list(message_schema.JOURNAL_KINDS),
        "kind_fields": fields,
        "batch_max": store.BATCH_MAX,
        "session_items_max": sessions.ITEMS_MAX,
        "namespace_max": store.NAMESPACE_MAX,
    }


def _strings(names, quote='"') -> str:
    return ", ".join(f"{quote}{n}{quote}" for n in names)


def render_python(rules: dict) -> str:
    fields = "\n".join(
        f'    "{kind}": {{"required": ({_strings(f["required"])}{"," if len(f["required"]) == 1 else ""}), '
        f'"optional": ({_strings(f["optional"])}{"," if len(f["optional"]) == 1 else ""})}},'
        for kind, f in rules["kind_fields"].items())
    return f"""\
CHAT_KINDS = ({_strings(rules["chat_kinds"])})
JOURNAL_KINDS = ({_strings(rules["journal_kinds"])})
KINDS = CHAT_KINDS + JOURNAL_KINDS
# The fields a message of each kind must carry, and those it may (an assistant message
# needs `content` or `tool_calls`); any other field is refused.
KIND_FIELDS = {{
{fields}
}}
BATCH_MAX = {rules["batch_max"]}  # messages in one append
SESSION_ITEMS_MAX = {rules["session_items_max"]}  # items in one batch of a session
NAMESPACE_MAX = {rules["namespace_max"]}  # characters of a conversation's namespace
"""


def render_typescript(rules: dict) -> str:
    fields = "\n".join(
        f'  {kind}: {{ required: [{_strings(f["required"])}], optional: [{_strings(f["optional"])}] }},'
        for kind, f in rules["kind_fields"].items())
    return f"""\
export const CHAT_KINDS: readonly string[] = [{_strings(rules["chat_kinds"])}];
export const JOURNAL_KINDS: readonly string[] = [{_strings(rules["journal_kinds"])}];
export const KINDS: readonly string[] = [...CHAT_KINDS, ...JOURNAL_KINDS];
/** The fields a message of each kind must carry, and those it may (an assistant message
 * needs `content` or `tool_calls`); any other field is refused. */
export const KIND_FIELDS: Readonly<Record<string, {{ required: readonly string[]; optional: readonly string[] }}>> = {{
{fields}
}};
/** Messages in one append. */
export const BATCH_MAX = {rules["batch_max"]};
/** Items in one batch of a session. */
export const SESSION_ITEMS_MAX = {rules["session_items_max"]};
/** Characters of a conversation's namespace. */
export const NAMESPACE_MAX = {rules["namespace_max"]};
"""


CLIENTS = {PYTHON: ("#", render_python), TYPESCRIPT: ("//", render_typescript)}


def with_block(text: str, comment: str, block: str, *, where: str) -> str:
    """`text` with the lines between its two marker lines replaced by `block`."""
    begin, end = f"{comment} {BEGIN}\n", f"{comment} {END}\n"
    if text.count(begin) != 1 or text.count(end) != 1 or text.index(begin) > text.index(end):
        raise SystemExit(f"{where}: needs one pair of marker lines, {begin.strip()!r} then {end.strip()!r}")
    head, rest = text.split(begin)
    _, tail = rest.split(end)
    return head + begin + block + end + tail


def update(path: Path, comment: str, block: str, *, write: bool) -> bool:
    """Whether the block in `path` differs from `block`; rewritten when `write`."""
    text = path.read_text()
    new = with_block(text, comment, block, where=str(path))
    if new != text and write:
        path.write_text(new)
    return new != text


def main(argv: list[str]) -> int:
    check = "--check" in argv
    rules = server_rules()
    stale = [name for name, (comment, render) in CLIENTS.items()
             if update(ROOT / name, comment, render(rules), write=not check)]
    for name in stale:
        print(f"{name}: its generated block differs from {SOURCE}; run python tools/client_rules.py"
              if check else f"{name}: rewritten")
    return 1 if check and stale else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
