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
from datetime import UTC, datetime, timedelta

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


class _ClaudeTranscript:
    """Builds a Claude Code transcript the way Claude Code writes one: each line chained to
    the one before, one line per content block of a response."""

    def __init__(self, start: datetime):
        self.at = _times(start)
        self.base = {"isSidechain": False, "userType": "external", "cwd": CWD, "sessionId": SESSION_ID,
                     "version": VERSION, "gitBranch": "main"}
        self.entries: list[dict] = []
        self.last = None
        self.n = 0

    def next_at(self) -> str:
        return next(self.at)

    def uid(self, prefix="e"):
        self.n += 1
        return f"{prefix}{self.n:03d}0000-0000-4000-8000-{SESSION_ID[-12:]}"

    def add(self, obj, *, chain=True):
        obj = {"parentUuid": self.last if chain else None, **self.base, **obj}
        self.entries.append(obj)
        if "uuid" in obj:
            self.last = obj["uuid"]
        return obj

    def user(self, content, **extra):
        return self.add({"type": "user", "message": {"role": "user", "content": content}, "uuid": self.uid(),
                         "timestamp": self.next_at(), **extra})

    def assistant(self, msg_id, blocks, *, usage=None):
        out = None
        for block in blocks:  # Claude Code writes one line per content block of a response
            out = self.add({"type": "assistant", "requestId": f"req_{msg_id}",
                            "message": {"id": msg_id, "type": "message", "role": "assistant", "model": MODEL,
                                        "content": [block], "stop_reason": None, "stop_sequence": None,
                                        "usage": usage or {"input_tokens": 1830, "output_tokens": 96}},
                            "uuid": self.uid(), "timestamp": self.next_at()})
        return out

    def result(self, tool_use_id, content, **extra):
        return self.user([{"type": "tool_result", "tool_use_id": tool_use_id, "content": content}], **extra)


def claude_agent_session(start: datetime | None = None) -> ClaudeSession:
    """The sample session (deterministic; `start` moves its timestamps)."""
    t = _ClaudeTranscript(start or datetime(2026, 11, 24, 9, 30, tzinfo=UTC))
    _first_turn(t)
    sub_prompt = t.entries[-1]["message"]["content"][0]["input"]["prompt"]
    sub, report = _subagent_transcript(t, sub_prompt)
    t.result("toolu_01Task", [{"type": "text", "text": report}],
             toolUseResult={"status": "completed", "agentId": AGENT_ID, "prompt": sub_prompt,
                            "content": [{"type": "text", "text": report}], "totalDurationMs": 9120,
                            "totalTokens": 2252, "totalToolUseCount": 1})
    t.assistant("msg_01C", [{"type": "text", "text": "The cause: discount lines carry a negative amount by design, "
                                                     "and `csv_writer.py` line 41 rejects any amount ≤ 0. The check "
                                                     "should only refuse zero-amount product lines."}])
    t.add({"type": "system", "subtype": "turn_duration", "durationMs": 41200, "uuid": t.uid(), "timestamp": t.next_at(),
           "isMeta": False, "level": "info"})

    _fix_and_compaction(t)
    # Turn 3: after the compaction, the tests.
    t.user("Now run the export tests.")
    t.assistant("msg_03A", [{"type": "tool_use", "id": "toolu_03Bash", "name": "Bash",
                             "input": {"command": "pytest -q tests/export", "description": "Run the export tests"}}])
    t.result("toolu_03Bash", "........................................ [100%]\n42 passed in 3.18s",
             toolUseResult={"stdout": "42 passed in 3.18s", "stderr": "", "interrupted": False})
    t.assistant("msg_03B", [{"type": "text", "text": "All 42 export tests pass, including the discount case."}])
    t.entries.append({"type": "custom-title", "customTitle": "Invoice export fails on discount lines",
                      "sessionId": SESSION_ID})
    subpath = f"subagents/agent-{AGENT_ID}"
    return ClaudeSession(project_key=PROJECT_KEY, session_id=SESSION_ID, entries=t.entries,
                         subagents={subpath: sub},
                         subagent_meta={subpath: {"agentType": "Explore",
                                                  "description": "How discount lines are built"}})


def _first_turn(t: _ClaudeTranscript) -> None:
    # Turn 1: the question, a search, a subagent that reads the code, the finding.
    t.user("The nightly invoice export fails for invoices with a discount line. Find out why.")
    t.assistant("msg_01A", [
        {"type": "thinking", "thinking": "A discount line probably has a negative amount; the exporter may "
                                         "validate amounts as positive. Search for the validation first.",
         "signature": "EqQBCkYIBxgCKkD0c2lnbmF0dXJl"},
        {"type": "text", "text": "I'll find where the export validates line amounts."},
        {"type": "tool_use", "id": "toolu_01Grep", "name": "Grep",
         "input": {"pattern": "amount.*<= 0|negative", "path": "billing/export"}},
    ])
    t.result("toolu_01Grep", "billing/export/csv_writer.py:41:    if line.amount <= 0:\n"
                             "billing/export/csv_writer.py:42:        raise ExportError(f\"bad amount {line.amount}\")",
             toolUseResult={"mode": "content", "numFiles": 1, "numLines": 2})
    t.assistant("msg_01B", [
        {"type": "text", "text": "Found a check that refuses amounts ≤ 0. I'll have an Explore agent read how "
                                 "discount lines are built while I look at the writer."},
        {"type": "tool_use", "id": "toolu_01Task", "name": "Task",
         "input": {"description": "How discount lines are built",
                   "prompt": "Read billing/invoices/lines.py and report how discount lines are created: "
                             "their sign, their type, and who consumes them.",
                   "subagent_type": "Explore"}},
    ])


def _subagent_transcript(t: _ClaudeTranscript, sub_prompt: str) -> tuple[list[dict], str]:
    """The subagent's own transcript (subagents/agent-<id>.jsonl): a sidechain with its agentId."""
    sub: list[dict] = []
    sub_last = [None]

    def sub_add(obj):
        obj = {"parentUuid": sub_last[0], "isSidechain": True, "userType": "external", "cwd": CWD,
               "sessionId": SESSION_ID, "version": VERSION, "gitBranch": "main", "agentId": AGENT_ID, **obj,
               "uuid": t.uid("s"), "timestamp": t.next_at()}
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
    return sub, report


def _fix_and_compaction(t: _ClaudeTranscript) -> None:
    # Turn 2: the fix.
    t.user("Fix it, and keep refusing zero amounts on product lines.")
    t.assistant("msg_02A", [
        {"type": "tool_use", "id": "toolu_02Edit", "name": "Edit",
         "input": {"file_path": f"{CWD}/billing/export/csv_writer.py",
                   "old_string": "    if line.amount <= 0:",
                   "new_string": "    if line.kind != 'discount' and line.amount <= 0:"}},
    ])
    t.result("toolu_02Edit", "The file billing/export/csv_writer.py has been updated.")
    before_compaction = t.assistant("msg_02B", [
        {"type": "text", "text": "Done: discount lines pass, zero-amount product lines are still refused."}])

    # /compact: the boundary (no parentUuid; logicalParentUuid points back) and the summary.
    boundary = t.add({"type": "system", "subtype": "compact_boundary", "content": "Conversation compacted",
                      "isMeta": False, "level": "info", "uuid": t.uid(), "timestamp": t.next_at(),
                      "logicalParentUuid": before_compaction["uuid"],
                      "compactMetadata": {"trigger": "manual", "preTokens": 48210}}, chain=False)
    summary = ("This session is being continued from a previous conversation that ran out of context. "
               "The conversation is summarized below:\n"
               "1. The nightly invoice export failed for invoices with a discount line.\n"
               "2. Cause: DiscountLine amounts are negative by design; billing/export/csv_writer.py:41 refused "
               "any amount <= 0.\n"
               "3. Fix applied: the check now skips discount lines and still refuses zero-amount product lines.")
    t.last = boundary["uuid"]
    t.user(summary, isCompactSummary=True, isVisibleInTranscriptOnly=True)


# ---- OpenAI Agents SDK ------------------------------------------------------------------

OPENAI_SESSION_ID = "travel-desk-9c41"


def openai_agents_items() -> list[dict]:
    """Three turns of a travel-desk agent as the OpenAI Agents SDK hands them to its
    Session: the user's input as an easy message, then the run's items (reasoning, a
    function call and its output, the assistant's message) in the SDK's own shapes."""

    def said(item_id, text):
        return {"id": item_id, "type": "message", "role": "assistant", "status": "completed",
                "content": [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}]}

    def call(n, name, args):
        return {"id": f"fc_{n}", "type": "function_call", "call_id": f"call_{n}", "name": name,
                "arguments": args, "status": "completed"}

    def output(n, text):
        return {"type": "function_call_output", "call_id": f"call_{n}", "output": text}

    return [
        {"role": "user", "content": "I need to be in Oslo for a meeting on 12 March at 9:00. Find me a flight "
                                    "from Berlin the evening before."},
        {"id": "rs_1", "type": "reasoning", "summary": [
            {"type": "summary_text", "text": "Evening of 11 March, BER to OSL; check the schedule first."}]},
        call(1, "search_flights", '{"from": "BER", "to": "OSL", "date": "2027-03-11", "after": "17:00"}'),
        output(1, '[{"flight": "SK 1676", "departs": "18:40", "arrives": "20:35", "price_eur": 164}, '
                  '{"flight": "DY 1103", "departs": "21:05", "arrives": "23:00", "price_eur": 98}]'),
        said("msg_1", "Two evening flights on 11 March: SK 1676 at 18:40 (arrives 20:35, 164 EUR) and DY 1103 "
                      "at 21:05 (arrives 23:00, 98 EUR). Shall I hold one?"),
        {"role": "user", "content": "The SAS one. And a hotel near the central station for one night."},
        call(2, "hold_flight", '{"flight": "SK 1676", "date": "2027-03-11"}'),
        output(2, '{"hold": "H-55201", "expires": "2027-03-01T12:00:00Z"}'),
        call(3, "search_hotels", '{"city": "Oslo", "near": "Oslo S", "nights": 1, "check_in": "2027-03-11"}'),
        output(3, '[{"hotel": "Hotel Fjordlys", "walk_min": 3, "price_eur": 142}]'),
        said("msg_2", "SK 1676 is held until 1 March (hold H-55201). Hotel Fjordlys is a 3-minute walk from "
                      "Oslo S, 142 EUR for the night. Book both?"),
        {"role": "user", "content": "Yes, book both."},
        call(4, "book", '{"hold": "H-55201", "hotel": "Hotel Fjordlys", "nights": 1}'),
        output(4, '{"flight_booking": "SK-8QX2LM", "hotel_booking": "FJ-20417"}'),
        said("msg_3", "Booked: flight SK-8QX2LM (11 March, 18:40) and Hotel Fjordlys FJ-20417 for one night. "
                      "You will be 3 minutes from the station for your 9:00 meeting."),
    ]


# ---- an MCP client (Claude Code with memoryui-mcp registered) ----------------------------

MCP_TITLE = "Release notes for billing 4.2 (written through memoryui-mcp)"


def mcp_messages() -> list[dict]:
    """What an agent in Claude Code appended through memoryui-mcp's append_messages tool
    while drafting release notes: its notes to itself and the exchange it kept."""
    return [
        {"kind": "note", "text": "Started from Claude Code via the memoryui MCP server; this conversation keeps "
                                 "the release-notes work across sessions."},
        {"kind": "user", "content": "Draft the release notes for billing 4.2 from the merged pull requests."},
        {"kind": "assistant", "content": "Reading the merged pull requests since 4.1.",
         "tool_calls": [{"id": "gh_1", "name": "list_merged_prs", "arguments": {"since": "v4.1.0"}}]},
        {"kind": "tool", "tool_call_id": "gh_1", "name": "list_merged_prs",
         "content": "#812 Discount lines export correctly\n#815 Invoice PDF shows VAT per line\n"
                    "#819 Drop Python 3.9"},
        {"kind": "assistant", "content": "## billing 4.2\n- Fixed: invoices with a discount line export to CSV "
                                         "again (#812).\n- New: invoice PDFs show VAT per line (#815).\n"
                                         "- Removed: support for Python 3.9 (#819)."},
        {"kind": "did", "text": "Saved the draft to docs/releases/4.2.md."},
    ]
