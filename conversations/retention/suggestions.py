"""Subjects people can find: what a deletion request for a subject with nothing
stored suggests instead, and whether it really has nothing stored.

A mistyped subject (`customer:maria.keller` for `customer:maria.keller@example.com`)
must not end in a receipt for zero deletions while the real data stays. So when a
subject has nothing stored, the preview says so and offers the stored subjects that
are close to it, with their counts; filing a receipt that nothing is held stays
possible, as proof, but only as an explicit choice (`allow_empty`).

Close means, compared in normal form (conversations/subjects.py, so case and
Unicode composition never matter):
- edit distance ≤ 2 (`cust:4821` for `cust:48213`);
- the same local part: the text before `@`, after any `kind:` prefix, when one of
  the two is an e-mail address (`maria.keller` ~ `customer:maria.keller@example.com`);
- one is a prefix of the other, when the shorter one goes past its `kind:` prefix by
  at least three characters (`customer:maria.keller` ~ `customer:maria.keller@example.com`;
  `customer:` alone suggests nothing: it would be everyone).

Cost. No query loads every subject. Candidates come from the `subject_norm` indexes
of the conversation and fact tables, read with a loose index scan (a recursive query
that seeks the next distinct value, one index probe per subject, never one per row):
- the first SCAN distinct subjects of each table (on a store with fewer subjects than
  that, the suggestions are complete);
- NEAR distinct subjects on each side of the typed one in index order, and after its
  local part and `kind:local part@` for each kind seen: where prefixes, a typo near the
  end, and the e-mail forms of a local part sit, however many subjects there are;
- one indexed IN query for the stored subjects that are a prefix of the typed one.
That is at most about 2,000 index probes per table, whatever the number of rows. On a
store with more distinct subjects than SCAN, a typo near the start of a subject that
is far from it in index order can be missed; the prefix, local-part and near-the-end
rules are always found.
"""

from dataclasses import asdict, dataclass

from django.apps import apps
from django.db import connection

from conversations import plugins
from conversations.errors import NotFound
from conversations.models import Conversation, IdempotencyKey
from conversations.subjects import normalize_subject

SCAN = 1000
NEAR = 50
KINDS = 10
MAX_SUGGESTIONS = 5
MAX_DISTANCE = 2
# How far the shorter of two subjects must go past its `kind:` prefix to count as a prefix of the other.
PREFIX_MIN = 3


@dataclass(frozen=True)
class Suggestion:
    subject: str
    conversations: int
    facts: int
    # Why it is offered: "edit_distance", "local_part" or "prefix".
    why: str

    def as_dict(self) -> dict:
        return asdict(self)


class NothingStored(NotFound):
    """A deletion request for what holds nothing, without `allow_empty`: no receipt is
    filed. The error body carries the stored subjects that are close to it."""

    code = "nothing_stored"

    def __init__(self, message: str, *, suggestions: list[Suggestion], field: str = "subject"):
        super().__init__(message, field=field)
        self.suggestions = suggestions

    def as_dict(self) -> dict:
        return {**super().as_dict(), "suggestions": [s.as_dict() for s in self.suggestions]}


def _fact_model():
    try:
        return apps.get_model("facts", "Fact")
    except LookupError:  # the facts app is not installed: conversations only
        return None


def _tables() -> list[str]:
    fact = _fact_model()
    return [Conversation._meta.db_table] + ([fact._meta.db_table] if fact is not None else [])


def _walk(table: str, start: str, limit: int, *, backward: bool = False) -> list[str]:
    """Up to `limit` distinct subject_norm values from `start` on (or before it, going
    backward), one index seek each."""
    first, step = ("MAX", "<") if backward else ("MIN", ">")
    table = connection.ops.quote_name(table)
    sql = (f"WITH RECURSIVE walk(v, n) AS ("
           f" SELECT (SELECT {first}(subject_norm) FROM {table} WHERE subject_norm {step}{'' if backward else '='} %s"
           f"  AND subject_norm <> ''), 1"
           f" UNION ALL"
           f" SELECT (SELECT {first}(subject_norm) FROM {table} WHERE subject_norm {step} walk.v"
           f"  AND subject_norm <> ''), n + 1 FROM walk WHERE walk.v IS NOT NULL AND n < %s)"
           f" SELECT v FROM walk WHERE v IS NOT NULL")
    with connection.cursor() as cursor:
        cursor.execute(sql, [start, limit])
        return [row[0] for row in cursor.fetchall()]


def _equal_to_any(table: str, values: list[str]) -> list[str]:
    if not values:
        return []
    table = connection.ops.quote_name(table)
    marks = ", ".join(["%s"] * len(values))
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT DISTINCT subject_norm FROM {table} WHERE subject_norm IN ({marks})", values)
        return [row[0] for row in cursor.fetchall()]


def _kind_and_rest(norm: str) -> tuple[str, str]:
    kind, sep, rest = norm.partition(":")
    return (kind, rest) if sep else ("", norm)


def local_part(norm: str) -> str:
    """The text before `@`, after any `kind:` prefix."""
    return _kind_and_rest(norm)[1].split("@", 1)[0]


def _distance(a: str, b: str, cap: int = MAX_DISTANCE) -> int:
    """Levenshtein distance, or cap + 1 as soon as it must exceed cap."""
    if abs(len(a) - len(b)) > cap:
        return cap + 1
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i]
        for j, cb in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb)))
        if min(current) > cap:
            return cap + 1
        previous = current
    return previous[-1]


def _closeness(typed: str, stored: str) -> tuple[int, str] | None:
    """(rank, why) when `stored` is close to `typed` (both in normal form), else None."""
    if stored == typed:
        return None
    d = _distance(typed, stored)
    if d <= MAX_DISTANCE:
        return d, "edit_distance"
    local = local_part(typed)
    if ("@" in typed or "@" in stored) and len(local) >= PREFIX_MIN and local == local_part(stored):
        return 3, "local_part"
    short, long = sorted((typed, stored), key=len)
    if long.startswith(short) and len(_kind_and_rest(short)[1]) >= PREFIX_MIN:
        return 4, "prefix"
    return None


def _candidates(table: str, norm: str) -> set[str]:
    found = set(_walk(table, "", SCAN))
    kinds = sorted({_kind_and_rest(v)[0] for v in found} - {""})[:KINDS]
    local = local_part(norm)
    found.update(_walk(table, norm[:-MAX_DISTANCE], NEAR * 2))
    found.update(_walk(table, norm, NEAR, backward=True))
    if len(local) >= PREFIX_MIN:
        for start in [local + "@"] + [f"{kind}:{local}@" for kind in kinds]:
            found.update(v for v in _walk(table, start, NEAR) if v.startswith(start))
    rest_start = len(norm) - len(_kind_and_rest(norm)[1])
    found.update(_equal_to_any(table, [norm[:i] for i in range(rest_start + PREFIX_MIN, len(norm))]))
    return found


def suggest_subjects(subject: str, *, limit: int = MAX_SUGGESTIONS) -> list[Suggestion]:
    """The stored subjects closest to `subject`, best first, with their counts."""
    norm = normalize_subject(subject)
    if not norm:
        return []
    ranked = []
    candidates = set()
    for table in _tables():
        candidates |= _candidates(table, norm)
    for stored in candidates:
        close = _closeness(norm, stored)
        if close is not None:
            ranked.append((close[0], abs(len(stored) - len(norm)), stored, close[1]))
    ranked.sort()
    suggestions = []
    fact = _fact_model()
    for _, _, stored, why in ranked:
        conversations = Conversation.objects.live().filter(subject_norm=stored)
        facts = fact.objects.filter(subject_norm=stored).exclude(status="erasing") if fact is not None else None
        n_conversations = conversations.count()
        n_facts = facts.count() if facts is not None else 0
        if not n_conversations and not n_facts:
            continue  # only rows being deleted hold it
        shown = (conversations.values_list("subject", flat=True).first()
                 or (facts.values_list("subject", flat=True).first() if facts is not None else None) or stored)
        suggestions.append(Suggestion(subject=shown, conversations=n_conversations, facts=n_facts, why=why))
        if len(suggestions) == limit:
            break
    return suggestions


def held_elsewhere(subject: str) -> int:
    """Rows and files about the subject that are neither conversations nor facts: uploads
    previewed for it and never confirmed, stored answers of writes that named it."""
    if not subject:
        return 0
    held = IdempotencyKey.objects.filter(subject_norm=normalize_subject(subject)).count()
    for leftovers in plugins.leftover_files.registered():
        held += len(leftovers.about(subject=subject, conversation_ids=()))
    return held


def nothing_stored(preview) -> bool:
    """True when carrying out this preview's request would delete nothing at all."""
    return preview.is_empty and not held_elsewhere(preview.subject)


def refuse_empty(preview) -> None:
    """Raise NothingStored (with suggestions) when the request would delete nothing."""
    if not nothing_stored(preview):
        return
    if preview.subject:
        raise NothingStored("nothing is stored about this subject: no receipt was filed. Send allow_empty: true "
                            "to file a receipt that nothing is held, or use one of the suggested subjects",
                            suggestions=suggest_subjects(preview.subject))
    raise NothingStored("none of these conversations exists: no receipt was filed. Send allow_empty: true to "
                        "file a receipt that nothing is held", suggestions=[], field="conversation_ids")
