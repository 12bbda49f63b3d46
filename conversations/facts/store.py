"""Every write to long-term facts, one transaction each (recall, which also writes, is in
`recall.py`).

Views, API handlers and commands call these functions; nothing else writes facts.
Each validates first, writes inside one `transaction.atomic()`, returns model
instances, and raises the domain errors of `conversations.errors`, so bad input
writes nothing. The database backs the rules up (facts migration 0002): events
are append-only, a fact's words are never updated, facts are deleted only by
erasure.

Decisions the issue left open (documented here, tested in tests/test_facts_*):
- expiry: `propose_fact` sets `expires_at = recorded_at + MEMORYUI_FACT_RETENTION_DAYS`
  (default 365) unless the caller passes `expires_at` or `retention_days`. Recall
  filters on `expires_at` directly, so an expired fact is never recalled even
  before its `expired` event exists; the event is written by `expire_due()`, run
  by `manage.py expire_facts` and lazily whenever a person opens a facts page.
- edit-and-approve and supersede create a new *approved* fact about the same
  subject; the old one gets `superseded_by`, `superseded_at` and a `superseded`
  event. A superseded proposal stays `proposed` in status but leaves the queue.
- keeping a forgetting candidate writes a `kept` event and resets
  `last_accessed_at` to now (t restarts; the access count — recalls by agents —
  is unchanged), so it drops off the candidates list until it decays again.
"""

from datetime import datetime, timedelta
from typing import NamedTuple

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from conversations import params
from conversations.errors import Conflict, InvalidInput, NotFound, PositionOutOfRange
from conversations.models import Conversation
from conversations.store import clean_text, record_audit

from . import meaning
from .models import APPROVED, CATEGORIES, PROPOSED, REJECTED, Fact, FactAccess, FactEvent

SUBJECT_MAX = Fact._meta.get_field("subject").max_length
TEXT_MAX = 4000
REASON_MAX = 2000
# Ids are BIGINT: a larger number cannot exist and must not reach the database.
MAX_ID = params.MAX_BIGINT
# A century: longer is a typo, and far larger would overflow the calendar.
MAX_RETENTION_DAYS = 36500


# ---------------------------------------------------------------- validation


def _clean_text(value, *, field: str, max_length: int, required: bool = True) -> str:
    """The store's clean_text, but a fact's texts are required unless said otherwise."""
    return clean_text(value, field=field, max_length=max_length, required=required)


def clean_subject(value) -> str:
    return _clean_text(value, field="subject", max_length=SUBJECT_MAX)


def clean_category(value) -> str:
    if value not in CATEGORIES:
        raise InvalidInput(
            f"category {str(value)[:40]!r} is unknown; expected one of {', '.join(CATEGORIES)}", field="category"
        )
    return value


def clean_importance(value) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInput("importance must be a whole number from 1 to 10", field="importance")
    if not 1 <= value <= 10:
        raise InvalidInput(f"importance {value} is outside 1–10", field="importance")
    return value


def clean_datetime(value, *, field: str, default=None):
    if value is None:
        return default
    if not isinstance(value, datetime):
        raise InvalidInput(f"{field} must be a date and time", field=field)
    if timezone.is_naive(value):
        raise InvalidInput(f"{field} needs a time zone (e.g. 2026-01-31T12:00:00Z)", field=field)
    try:
        return params.to_utc(value)
    except ValueError as exc:
        raise InvalidInput(f"{field} {exc}", field=field) from None


def _check_source(conversation_id, position):
    if conversation_id is None and position is None:
        return None, None
    if conversation_id is None or position is None:
        field = "source_position" if position is None else "source_conversation_id"
        raise InvalidInput("give both the source conversation and the source position, or neither", field=field)
    if isinstance(position, bool) or not isinstance(position, int):
        raise InvalidInput("source_position must be an integer", field="source_position")
    try:
        conversation = Conversation.objects.get_live(conversation_id)
    except NotFound as exc:
        raise NotFound(exc.message, field="source_conversation_id") from None
    if not 0 <= position < conversation.next_position:
        where = ("the conversation has no messages" if conversation.next_position == 0
                 else f"it must be between 0 and {conversation.next_position - 1}")
        raise PositionOutOfRange(f"source_position {position} does not exist: {where}", field="source_position")
    return conversation.pk, position


def _locked_fact(fact_id) -> Fact:
    try:
        fact_id = params.parse_int(fact_id if isinstance(fact_id, int) else str(fact_id), minimum=1, maximum=MAX_ID)
    except ValueError:
        raise NotFound(f"fact {str(fact_id)[:40]!r} not found", field="id") from None
    fact = Fact.objects.for_update().exclude(status="erasing").filter(pk=fact_id).first()
    if fact is None:
        raise NotFound(f"fact {fact_id} not found", field="id")
    return fact


def _require_pending(fact: Fact):
    if fact.status != PROPOSED or fact.superseded_by_id:
        state = "superseded" if fact.superseded_by_id else fact.status
        raise Conflict(f"fact {fact.pk} is {state}, not proposed: only a proposal can be reviewed",
                       code="not_proposed")


def _event(fact: Fact, kind: str, actor: str, *, at=None, reason: str = "", detail=None) -> FactEvent:
    return FactEvent.objects.create(
        fact=fact, kind=kind, at=at or timezone.now(), actor=str(actor)[:200], reason=reason, detail=detail or {}
    )


def _audit(actor, action, fact: Fact, detail=None):
    # Ids only: the audit log never holds fact text or the subject's name.
    record_audit(actor=actor, action=action, target_type="fact", target_id=str(fact.pk), detail=detail or {})


# ---------------------------------------------------------------- writes


def propose_fact(*, subject, text, category="other", importance, created_by: str,
                 source_conversation_id=None, source_position=None, valid_from=None,
                 expires_at=None, retention_days=None) -> Fact:
    """Record what an agent believes about a subject, as a proposal for a person."""
    subject = clean_subject(subject)
    text = _clean_text(text, field="text", max_length=TEXT_MAX)
    category = clean_category(category)
    importance = clean_importance(importance)
    now = timezone.now()
    valid_from = clean_datetime(valid_from, field="valid_from", default=now)
    expires_at = clean_datetime(expires_at, field="expires_at")
    if retention_days is not None:
        if expires_at is not None:
            raise InvalidInput("give expires_at or retention_days, not both", field="retention_days")
        if (isinstance(retention_days, bool) or not isinstance(retention_days, int)
                or not 1 <= retention_days <= MAX_RETENTION_DAYS):
            raise InvalidInput(f"retention_days must be a whole number of days from 1 to {MAX_RETENTION_DAYS}",
                               field="retention_days")
    if expires_at is None:
        days = retention_days or settings.MEMORYUI_FACT_RETENTION_DAYS
        expires_at = now + timedelta(days=days)
    if expires_at <= now:
        raise InvalidInput("expires_at must be in the future", field="expires_at")
    with transaction.atomic():
        conversation_id, position = _check_source(source_conversation_id, source_position)
        fact = Fact.objects.create(
            subject=subject, text=text, category=category, importance=importance, status=PROPOSED,
            valid_from=valid_from, recorded_at=now, expires_at=expires_at,
            source_conversation_id=conversation_id, source_position=position, created_by=str(created_by)[:200],
        )
        meaning.queue()
        _event(fact, "proposed", created_by, at=now)
    return fact


def approve_fact(*, fact_id, actor: str) -> Fact:
    with transaction.atomic():
        fact = _locked_fact(fact_id)
        _require_pending(fact)
        now = timezone.now()
        Fact.objects.filter(pk=fact.pk).update(status=APPROVED, reviewed_at=now, reviewed_by=str(actor)[:200])
        fact.status, fact.reviewed_at, fact.reviewed_by = APPROVED, now, str(actor)[:200]
        _event(fact, "approved", actor, at=now)
        _audit(actor, "fact.approved", fact)
    return fact


def reject_fact(*, fact_id, actor: str, reason) -> Fact:
    reason = _clean_text(reason, field="reason", max_length=REASON_MAX)
    with transaction.atomic():
        fact = _locked_fact(fact_id)
        _require_pending(fact)
        now = timezone.now()
        Fact.objects.filter(pk=fact.pk).update(
            status=REJECTED, reviewed_at=now, reviewed_by=str(actor)[:200], reason=reason
        )
        fact.status, fact.reviewed_at, fact.reason = REJECTED, now, reason
        _event(fact, "rejected", actor, at=now, reason=reason)
        _audit(actor, "fact.rejected", fact)
    return fact


def _replace(old: Fact, *, actor, text, category, importance, valid_from, reason, now) -> Fact:
    text = _clean_text(text, field="text", max_length=TEXT_MAX)
    category = clean_category(old.category if category is None else category)
    importance = clean_importance(old.importance if importance is None else importance)
    valid_from = clean_datetime(valid_from, field="valid_from", default=old.valid_from)
    new = Fact.objects.create(
        subject=old.subject, text=text, category=category, importance=importance, status=APPROVED,
        valid_from=valid_from, recorded_at=now, reviewed_at=now, reviewed_by=str(actor)[:200],
        expires_at=max(old.expires_at, now + timedelta(days=1)) if old.expires_at else None,
        source_conversation_id=old.source_conversation_id, source_position=old.source_position,
        created_by=str(actor)[:200],
    )
    meaning.queue()
    _event(new, "approved", actor, at=now, reason=reason, detail={"supersedes": old.pk})
    Fact.objects.filter(pk=old.pk).update(superseded_by=new, superseded_at=now, reason=reason)
    old.superseded_by, old.superseded_at, old.reason = new, now, reason
    _event(old, "superseded", actor, at=now, reason=reason, detail={"superseded_by": new.pk})
    return new


def edit_and_approve(*, fact_id, actor: str, text, category=None, importance=None, valid_from=None,
                     reason: str = "") -> Fact:
    """Approve a proposal with corrected words: a new approved fact supersedes it
    (the proposal's own text is never changed). Returns the new fact."""
    reason = _clean_text(reason, field="reason", max_length=REASON_MAX, required=False) or "edited on review"
    with transaction.atomic():
        old = _locked_fact(fact_id)
        _require_pending(old)
        new = _replace(old, actor=actor, text=text, category=category, importance=importance,
                       valid_from=valid_from, reason=reason, now=timezone.now())
        _audit(actor, "fact.edited_and_approved", old, {"new_fact": new.pk})
    return new


def supersede_fact(*, fact_id, actor: str, text, category=None, importance=None, valid_from=None,
                   reason) -> Fact:
    """Replace an approved, current fact with a corrected one. Returns the new fact."""
    reason = _clean_text(reason, field="reason", max_length=REASON_MAX)
    with transaction.atomic():
        old = _locked_fact(fact_id)
        if old.status != APPROVED or old.superseded_by_id or old.invalidated_recorded_at:
            raise Conflict(f"fact {old.pk} is {old.state()}: only a current approved fact can be superseded",
                           code="not_current")
        new = _replace(old, actor=actor, text=text, category=category, importance=importance,
                       valid_from=valid_from, reason=reason, now=timezone.now())
        _audit(actor, "fact.superseded", old, {"new_fact": new.pk})
    return new


class Decision(NamedTuple):
    """The review decision `undo_review` would take back: what it was ("approved",
    "rejected" or "edited"), its event, and for an edit the fact it created."""

    kind: str
    event: FactEvent
    new_fact: Fact | None = None


def _last_event(fact_id) -> FactEvent | None:
    return FactEvent.objects.filter(fact_id=fact_id).order_by("-id").first()


def undoable_decision(fact: Fact) -> Decision | None:
    """The review decision on this proposal that may still be undone, or None.

    Only the last thing that happened to the fact can be undone: once an agent has
    recalled it, it has expired, been kept or invalidated, the decision had effects
    and the honest tool is invalidate or supersede, not undo. Works from either
    fact of an edit-and-approve (the proposal or the fact that replaced it)."""
    last = _last_event(fact.pk)
    if last is None:
        return None
    if last.kind == "approved" and "supersedes" in last.detail:
        # The replacement of an edit: the decision belongs to the proposal it replaced.
        old = Fact.objects.exclude(status="erasing").filter(pk=last.detail["supersedes"]).first()
        return undoable_decision(old) if old is not None and old.superseded_by_id == fact.pk else None
    if last.kind == "approved" and fact.status == APPROVED and not fact.superseded_by_id \
            and fact.invalidated_recorded_at is None:
        return Decision("approved", last)
    if last.kind == "rejected" and fact.status == REJECTED and "undoes" not in last.detail:
        return Decision("rejected", last)
    if last.kind == "superseded" and fact.status == PROPOSED and fact.superseded_by_id:
        new = Fact.objects.exclude(status="erasing").filter(pk=fact.superseded_by_id).first()
        new_last = _last_event(new.pk) if new is not None else None
        if (new is not None and new.status == APPROVED and not new.superseded_by_id
                and new.invalidated_recorded_at is None and new_last is not None
                and new_last.kind == "approved" and new_last.detail.get("supersedes") == fact.pk):
            return Decision("edited", last, new)
    return None


def undo_review(*, fact_id, actor: str) -> Fact:
    """Take back the last review decision on a proposal: it is a proposal in the
    queue again. Returns the proposal.

    Nothing is edited in place or deleted: the undo is a new `proposed` event on the
    proposal (reason "review undone", detail `undoes`: the decision's event id, and
    `undone`: approved, rejected or edited), and an audit event `fact.review_undone`.
    The status bookkeeping goes back to proposed. Undoing an edit-and-approve
    withdraws the fact the edit created: it becomes `rejected` with its own event,
    so it stays on record and is never recalled. Raises Conflict when the decision
    can no longer be undone (see `undoable_decision`)."""
    with transaction.atomic():
        fact = _locked_fact(fact_id)
        decision = undoable_decision(fact)
        if decision is not None:
            # Lock every fact the undo writes, then decide again on what is locked.
            proposal = fact if decision.event.fact_id == fact.pk else _locked_fact(decision.event.fact_id)
            if decision.new_fact is not None and decision.new_fact.pk != fact.pk:
                _locked_fact(decision.new_fact.pk)
            decision = undoable_decision(proposal)
        if decision is None:
            raise Conflict(
                f"fact {fact.pk} has no review to undo: {_why_not_undoable(fact)}", code="not_undoable")
        now, who = timezone.now(), str(actor)[:200]
        detail = {"undoes": decision.event.pk, "undone": decision.kind}
        if decision.kind == "edited":
            new = decision.new_fact
            Fact.objects.filter(pk=new.pk).update(status=REJECTED, reviewed_at=now, reviewed_by=who,
                                                  reason="review undone")
            undo_of = _last_event(new.pk)
            _event(new, "rejected", actor, at=now, reason="review undone",
                   detail={"undoes": undo_of.pk, "undone": "edited", "proposal": proposal.pk})
            Fact.objects.filter(pk=proposal.pk).update(superseded_by=None, superseded_at=None, reason="")
            detail["withdrawn_fact"] = new.pk
        else:
            Fact.objects.filter(pk=proposal.pk).update(status=PROPOSED, reviewed_at=None, reviewed_by="",
                                                       reason="")
        _event(proposal, "proposed", actor, at=now, reason="review undone", detail=detail)
        _audit(actor, "fact.review_undone", proposal, detail)
    return Fact.objects.get(pk=proposal.pk)


def _why_not_undoable(fact: Fact) -> str:
    last = _last_event(fact.pk)
    if fact.status == PROPOSED and not fact.superseded_by_id:
        return "it is waiting for review"
    if last is not None and last.kind in ("recalled", "kept", "expired", "invalidated", "superseded"):
        what = {"recalled": "an agent has recalled it", "kept": "it was kept", "expired": "it has expired",
                "invalidated": "it was invalidated", "superseded": "it was superseded"}[last.kind]
        return f"{what} since it was reviewed; invalidate or supersede it on the subject page instead"
    return "its last change was not a review decision"


def invalidate_fact(*, fact_id, actor: str, reason, invalid_at=None) -> Fact:
    """The world changed: the fact stopped being true at `invalid_at` (default now).
    It stays on record and drops out of recall from that moment."""
    reason = _clean_text(reason, field="reason", max_length=REASON_MAX)
    now = timezone.now()
    invalid_at = clean_datetime(invalid_at, field="invalid_at", default=now)
    with transaction.atomic():
        fact = _locked_fact(fact_id)
        if fact.invalidated_recorded_at is not None:
            raise Conflict(f"fact {fact.pk} was already invalidated", code="already_invalidated")
        if fact.status != APPROVED or fact.superseded_by_id:
            raise Conflict(f"fact {fact.pk} is {fact.state()}: only an approved, current fact can be invalidated",
                           code="not_current")
        if invalid_at < fact.valid_from:
            raise InvalidInput("invalid_at is before the fact became valid (valid_from)", field="invalid_at")
        Fact.objects.filter(pk=fact.pk).update(invalid_at=invalid_at, invalidated_recorded_at=now, reason=reason)
        fact.invalid_at, fact.invalidated_recorded_at, fact.reason = invalid_at, now, reason
        _event(fact, "invalidated", actor, at=now, reason=reason, detail={"invalid_at": invalid_at.isoformat()})
        _audit(actor, "fact.invalidated", fact)
    return fact


def keep_fact(*, fact_id, actor: str) -> Fact:
    """A person decided a forgetting candidate is still worth remembering."""
    with transaction.atomic():
        fact = _locked_fact(fact_id)
        if fact.state() != "current":
            raise Conflict(f"fact {fact.pk} is {fact.state()}: only a current fact can be kept", code="not_current")
        now = timezone.now()
        Fact.objects.filter(pk=fact.pk).update(last_accessed_at=now)
        fact.last_accessed_at = now
        _event(fact, "kept", actor, at=now)
        _audit(actor, "fact.kept", fact)
    return fact


def record_access(*, actor: str, subject: str, view: str = "subject") -> FactAccess:
    """A person opened a subject's facts. Written before the page renders them."""
    params.check_text(str(subject), "subject")
    with transaction.atomic():
        return FactAccess.objects.create(actor=str(actor)[:200], subject=str(subject)[:SUBJECT_MAX],
                                         view=str(view)[:100])


def expire_due(*, now=None, subject: str | None = None, actor: str = "system") -> int:
    """Write the `expired` event for every fact past its expiry that has none yet.
    Idempotent; returns how many facts it marked."""
    now = now or timezone.now()
    with transaction.atomic():
        qs = Fact.objects.due_to_expire(now)
        if subject is not None:
            qs = qs.about(subject)
        due = list(qs.values_list("id", "expires_at"))
        if not due:
            return 0
        ids = [pk for pk, _ in due]
        Fact.objects.filter(pk__in=ids, expiry_recorded_at__isnull=True).update(expiry_recorded_at=now)
        FactEvent.objects.bulk_create(
            FactEvent(fact_id=pk, kind="expired", at=now, actor=actor, detail={"expires_at": exp.isoformat()})
            for pk, exp in due
        )
    return len(due)
