"""What a model reply cost: its usage read from the row's meta, priced from one table.

The table is US dollars per million tokens, by model name prefix (the longest prefix
that matches wins, so "claude-sonnet-4-5-20250929" finds "claude-sonnet-4"). A
deployment with other prices, or other models, sets `MEMORYUI_MODEL_PRICES` in its
settings to a dict of the same shape; its entries replace or add to these. A model
with no price shows its tokens only: a cost is never guessed.

Usage comes in three dialects, all read here:
- Anthropic: input_tokens, output_tokens, cache_read_input_tokens, cache_creation_input_tokens
  (input_tokens excludes the cached part);
- OpenAI: prompt_tokens, completion_tokens, prompt_tokens_details.cached_tokens
  (prompt_tokens includes the cached part), or the Responses API's input/output_tokens
  with input_tokens_details.cached_tokens;
- LangChain: input_tokens, output_tokens, input_token_details.cache_read / cache_creation
  (input_tokens includes the cached part).
"""

from dataclasses import dataclass
from decimal import Decimal

from django.conf import settings

# USD per million tokens: input, output, cache read, cache write.
PRICES = {
    "claude-opus-4-1": (15, 75, 1.5, 18.75),
    "claude-opus-4-5": (5, 25, 0.5, 6.25),
    "claude-opus-4": (15, 75, 1.5, 18.75),
    "claude-sonnet-4": (3, 15, 0.3, 3.75),
    "claude-3-7-sonnet": (3, 15, 0.3, 3.75),
    "claude-3-5-sonnet": (3, 15, 0.3, 3.75),
    "claude-sonnet": (3, 15, 0.3, 3.75),
    "claude-haiku-4-5": (1, 5, 0.1, 1.25),
    "claude-3-5-haiku": (0.8, 4, 0.08, 1),
    "claude-haiku": (0.8, 4, 0.08, 1),
    "gpt-4o-mini": (0.15, 0.6, 0.075, 0.15),
    "gpt-4o": (2.5, 10, 1.25, 2.5),
    "gpt-4.1-mini": (0.4, 1.6, 0.1, 0.4),
    "gpt-4.1-nano": (0.1, 0.4, 0.025, 0.1),
    "gpt-4.1": (2, 8, 0.5, 2),
    "gpt-5-mini": (0.25, 2, 0.025, 0.25),
    "gpt-5-nano": (0.05, 0.4, 0.005, 0.05),
    "gpt-5": (1.25, 10, 0.125, 1.25),
    "o3": (2, 8, 0.5, 2),
    "o4-mini": (1.1, 4.4, 0.275, 1.1),
}

MILLION = Decimal(1_000_000)


@dataclass
class Usage:
    """One reply's tokens, in one dialect-free shape. `input` excludes cached tokens."""

    model: str = ""
    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0
    latency_ms: float | None = None

    @property
    def context(self) -> int:
        """The tokens the model read for this reply: its context size at that call."""
        return self.input + self.cache_read + self.cache_write

    @property
    def cost(self) -> Decimal | None:
        price = price_of(self.model)
        if price is None:
            return None
        per = [Decimal(str(p)) for p in price]
        total = self.input * per[0] + self.output * per[1] + self.cache_read * per[2] + self.cache_write * per[3]
        return total / MILLION


def table() -> dict:
    return {**PRICES, **(settings.MEMORYUI_MODEL_PRICES or {})}


def price_of(model: str):
    if not model:
        return None
    prices = table()
    name = model.lower().split("/")[-1]  # "anthropic/claude-…" or "openai/gpt-…"
    best = max((p for p in prices if name.startswith(p.lower())), key=len, default=None)
    return prices[best] if best else None


def _int(value) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def usage_of(meta) -> Usage | None:
    """The usage in a row's meta, or None when it carries none."""
    if not isinstance(meta, dict):
        return None
    raw = meta.get("usage")
    if not isinstance(raw, dict):
        return None
    model = meta.get("model") if isinstance(meta.get("model"), str) else ""
    out = Usage(model=model)
    if "prompt_tokens" in raw or "completion_tokens" in raw:  # OpenAI chat
        details = raw.get("prompt_tokens_details") if isinstance(raw.get("prompt_tokens_details"), dict) else {}
        out.cache_read = _int(details.get("cached_tokens"))
        out.input = max(0, _int(raw.get("prompt_tokens")) - out.cache_read)
        out.output = _int(raw.get("completion_tokens"))
    else:
        out.input = _int(raw.get("input_tokens"))
        out.output = _int(raw.get("output_tokens"))
        if "cache_read_input_tokens" in raw or "cache_creation_input_tokens" in raw:  # Anthropic
            out.cache_read = _int(raw.get("cache_read_input_tokens"))
            out.cache_write = _int(raw.get("cache_creation_input_tokens"))
        else:  # LangChain / OpenAI Responses: input includes the cached part
            details = raw.get("input_token_details") or raw.get("input_tokens_details") or {}
            if isinstance(details, dict):
                out.cache_read = _int(details.get("cache_read")) or _int(details.get("cached_tokens"))
                out.cache_write = _int(details.get("cache_creation"))
                out.input = max(0, out.input - out.cache_read - out.cache_write)
    if not (out.input or out.output or out.cache_read or out.cache_write):
        return None
    out.latency_ms = _latency(meta)
    return out


def _latency(meta: dict) -> float | None:
    for key in ("latency_ms", "duration_ms"):
        value = meta.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0:
            return float(value)
    otel = meta.get("otel")
    if isinstance(otel, dict):
        return _latency(otel)
    return None


@dataclass
class Totals:
    replies: int = 0
    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0
    cost: Decimal = Decimal(0)
    unpriced: int = 0  # replies whose model has no price: their cost is not in `cost`

    def add(self, usage: Usage) -> None:
        self.replies += 1
        self.input += usage.input
        self.output += usage.output
        self.cache_read += usage.cache_read
        self.cache_write += usage.cache_write
        cost = usage.cost
        if cost is None:
            self.unpriced += 1
        else:
            self.cost += cost

    @property
    def priced(self) -> bool:
        return self.replies > self.unpriced


def money(value: Decimal | None) -> str:
    if value is None:
        return ""
    if value < Decimal("0.01"):
        return f"${value:.4f}"
    return f"${value:,.2f}" if value >= 1 else f"${value:.3f}"
