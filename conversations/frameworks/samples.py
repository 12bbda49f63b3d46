"""Sample agent-framework sessions, written as each framework writes them.

The demo data (conversations/demo.py) stores them through the same server-side
code the framework adapters reach over HTTP, and the adapters' tests replay them
through the frameworks themselves. No network, no model: the content is fixed.

`claude_agent_session()` is a Claude Code transcript as the Claude Agent SDK
mirrors it to a SessionStore (and as it lies on disk under
~/.claude/projects/<project>/): three turns, a subagent (an Explore agent spawned
by a Task call, in its own transcript `subagents/agent-<id>`, with its
`.meta.json` sidecar), and a compaction (a `compact_boundary` and the summary
entry after it).
"""

from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone

SESSION_ID = "7c1e5b2a-3f4d-4e6a-9b8c-0d1e2f3a4b5c"
PROJECT_KEY = "-srv-billing"
CWD = "/srv/billing"
AGENT_ID = "a4f19c2e7b"
VERSION = "2.1.3"
MODEL = "claude-sonnet-4-5"


@dataclass
class ClaudeSession:
    project_key: str
    session_id: str
    entries: list
    # subpath ("subagents/agent-<id>") → that transcript's entries
    subagents: dict = field(default_factory=dict)
    # subpath → the agent's .meta.json sidecar
    subagent_meta: dict = field(default_factory=dict)
    cwd: str = CWD


def _times(start: datetime):
    t = start
    while True:
        yield t.isoformat(timespec="milliseconds").replace("+00:00", "Z")
        t += timedelta(seconds=7)


def claude_agent_session(start: datetime | None = None) -> ClaudeSession:
    """The sample session (deterministic; `start` moves its timestamps)."""
    at = _times(start or datetime(2026, 11, 24, 9, 30, tzinfo=timezone.utc))
    base = {"isSidechain": False, "userType": "external", "cwd": CWD, "sessionId": SESSION_ID, "version": VERSION,
            "gitBranch": "main"}
    entries: list[dict] = []
    last = [None]
    n = [0]

    def uid(prefix="e"):
        n[0] += 1
        return f"{prefix}{n[0]:03d}0000-0000-4000-8000-{SESSION_ID[-12:]}"

    def add(obj, *, chain=True):
        obj = {"parentUuid": last[0] if chain else None, **base, **obj}
        entries.append(obj)
        if "uuid" in obj:
            last[0] = obj["uuid"]
        return obj

    def user(content, **extra):
        return add({"type": "user", "message": {"role": "user", "content": content}, "uuid": uid(),
                    "timestamp": next(at), **extra})

    def assistant(msg_id, blocks, *, usage=None):
        out = None
        for block in blocks:  # Claude Code writes one line per content block of a response
            out = add({"type": "assistant", "requestId": f"req_{msg_id}",
                       "message": {"id": msg_id, "type": "message", "role": "assistant", "model": MODEL,
                                   "content": [block], "stop_reason": None, "stop_sequence": None,
                                   "usage": usage or {"input_tokens": 1830, "output_tokens": 96}},
                       "uuid": uid(), "timestamp": next(at)})
        return out

    def result(tool_use_id, content, **extra):
        return user([{"type": "tool_result", "tool_use_id": tool_use_id, "content": content}], **extra)

    # Turn 1: the question, a search, a subagent that reads the code, the finding.
    user("The nightly invoice export fails for invoices with a discount line. Find out why.")
    assistant("msg_01A", [
        {"type": "thinking", "thinking": "A discount line probably has a negative amount; the exporter may "
                                         "validate amounts as positive. Search for the validation first.",
         "signature": "EqQBCkYIBxgCKkD0c2lnbmF0dXJl"},
        {"type": "text", "text": "I'll find where the export validates line amounts."},
        {"type": "tool_use", "id": "toolu_01Grep", "name": "Grep",
         "input": {"pattern": "amount.*<= 0|negative", "path": "billing/export"}},
    ])
    result("toolu_01Grep", "billing/export/csv_writer.py:41:    if line.amount <= 0:\n"
                           "billing/export/csv_writer.py:42:        raise ExportError(f\"bad amount {line.amount}\")",
           toolUseResult={"mode": "content", "numFiles": 1, "numLines": 2})
    assistant("msg_01B", [
        {"type": "text", "text": "Found a check that refuses amounts ≤ 0. I'll have an Explore agent read how "
                                 "discount lines are built while I look at the writer."},
        {"type": "tool_use", "id": "toolu_01Task", "name": "Task",
         "input": {"description": "How discount lines are built",
                   "prompt": "Read billing/invoices/lines.py and report how discount lines are created: "
                             "their sign, their type, and who consumes them.",
                   "subagent_type": "Explore"}},
    ])
    sub_prompt = entries[-1]["message"]["content"][0]["input"]["prompt"]

    # The subagent's own transcript (subagents/agent-<id>.jsonl): a sidechain with its agentId.
    sub: list[dict] = []
    sub_last = [None]

    def sub_add(obj):
        obj = {"parentUuid": sub_last[0], "isSidechain": True, "userType": "external", "cwd": CWD,
               "sessionId": SESSION_ID, "version": VERSION, "gitBranch": "main", "agentId": AGENT_ID, **obj,
               "uuid": uid("s"), "timestamp": next(at)}
        sub.append(obj)
        sub_last[0] = obj["uuid"]

    sub_add({"type": "user", "message": {"role": "user", "content": sub_prompt}})
    sub_add({"type": "assistant", "message": {"id": "msg_S1", "type": "message", "role": "assistant", "model": MODEL,
             "content": [{"type": "tool_use", "id": "toolu_S1Read", "name": "Read",
                          "input": {"file_path": f"{CWD}/billing/invoices/lines.py"}}],
             "usage": {"input_tokens": 940, "output_tokens": 38}}})
    sub_add({"type": "user", "message": {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_S1Read",
         "content": "class DiscountLine(Line):\n    kind = 'discount'\n    def __init__(self, percent, base):\n"
                    "        self.amount = -(base * percent / 100)"}]}})
    report = ("Discount lines are `DiscountLine` objects with kind 'discount' and a NEGATIVE amount "
              "(-(base × percent / 100)). The CSV writer and the totals both consume them.")
    sub_add({"type": "assistant", "message": {"id": "msg_S2", "type": "message", "role": "assistant", "model": MODEL,
             "content": [{"type": "text", "text": report}], "usage": {"input_tokens": 1210, "output_tokens": 64}}})

    result("toolu_01Task", [{"type": "text", "text": report}],
           toolUseResult={"status": "completed", "agentId": AGENT_ID, "prompt": sub_prompt,
                          "content": [{"type": "text", "text": report}], "totalDurationMs": 9120,
                          "totalTokens": 2252, "totalToolUseCount": 1})
    assistant("msg_01C", [{"type": "text", "text": "The cause: discount lines carry a negative amount by design, "
                                                   "and `csv_writer.py` line 41 rejects any amount ≤ 0. The check "
                                                   "should only refuse zero-amount product lines."}])
    add({"type": "system", "subtype": "turn_duration", "durationMs": 41200, "uuid": uid(), "timestamp": next(at),
         "isMeta": False, "level": "info"})

    # Turn 2: the fix.
    user("Fix it, and keep refusing zero amounts on product lines.")
    assistant("msg_02A", [
        {"type": "tool_use", "id": "toolu_02Edit", "name": "Edit",
         "input": {"file_path": f"{CWD}/billing/export/csv_writer.py",
                   "old_string": "    if line.amount <= 0:",
                   "new_string": "    if line.kind != 'discount' and line.amount <= 0:"}},
    ])
    result("toolu_02Edit", "The file billing/export/csv_writer.py has been updated.")
    before_compaction = assistant("msg_02B", [
        {"type": "text", "text": "Done: discount lines pass, zero-amount product lines are still refused."}])

    # /compact: the boundary (no parentUuid; logicalParentUuid points back) and the summary.
    boundary = add({"type": "system", "subtype": "compact_boundary", "content": "Conversation compacted",
                    "isMeta": False, "level": "info", "uuid": uid(), "timestamp": next(at),
                    "logicalParentUuid": before_compaction["uuid"],
                    "compactMetadata": {"trigger": "manual", "preTokens": 48210}}, chain=False)
    summary = ("This session is being continued from a previous conversation that ran out of context. "
               "The conversation is summarized below:\n"
               "1. The nightly invoice export failed for invoices with a discount line.\n"
               "2. Cause: DiscountLine amounts are negative by design; billing/export/csv_writer.py:41 refused "
               "any amount <= 0.\n"
               "3. Fix applied: the check now skips discount lines and still refuses zero-amount product lines.")
    last[0] = boundary["uuid"]
    user(summary, isCompactSummary=True, isVisibleInTranscriptOnly=True)

    # Turn 3: after the compaction, the tests.
    user("Now run the export tests.")
    assistant("msg_03A", [{"type": "tool_use", "id": "toolu_03Bash", "name": "Bash",
                           "input": {"command": "pytest -q tests/export", "description": "Run the export tests"}}])
    result("toolu_03Bash", "........................................ [100%]\n42 passed in 3.18s",
           toolUseResult={"stdout": "42 passed in 3.18s", "stderr": "", "interrupted": False})
    assistant("msg_03B", [{"type": "text", "text": "All 42 export tests pass, including the discount case."}])
    entries.append({"type": "custom-title", "customTitle": "Invoice export fails on discount lines",
                    "sessionId": SESSION_ID})
    subpath = f"subagents/agent-{AGENT_ID}"
    return ClaudeSession(project_key=PROJECT_KEY, session_id=SESSION_ID, entries=entries, subagents={subpath: sub},
                         subagent_meta={subpath: {"agentType": "Explore", "description": "How discount lines are built"}})
