"""A conversation's numbers: tokens and cost per reply, totals, and the context chart.

The chart shows, for every model call (an assistant row), how much context the model
read: from the row's usage when it has one (input + cache read + cache write), or else
estimated at four characters per token from the rows the model then saw (the handoff
summary of the fold before it, and every row after that fold up to the call) and
marked as estimated. Vertical lines stand where checkpoints fold the record; markers
stand where forks and subagents were started. Each point links to its row.

Both read one pass over the conversation's last CHART_ROWS rows (lengths for all,
texts only of the rows that carry a usage), so a page of a long session stays cheap;
the page loads it after its first paint (views.usage).
"""

import bisect
import json
from dataclasses import dataclass, field

from django.db.models import Case, F, TextField, Value, When
from django.db.models.functions import Length

from .models import Checkpoint, Conversation, Message
from .prices import Totals, Usage, usage_of

CHART_ROWS = 20_000
MAX_POINTS = 300  # per series (measured, estimated)
CHARS_PER_TOKEN = 4
FORK_TOTALS = 20
# The drawing's own coordinate space (the SVG scales to its box).
WIDTH, HEIGHT, PAD_L, PAD_R, PAD_T, PAD_B = 1000, 180, 56, 12, 14, 26


@dataclass
class Call:
    position: int
    tokens: int
    estimated: bool
    usage: Usage | None = None
    x: float = 0
    y: float = 0


@dataclass
class Chart:
    calls: list[Call] = field(default_factory=list)
    folds: list[dict] = field(default_factory=list)
    forks: list[dict] = field(default_factory=list)
    first: int = 0
    last: int = 0
    peak: int = 0
    ticks: list[dict] = field(default_factory=list)
    line: str = ""
    truncated: bool = False
    estimated: int = 0
    thinned: int = 0  # the number of calls, when fewer points stand for them

    @property
    def rows(self) -> int:
        return self.last - self.first + 1


def _rows(conversation_id, first: int):
    """(position, kind, length, content-if-it-has-a-usage) of every row from `first` on."""
    has_usage = Case(
        When(kind="assistant", content__contains='"usage"', then=F("content")),
        default=Value(""), output_field=TextField(),
    )
    return (Message.objects.of(conversation_id).filter(position__gte=first).order_by("position")
            .values_list("position", "kind", Length("content"), has_usage))


def read(convo: Conversation, checkpoints=None) -> tuple[Chart, Totals]:
    """The chart and the totals of one conversation (its own rows and its copied prefix)."""
    last = convo.next_position - 1
    first = max(0, last - CHART_ROWS + 1)
    checkpoints = sorted(checkpoints if checkpoints is not None else Checkpoint.objects.of(convo.pk),
                         key=lambda c: (c.message_position, c.pk))
    fold_at = [c.message_position for c in checkpoints]
    positions, cumulative, running = [], [], 0
    chart, totals = Chart(first=first, last=max(last, 0), truncated=first > 0), Totals()
    for position, kind, length, content in _rows(convo.pk, first):
        positions.append(position)
        running += length or 0
        cumulative.append(running)
        if kind != "assistant":
            continue
        usage = stored_usage(content) if content else None
        if usage is not None:
            totals.add(usage)
            chart.calls.append(Call(position, usage.context, False, usage))
            continue
        # Estimated: the handoff summary of the fold before this call, then the rows after it.
        i = bisect.bisect_left(fold_at, position) - 1
        fold = checkpoints[i] if i >= 0 else None
        start = fold.message_position + 1 if fold else first
        chars = running - length - (cumulative[bisect.bisect_left(positions, start) - 1]
                                    if start > first else 0)
        chars += len(fold.summary) if fold else 0
        chart.calls.append(Call(position, max(chars, 0) // CHARS_PER_TOKEN, True))
        chart.estimated += 1
    chart.folds = [{"position": c.message_position} for c in checkpoints if c.message_position >= first]
    return chart, totals


def stored_usage(content: str):
    """The usage a stored reply's meta reports, or None (none, or not a JSON object)."""
    try:
        return usage_of(json.loads(content).get("meta"))
    except (ValueError, AttributeError):
        return None


def fork_totals(convo: Conversation, children) -> list[dict]:
    """Each direct child's own replies (after the position it was forked at): what it added."""
    out = []
    for child in children[:FORK_TOTALS]:
        start = (child.forked_from_position + 1) if child.forked_from_position is not None else 0
        totals = Totals()
        rows = (Message.objects.of(child.pk).filter(position__gte=start, kind="assistant",
                                                   content__contains='"usage"')
                .values_list("content", flat=True))
        for content in rows.iterator(chunk_size=500):
            usage = stored_usage(content)
            if usage is not None:
                totals.add(usage)
        out.append({"conversation": child, "totals": totals})
    return out


def lay_out(chart: Chart, children) -> Chart:
    """Coordinates for the SVG: x by position, y by tokens (zero at the bottom)."""
    span = max(chart.last - chart.first, 1)
    chart.peak = max([c.tokens for c in chart.calls] + [1])
    inner_w, inner_h = WIDTH - PAD_L - PAD_R, HEIGHT - PAD_T - PAD_B

    def x(position):
        return round(PAD_L + (position - chart.first) / span * inner_w, 1)

    if len(chart.calls) > MAX_POINTS:
        # More calls than the drawing has room for: in each slice of positions, the call that
        # read the most context stands for the others (a peak is never averaged away).
        chart.thinned = len(chart.calls)
        # Measured and estimated calls are thinned apart: an estimate never hides a measurement.
        slices = {}
        for call in chart.calls:
            key = ((call.position - chart.first) * MAX_POINTS // (span + 1), call.estimated)
            if key not in slices or call.tokens > slices[key].tokens:
                slices[key] = call
        chart.calls = sorted(slices.values(), key=lambda c: c.position)
    for call in chart.calls:
        call.x = x(call.position)
        call.y = round(PAD_T + inner_h - call.tokens / chart.peak * inner_h, 1)
    # The line joins the measured calls (all of them when none is measured); estimates are dots.
    measured = [c for c in chart.calls if not c.estimated] or chart.calls
    chart.line = " ".join(f"{c.x},{c.y}" for c in measured)
    for fold in chart.folds:
        fold["x"] = x(fold["position"] + 0.5)
    for child in children:
        at = child.forked_from_position
        if at is None or at < chart.first:
            continue
        chart.forks.append({"position": at, "x": x(at), "conversation": child,
                            "subagent": child.parent_relation == "subagent"})
    step = _nice(chart.peak / 3)
    chart.ticks = [{"value": v, "label": _short(v), "y": round(PAD_T + inner_h - v / chart.peak * inner_h, 1)}
                   for v in range(0, chart.peak + 1, step)]
    return chart


def _nice(value: float) -> int:
    if value <= 1:
        return 1
    magnitude = 10 ** (len(str(int(value))) - 1)
    for m in (1, 2, 5, 10):
        if m * magnitude >= value:
            return m * magnitude
    return 10 * magnitude


def _short(n: int) -> str:
    if n >= 1_000_000:
        return f"{n / 1_000_000:.1f}M".replace(".0M", "M")
    if n >= 1000:
        return f"{n / 1000:.0f}k"
    return str(n)
