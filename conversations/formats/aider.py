"""Aider chat histories (`.aider.chat.history.md`), one Markdown file per repository.

Aider appends to the file as it goes: a `# aider chat started at <time>` header opens
each session (a conversation of its own), then

- `#### ` lines: what the person typed (several lines in a row are one message);
- `> ` lines: what aider itself printed (tool output: files added, edits applied,
  commits, command output, warnings; a line right after one without a blank line
  between continues it, as Markdown reads a quote);
- any other text: the model's reply, its edit blocks (SEARCH/REPLACE, whole files,
  diffs) as the model wrote them.

They map as:

- a message → a `user` row; a command (`/add`, `/run`, `!ls`, …) is the harness talking,
  not a prompt: a harness row (a `user` row wrapped in `<command-name>` and
  `<command-args>`, as Claude Code records its commands). A command that asks the model
  (`/ask`, `/code`, `/architect`, `/context`, `/help` with a question) is followed by its
  question again as a message of its own: that is the `user` row;
- aider's output → a harness row (`<local-command-stdout>`), one per run of output lines;
  after a command that does not ask the model, everything up to the next message is its
  output;
- the model's reply → an `assistant` row (a reply that shows `► **THINKING**` and
  `► **ANSWER**` is a `thought` row, then the answer), with the model the session's
  header names (`Model:` / `Main model:`) in meta.

Every block (header, message, output run, reply) is kept as an entry with its line. A
session is identified by its header's time (`aider:<time>`), so a history file that has
grown is imported again as its new sessions, and its last session's new turns.
"""

import re

from .base import (
    ConvPlan,
    Entry,
    Plan,
    Problem,
    clean_text,
    content_hash,
    decode_text,
    first_text,
    make_row,
    parse_time,
)

NAME = "aider"
HEADER = re.compile(r"^# aider chat started at (.+?)\s*$")
# Commands whose text is sent to the model as the person's message.
MODEL_COMMANDS = ("/ask", "/code", "/architect", "/context", "/help", "/ok")
_MODEL = re.compile(r"^(?:Main model|Model|Models): (\S+)")
THINKING, ANSWER = "► **THINKING**", "► **ANSWER**"


def detect_text(text: str) -> bool:
    """A history begins with a session header (or holds one), or is mostly `#### ` prompts and replies."""
    if text.startswith("# aider chat started at ") or "\n# aider chat started at " in text[:200_000]:
        return True
    head = [ln for ln in text[:20_000].splitlines() if ln.strip()][:50]
    return bool(head) and head[0].startswith("#### ") and not head[0].lstrip().startswith(("{", "["))


def sessions(text: str) -> list[tuple[int, str]]:
    """(first line number, text) of each session of a history, in order; text before the first
    header (a history whose start was cut) is a session of its own."""
    out, start, current = [], 1, []
    for number, line in enumerate(text.split("\n"), 1):
        if line.startswith("# aider chat started at ") and HEADER.match(line):
            if any(x.strip() for x in current):
                out.append((start, "\n".join(current)))
            current, start = [], number
        current.append(line)
    if any(x.strip() for x in current):
        out.append((start, "\n".join(current)))
    return out


def session_key(session_text: str) -> str:
    first = session_text.lstrip("\n").split("\n", 1)[0]
    found = HEADER.match(first)
    if found:
        return f"aider:{found.group(1)}"
    return "aider:" + content_hash(first)[len("sha256:"):][:32]


# ---- blocks ----------------------------------------------------------------------------------


def _strip(line: str) -> str:
    return line[:-2] if line.endswith("  ") else line.rstrip(" ")


def _blocks(lines: list[tuple[int, str]]) -> list[dict]:
    """The session's lines as blocks: header, user (a message), tool (a run of aider's output)
    and reply (the model's text; a `>` line inside its code fences, `>>>>>>> REPLACE`
    included, is its own)."""
    blocks: list[dict] = []
    command_output = False  # after a command that does not ask the model: its output until the next message
    blank = True  # the line before was blank
    fenced = False  # inside a code fence of a reply

    def last(kind):
        return blocks[-1] if blocks and blocks[-1]["kind"] == kind else None

    def start(kind, number, text):
        blocks.append({"kind": kind, "line": number, "lines": [text]})

    for number, line in lines:
        if fenced and last("reply"):
            last("reply")["lines"].append(line)
            fenced = not line.lstrip().startswith("```")
            continue
        if line.startswith("# aider chat started at ") and HEADER.match(line):
            start("header", number, line)
            command_output, blank = False, True
            continue
        if line.startswith("####"):
            body = _strip(line[5:] if line.startswith("#### ") else line[4:])
            if last("user") and not blank:
                last("user")["lines"].append(body)
            else:
                start("user", number, body)
            command_output = _is_harness_command("\n".join(blocks[-1]["lines"]))
            blank = False
            continue
        if not line.strip():
            if last("reply") or last("tool"):
                blocks[-1]["lines"].append("")
            blank = True
            continue
        quoted = line == ">" or line.startswith("> ")
        if quoted or command_output or (last("tool") and not blank):
            text = _strip(line[2:]) if quoted else _strip(line)
            if last("tool"):
                last("tool")["lines"].append(text)
            else:
                start("tool", number, text)
        else:
            if last("reply"):
                last("reply")["lines"].append(line)
            else:
                start("reply", number, line)
            fenced = line.lstrip().startswith("```")
        blank = False
    for block in blocks:
        while block["lines"] and not block["lines"][-1].strip():
            block["lines"].pop()
    return [b for b in blocks if b["lines"]]


def _command(text: str) -> tuple[str, str] | None:
    stripped = text.strip()
    if stripped.startswith("!"):
        return "/run", stripped[1:].strip()
    if stripped.startswith("/") and len(stripped) > 1 and stripped[1:2].isalpha():
        name, _, rest = stripped.partition(" ")
        return name, rest.strip()
    return None


def _is_harness_command(text: str) -> bool:
    command = _command(text)
    return command is not None and not (command[0] in MODEL_COMMANDS and command[1])


# ---- rows -----------------------------------------------------------------------------------


def _harness(text: str, tag: str = "local-command-stdout") -> str:
    return f"<{tag}>{text}</{tag}>"


def parse_session(text: str, *, first_line: int = 1, subject: str = "", plan: Plan | None = None,
                  key: str = "main") -> Plan:
    """One session (from its header on) → a plan (or a conversation `key` added to `plan`)."""
    plan = plan or Plan(format=NAME, source_key=session_key(text))
    if key == "main":
        conv = plan.add_main(subject=subject)
    else:
        conv = plan.conversations[key] = ConvPlan(key=key, subject=subject)
    lines = list(enumerate(text.split("\n"), first_line))
    started, model = None, None
    conv.meta = {"aider": {}}
    for block in _blocks(lines):
        entry = Entry(seq=len(plan.entries), line=block["line"], raw="\n".join(block["lines"]), conv=key)
        plan.entries.append(entry)
        body = clean_text("\n".join(block["lines"])) or ""
        meta = {"aider": {"entry": entry.seq}}
        if block["kind"] == "header":
            started = parse_time(HEADER.match(block["lines"][0]).group(1).strip())
            conv.meta["aider"]["started"] = HEADER.match(block["lines"][0]).group(1).strip()
        elif block["kind"] == "user":
            command = _command(body)
            if command:
                name, args = command
                content = f"<command-name>{name}</command-name>" + (f"\n<command-args>{args}</command-args>"
                                                                    if args else "")
                own = {**meta["aider"], "command": name, "harness": True}
                _row(conv, {"kind": "user", "content": content, "meta": {"aider": own}}, started, entry, plan)
            elif body.strip():
                _row(conv, {"kind": "user", "content": body, "meta": meta}, started, entry, plan)
                if not conv.title:
                    conv.title = first_text(body)
        elif block["kind"] == "tool":
            for line in block["lines"]:
                found = _MODEL.match(line)
                if found and model is None:
                    model = found.group(1)
                    conv.meta["aider"]["model"] = model
            if body.strip():
                _row(conv, {"kind": "user", "content": _harness(body),
                            "meta": {"aider": {**meta["aider"], "harness": True}}}, started, entry, plan)
        else:
            _reply(conv, body, meta, model, started, entry, plan)
        entry.position = conv.last_position
    if not conv.title:
        conv.title = f"Aider session {conv.meta['aider'].get('started', '')}".strip()
    conv.title = conv.title[:300]
    return plan


def _row(conv, message: dict, at, entry: Entry, plan: Plan) -> None:
    row = make_row(message, at, entry.seq, plan.problems, entry.line)
    if row:
        conv.rows.append(row)


def _reply(conv, body: str, meta: dict, model, at, entry: Entry, plan: Plan) -> None:
    """The model's reply, its shown thinking first as a thought."""
    if THINKING in body and ANSWER in body:
        before, _, rest = body.partition(THINKING)
        thinking, _, answer = rest.partition(ANSWER)
        thinking = thinking.strip().strip("-").strip()
        if thinking:
            _row(conv, {"kind": "thought", "text": thinking, "meta": meta}, at, entry, plan)
        body = (before + answer).strip()
    if not body.strip():
        plan.problems.append(Problem(entry.line, "a reply without text; kept, not shown"))
        return
    out = {"kind": "assistant", "content": body, "meta": dict(meta)}
    if model:
        out["meta"]["model"] = model
    _row(conv, out, at, entry, plan)


def parse(data, *, subject: str = "") -> Plan:
    """A whole history: its first session is the plan's main conversation, each later one a
    conversation of its own (the importer imports each session as a source of its own)."""
    text = decode_text(data)
    parts = sessions(text)
    if not parts:
        plan = Plan(format=NAME, source_key=content_hash(text))
        plan.add_main(subject=subject, title="Aider session")
        return plan
    first_line, first = parts[0]
    plan = parse_session(first, first_line=first_line, subject=subject)
    for n, (line, piece) in enumerate(parts[1:], 2):
        parse_session(piece, first_line=line, subject=subject, plan=plan, key=f"session:{n}")
    return plan
