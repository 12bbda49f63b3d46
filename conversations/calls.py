"""Which folds keep every tool call with its results.

A checkpoint at position P sends its summary instead of rows 0..P. If a call made at
or before P is answered by a `tool` row after P, the next request starts with a
result whose call is gone, and both OpenAI and Anthropic refuse it. So a fold may
not fall inside a call block: between an assistant reply with calls (which older
imports split over one row per call) and the last of its results, journal rows
included.

Calls and their results sit next to each other, so a position is judged from the
rows around it, never by reading the whole conversation: back over the results and
the reply just before P (its open calls), forward over the rows that may still
answer them. Rows are read in small windows, cached, so judging a page of rows costs
a few reads.
"""

import json

from .message_schema import JOURNAL_KINDS
from .models import Message

WINDOW = 64
# How far the nearest allowed positions are looked for on each side.
SEARCH = 2000


class Rows:
    """(kind, message dict) by position for one conversation, read in windows and kept.
    A row that is not JSON any more reads as kind "broken", which ends every scan."""

    def __init__(self, conversation_id, last: int):
        self.cid = conversation_id
        self.last = last
        self.cache: dict[int, tuple[str, dict]] = {}

    def __getitem__(self, position: int) -> tuple[str, dict]:
        if position not in self.cache:
            lo = max(0, position - WINDOW // 2)
            rows = Message.objects.filter(conversation_id=self.cid, position__gte=lo,
                                          position__lt=lo + WINDOW).values_list("position", "kind", "content")
            for p, kind, raw in rows:
                try:
                    message = json.loads(raw)
                except ValueError:
                    kind, message = "broken", {}
                self.cache[p] = (kind, message if isinstance(message, dict) else {})
            self.cache.setdefault(position, ("broken", {}))
        return self.cache[position]


def _call_ids(message: dict) -> list[str]:
    return [c.get("id") for c in message.get("tool_calls") or () if isinstance(c, dict)]


def open_calls(rows: Rows, position: int) -> set[str]:
    """The calls at or before `position` whose results are not at or before it: back over
    the results and journal rows just before, then over the reply (split or not)."""
    answered, calls, p = set(), [], position
    while p >= 0 and rows[p][0] in ("tool",) + JOURNAL_KINDS:
        if rows[p][0] == "tool":
            answered.add(rows[p][1].get("tool_call_id"))
        p -= 1
    while p >= 0 and rows[p][0] in ("assistant",) + JOURNAL_KINDS:
        if rows[p][0] == "assistant":
            calls += _call_ids(rows[p][1])
        p -= 1
    return {c for c in calls if c not in answered}


def split_calls(rows: Rows, position: int) -> list[str]:
    """The calls a fold at `position` would separate from their results (empty: it may fold)."""
    waiting = open_calls(rows, position)
    if not waiting:
        return []
    split, p, results_seen = [], position + 1, False
    while p <= rows.last:
        kind, message = rows[p]
        if kind == "tool":
            results_seen = True
            if message.get("tool_call_id") in waiting:
                split.append(message["tool_call_id"])
        elif kind == "assistant" and not results_seen:
            pass  # the rest of a reply split over rows
        elif kind not in JOURNAL_KINDS:
            break
        p += 1
    return split


def nearest_allowed(rows: Rows, position: int, *, floor: int = 0) -> tuple[int | None, int | None]:
    """The nearest positions before and after `position` (at or above `floor`) where a
    fold keeps every call with its results; None where there is none near."""
    before = next((q for q in range(position - 1, max(floor, position - SEARCH) - 1, -1)
                   if not split_calls(rows, q)), None)
    after = next((q for q in range(position + 1, min(rows.last, position + SEARCH) + 1)
                  if not split_calls(rows, q)), None)
    return before, after


def unfoldable(conversation_id, last: int, positions) -> dict[int, str]:
    """{position: why a fold there is refused} for those of `positions` inside a call block
    (the page's "Checkpoint here" says it instead of offering the fold)."""
    rows = Rows(conversation_id, last)
    out = {}
    for p in positions:
        split = split_calls(rows, p)
        if split:
            out[p] = (f"A fold here would separate the call {', '.join(split[:3])} from its result; "
                      "fold before the call or after its last result.")
    return out


def placed_fold(conversation_id, position: int, summary: str, *, floor: int = 0) -> tuple[int, str]:
    """Where an imported compaction goes: at `position`, or, when calls made at or before
    it are still waiting for their results, at the nearest position before it where none
    is (never below `floor`, the latest fold), with a note saying so appended to the
    summary. Judged from the rows up to `position` only, so the place does not depend on
    how much of the transcript a streaming import has written yet."""
    rows = Rows(conversation_id, position)
    if not open_calls(rows, position):
        return position, summary
    moved = next((q for q in range(position - 1, max(floor, position - SEARCH) - 1, -1)
                  if not open_calls(rows, q)), None)
    if moved is None:
        return position, summary
    return moved, (f"{summary}\n\n[memoryui: this compaction came at position {position}, between a tool call and "
                   f"its result; it was moved to position {moved} so that no call is separated from its result.]")
