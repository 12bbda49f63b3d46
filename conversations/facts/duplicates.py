"""What a reviewer needs beside a proposal: the subject's approved facts, and which
of them the proposal likely repeats.

Candidates come from the facts' full-text index (the words the proposal shares
with the subject's facts, best ranked first), so a subject with thousands of
facts costs one index query per proposal; the few candidates are then compared
in Python on normalised text. `similarity` is pure and tested on its own.
"""

import re
import unicodedata
from dataclasses import dataclass, field
from difflib import SequenceMatcher

from django.db.models import Count

from . import meaning, recall
from .models import Fact

# At or above this a known fact is flagged as a likely duplicate of the proposal.
DUPLICATE_AT = 0.75
# How many of the subject's current facts a queue item lists (duplicates come first, always shown).
SHOWN = 5
# How many full-text candidates are compared per proposal.
CANDIDATES = 20
# A cosine between a proposal's vector and a known fact's at or above this makes the known
# fact a likely duplicate by meaning ("money back" against "refund"). Measured with the
# embedded model: "Wants their money back for order 7" / "Asked for a refund on order 7"
# 0.55, "Allergic to peanuts" / "Has a nut allergy" 0.64, "Lives in Lyon" / "Moved to
# Lyon" 0.76; "Prefers email" / "Prefers phone calls" 0.48, unrelated facts near 0.
MEANING_DUPLICATE_AT = 0.5

_WORD = re.compile(r"\w+", re.UNICODE)
# Words that carry no fact of their own; dropped before comparing word sets.
_STOP = frozenset(
    "a an and are as at be by for from has have in is it its of on or over rather than that the their "
    "they this to was were will with".split()
)


def normalise(text: str) -> str:
    """Case, width, accents' composition, punctuation and spacing folded away."""
    return " ".join(_WORD.findall(unicodedata.normalize("NFKC", text or "").casefold()))


def _stem(word: str) -> str:
    # Enough to equate "refund"/"refunds"/"refunded", not a linguist's stemmer.
    for suffix in ("ing", "ed", "es", "s"):
        if len(word) > len(suffix) + 3 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


def _content_words(normalised: str) -> set[str]:
    return {_stem(w) for w in normalised.split() if w not in _STOP}


def similarity(a: str, b: str) -> float:
    """How alike two facts read, 0..1: 1.0 when they are the same words after
    normalising; otherwise the better of the character-level ratio and the share
    of content words the shorter one has in common with the longer."""
    na, nb = normalise(a), normalise(b)
    if not na or not nb:
        return 0.0
    if na == nb:
        return 1.0
    chars = SequenceMatcher(None, na, nb, autojunk=False).ratio()
    wa, wb = _content_words(na), _content_words(nb)
    words = len(wa & wb) / min(len(wa), len(wb)) if wa and wb else 0.0
    # A one-word overlap between one-word facts says little; weigh word overlap by size.
    if min(len(wa), len(wb)) < 2:
        words *= 0.5
    return round(min(0.99, max(chars, words)), 2)


@dataclass
class Known:
    fact: Fact
    score: float = 0.0
    # Found by meaning (the vectors' cosine reached MEANING_DUPLICATE_AT), not by words alone.
    by_meaning: bool = False

    @property
    def duplicate(self) -> bool:
        return self.score >= DUPLICATE_AT or self.by_meaning

    @property
    def by_words(self) -> bool:
        """A duplicate by its words; one found only by meaning says so on the page."""
        return self.score >= DUPLICATE_AT


@dataclass
class SubjectFacts:
    """Beside one proposal: how many current facts its subject has, the few shown
    (likely duplicates first), and the duplicates alone."""

    total: int
    shown: list[Known] = field(default_factory=list)

    @property
    def duplicates(self) -> list[Known]:
        return [k for k in self.shown if k.duplicate]


def _near_in_meaning(proposal: Fact, current) -> dict[int, float]:
    """fact id → cosine, for the subject's current facts at or above MEANING_DUPLICATE_AT."""
    # The proposal's words embedded here: its stored vector may still be waiting for the
    # background embedder, and one short text costs a fraction of a millisecond.
    rows = (current.about(proposal.subject).exclude(pk=proposal.pk)
            .values_list("id", "text", "vector__vector", "vector__model_id"))
    found = meaning.similarities(meaning.of_text(proposal.text), rows)
    return {pk: round(min(0.99, score), 2) for pk, score in found.items() if score >= MEANING_DUPLICATE_AT}


def beside(proposals: list[Fact]) -> dict[int, SubjectFacts]:
    """proposal id → the subject's current approved facts as a reviewer sees them."""
    subjects = {p.subject for p in proposals}
    if not subjects:
        return {}
    current = Fact.objects.recallable().filter(subject__in=subjects)
    totals = dict(current.values_list("subject").annotate(n=Count("id")).values_list("subject", "n"))
    out = {}
    top_cache: dict[str, list[Fact]] = {}
    for proposal in proposals:
        total = totals.get(proposal.subject, 0)
        if not total:
            out[proposal.pk] = SubjectFacts(0)
            continue
        ranks = recall.rank_by_words(proposal.subject, proposal.text)
        best = sorted(ranks, key=lambda pk: (-ranks[pk], -pk))[: CANDIDATES * 2]
        near = _near_in_meaning(proposal, current)
        candidates = list(current.about(proposal.subject).filter(pk__in=set(best) | set(near))
                          .exclude(pk=proposal.pk))
        scored = sorted((Known(f, max(similarity(proposal.text, f.text), near.get(f.pk, 0.0)), f.pk in near)
                         for f in candidates), key=lambda k: (-k.score, -k.fact.pk))[:CANDIDATES]
        dups = [k for k in scored if k.duplicate]
        if proposal.subject not in top_cache:
            top_cache[proposal.subject] = list(
                current.about(proposal.subject).order_by("-importance", "-recorded_at", "-id")[:SHOWN])
        seen = {k.fact.pk for k in dups}
        rest = [Known(f, similarity(proposal.text, f.text)) for f in top_cache[proposal.subject]
                if f.pk not in seen and f.pk != proposal.pk]
        out[proposal.pk] = SubjectFacts(total, dups + rest[: max(0, SHOWN - len(dups))])
    return out
