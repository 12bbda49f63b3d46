"""The pages where reviewers and admins decide about long-term facts.

Function views: parse, one store call or read, render. Every view goes through
`reviewer_required` (anonymous → login; auditors and users without a role → 403) or
`_admin_only`. Every page that shows fact text records an access-log row per
subject shown, before rendering. Review actions answer htmx with just the
changed fragment (the queue item vanishes, the count updates out of band) and
plain form posts with a redirect, so the pages work without JavaScript.
"""

from datetime import timedelta

from django.conf import settings
from django.contrib import messages
from django.db.models import Min, Q
from django.http import Http404
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.cache import patch_vary_headers
from django.utils.http import urlencode
from django.views.decorators.http import require_http_methods, require_POST, require_safe

from conversations import keyset, params
from conversations.confirm import Confirmation, confirmed, not_confirmed, render_confirmation
from conversations.errors import InvalidInput, StoreError
from conversations.message_schema import message_text
from conversations.models import Conversation
from conversations.reads import read_rows
from conversations.roles import actor_of, is_admin, reviewer_required, role_required

from . import duplicates, recall, store
from .models import CATEGORIES, Fact, FactAccess, FactEvent

QUEUE_PAGE = 50
LIST_LIMIT = 200
HISTORY_LIMIT = 500
ACCESS_PAGE = 100
# Messages shown around a fact's source position.
CONTEXT_BEFORE, CONTEXT_AFTER = 2, 2

_admin_only = role_required(is_admin, "Only admins may read the facts access log.")


def _log_reads(request, subjects, view: str):
    for subject in sorted(set(subjects)):
        store.record_access(actor=actor_of(request), subject=subject, view=view)


def _vary(response):
    patch_vary_headers(response, ("HX-Request", "HX-Target"))
    return response


def _fact_or_404(fact_id) -> Fact:
    fact = None
    if 0 < fact_id <= store.MAX_ID:
        fact = Fact.objects.exclude(status="erasing").filter(pk=fact_id).first()
    if fact is None:
        raise Http404(f"fact {fact_id} not found")
    return fact


def subject_url(fact: Fact) -> str:
    """The page of a fact's subject, addressed by the fact: a subject is personal data and
    never goes into an address (browser history, proxy and server logs keep those)."""
    return reverse("facts:subject_of", args=[fact.pk])


# ---- the review queue --------------------------------------------------------


def source_context(fact: Fact, *, live: set | None = None) -> dict | None:
    """The messages around a fact's source position, or a note that the source is gone.
    `live`: the ids of the source conversations still there, when the caller read them at once."""
    if fact.source_conversation_id is None:
        return None
    cid, pos = fact.source_conversation_id, fact.source_position
    link = reverse("conversation", args=[cid]) + f"?at={pos}#p{pos}"
    there = cid in live if live is not None else Conversation.objects.live().filter(pk=cid).exists()
    if not there:
        return {"removed": True, "conversation_id": cid, "position": pos}
    page = read_rows(cid, after=max(-1, pos - CONTEXT_BEFORE - 1), until=pos + CONTEXT_AFTER,
                     include_broken=True)
    rows = [
        {"position": m.position, "kind": m.kind, "is_source": m.position == pos,
         "text": message_text(m.message) if m.ok else "(this stored row no longer decodes)"}
        for m in page.items
    ]
    return {"removed": False, "conversation_id": cid, "position": pos, "link": link, "rows": rows}


def _queue_item(fact: Fact, *, error=None, form=None, beside=None, live=None) -> dict:
    if beside is None:
        beside = duplicates.beside([fact]).get(fact.pk)
    return {"fact": fact, "source": source_context(fact, live=live), "error": error, "form": form or {},
            "known": beside}


def _queue_context(request, *, reviewed: Fact | None = None):
    pending = Fact.objects.pending()
    facts = list(pending[:QUEUE_PAGE])
    known = duplicates.beside(facts)
    # Which source conversations are still there: one query for the page, not one per proposal.
    sources = {f.source_conversation_id for f in facts if f.source_conversation_id is not None}
    live = set(Conversation.objects.live().filter(pk__in=sources).values_list("pk", flat=True)) if sources else set()
    context = {
        "items": [_queue_item(f, beside=known.get(f.pk), live=live) for f in facts],
        "queue_count": pending.count(),
        "categories": CATEGORIES,
    }
    if reviewed is not None:
        context["status"] = _status(reviewed)
        focus = reviewed if reviewed.pk in {f.pk for f in facts} else _next_in_queue(reviewed)
        context["focus"] = focus.pk if focus else None
    return context


def _known_about(subject: str) -> list[dict]:
    """The proposals about `subject` that the queue page shows, each with what is now
    approved about it and its likely duplicates: a decision changes both for them."""
    shown = [f for f in Fact.objects.pending()[:QUEUE_PAGE] if f.subject == subject]
    known = duplicates.beside(shown)
    return [{"fact": f, "known": known.get(f.pk)} for f in shown]


def _next_in_queue(fact: Fact) -> Fact | None:
    """The proposal a reviewer meets after this one (the one before it at the end of the queue)."""
    pending = Fact.objects.pending()
    later = Q(recorded_at__gt=fact.recorded_at) | Q(recorded_at=fact.recorded_at, id__gt=fact.pk)
    return pending.filter(later).first() or pending.exclude(pk=fact.pk).last()


def _status(fact: Fact) -> dict:
    """The status line after a review or an undo, read back from the fact's own
    history (so a reload, or the page without JavaScript, says the same), with the
    undo offered while the decision can still be undone."""
    decision = store.undoable_decision(fact)
    if decision is None:
        note = (f"Review of fact {fact.pk} undone: it is back in the queue." if fact.status == "proposed"
                and not fact.superseded_by_id else f"Fact {fact.pk} is {fact.state()}.")
    elif decision.kind == "edited":
        note = f"Approved fact {decision.new_fact.pk} as an edit of proposal {fact.pk}."
    else:
        note = f"{decision.kind.capitalize()} fact {fact.pk}."
    return {"note": note, "undo": fact.pk if decision else None}


def _reviewed_url(fact: Fact) -> str:
    following = _next_in_queue(fact)
    return reverse("facts:queue") + f"?reviewed={fact.pk}" + (f"#fact-{following.pk}" if following else "")


@require_safe
@reviewer_required
def queue(request):
    reviewed = None
    reviewed_id = params.int_param(request.GET, "reviewed", minimum=1, maximum=store.MAX_ID)
    if reviewed_id is not None:
        reviewed = Fact.objects.exclude(status="erasing").filter(pk=reviewed_id).first()
    context = _queue_context(request, reviewed=reviewed)
    _log_reads(request, [i["fact"].subject for i in context["items"]], "review queue")
    return _vary(render(request, "facts/queue.html", context))


def _after_review(request, fact: Fact):
    """htmx: the item vanishes, the count and the status line (with its undo) update
    out of band. A plain form post: back to the queue, at the next proposal, with the
    same status line."""
    fact.refresh_from_db()
    if request.htmx:
        response = render(request, "facts/queue.html#review_done", {
            "queue_count": Fact.objects.pending().count(), "status": _status(fact),
            "refreshed": _known_about(fact.subject),
        })
        return _vary(response)
    return redirect(_reviewed_url(fact))


def _review_failed(request, fact: Fact, error: StoreError, form=None):
    """Re-render the item with the error next to the field; nothing was written."""
    if request.htmx:
        item = _queue_item(fact, error=error, form=form)
        response = render(request, "facts/queue.html#queue_item", {"item": item, "categories": CATEGORIES},
                          status=422)
        return _vary(response)
    context = _queue_context(request)
    # The queue's own item for the fact, when it shows it: its source and duplicates are read once.
    shown = next((i for i in context["items"] if i["fact"].pk == fact.pk), None)
    item = {**shown, "error": error, "form": form or {}} if shown else _queue_item(fact, error=error, form=form)
    context["items"] = [item if i["fact"].pk == fact.pk else i for i in context["items"]]
    if shown is None:
        context["items"].insert(0, item)
    context["page_error"] = error
    return _vary(render(request, "facts/queue.html", context, status=422 if error.status == 422 else error.status))


@require_POST
@reviewer_required
def approve(request, fact_id: int):
    fact = _fact_or_404(fact_id)
    try:
        store.approve_fact(fact_id=fact.pk, actor=actor_of(request))
    except StoreError as exc:
        return _review_failed(request, fact, exc)
    return _after_review(request, fact)


@require_POST
@reviewer_required
def reject(request, fact_id: int):
    fact = _fact_or_404(fact_id)
    reason = request.POST.get("reason", "")
    try:
        store.reject_fact(fact_id=fact.pk, actor=actor_of(request), reason=reason)
    except StoreError as exc:
        return _review_failed(request, fact, exc, form={"reason": reason})
    return _after_review(request, fact)


@require_POST
@reviewer_required
def undo(request, fact_id: int):
    """Take back the last review of a proposal; it returns to its place in the queue.
    htmx gets the queue's items (the proposal back in them), count and status."""
    fact = _fact_or_404(fact_id)
    try:
        proposal = store.undo_review(fact_id=fact.pk, actor=actor_of(request))
    except StoreError as exc:
        if request.htmx:
            response = render(request, "facts/queue.html#review_done", {
                "queue_count": Fact.objects.pending().count(),
                "status": {"note": exc.message, "undo": None, "error": True}}, status=exc.status)
            response["HX-Reswap"] = "none"  # keep the items; only the status says why
            return _vary(response)
        messages.error(request, exc.message)
        return redirect("facts:queue")
    if request.htmx:
        context = _queue_context(request, reviewed=proposal)
        _log_reads(request, [i["fact"].subject for i in context["items"]], "review queue")
        return _vary(render(request, "facts/queue.html#undo_done", context))
    return redirect(reverse("facts:queue") + f"?reviewed={proposal.pk}#fact-{proposal.pk}")


def _int_field(raw, field):
    return params.int_field(raw, field, minimum=1, maximum=10)


@require_POST
@reviewer_required
def edit_approve(request, fact_id: int):
    fact = _fact_or_404(fact_id)
    form = {k: request.POST.get(k, "") for k in ("text", "category", "importance", "reason")}
    try:
        store.edit_and_approve(
            fact_id=fact.pk, actor=actor_of(request), text=form["text"], category=form["category"] or None,
            importance=_int_field(form["importance"], "importance") if form["importance"].strip() else None,
            reason=form["reason"],
        )
    except StoreError as exc:
        return _review_failed(request, fact, exc, form=form)
    return _after_review(request, fact)


# ---- a subject -----------------------------------------------------------------


def _parse_as_of(raw: str):
    """A date (its end, UTC) or a date and time; None when empty; ValueError when bad."""
    raw = (raw or "").strip()
    if not raw:
        return None
    # A bare date means the whole of that day (its last instant), not its midnight.
    return params.parse_instant(raw, end_of_day=True)


@require_http_methods(["GET", "HEAD", "POST"])
@reviewer_required
def subject(request):
    """GET: the subjects with facts. POST (the Open form): one subject's page, reached
    by a fact about it. POST, not GET, so the typed subject is in no address."""
    if request.method != "POST":
        return _vary(render(request, "facts/subjects.html", {"subjects": _subjects()}))
    name = params.text_field(request.POST.get("s", ""), "s").strip()
    if len(name) > store.SUBJECT_MAX:
        raise InvalidInput(f"a subject is at most {store.SUBJECT_MAX} characters", field="s")
    if not name:
        return redirect("facts:subject")
    ref = Fact.objects.about(name).exclude(status="erasing").order_by("id").values_list("pk", flat=True).first()
    if ref is not None:
        return redirect("facts:subject_of", fact_id=ref)
    # No fact about it: the (empty) page itself, still recorded as a read.
    return _subject_page(request, name, ref=None)


def _subjects() -> list[dict]:
    """Each subject with facts, and the fact its link goes through."""
    return list(Fact.objects.exclude(status="erasing").values("subject").annotate(ref=Min("id"))
                .order_by("subject")[:LIST_LIMIT])


@require_safe
@reviewer_required
def subject_of(request, fact_id: int):
    """The page of the subject of fact `fact_id` (any fact about it will do)."""
    fact = _fact_or_404(fact_id)
    return _subject_page(request, fact.subject, ref=fact.pk)


def _subject_page(request, name: str, *, ref: int | None):
    as_of_error, as_of = None, None
    if ref is not None:
        try:
            as_of = _parse_as_of(request.GET.get("as_of"))
        except ValueError:
            as_of_error = "as of must be a date (2026-01-31) or a date and time (2026-01-31T12:00)"
    store.expire_due(subject=name)
    store.record_access(actor=actor_of(request), subject=name,
                        view=f"subject as of {as_of.isoformat()}" if as_of else "subject")
    now = timezone.now()
    facts = Fact.objects.about(name).exclude(status="erasing")
    current = list(facts.recallable(now).order_by("-importance", "-recorded_at"))
    current_ids = {f.pk for f in current}
    pending = list(facts.pending())
    past = [f for f in facts.order_by("-recorded_at", "-id")
            if f.pk not in current_ids and f.state(now) not in ("proposed",)]
    context = {
        "subject": name, "ref": ref, "now": now, "current": current, "pending": pending, "past": past,
        "as_of": as_of, "as_of_raw": request.GET.get("as_of", "") if ref is not None else "",
        "as_of_error": as_of_error, "categories": CATEGORIES,
        "history": list(FactEvent.objects.of_subject(name).order_by("-at", "-id")[:HISTORY_LIMIT]),
    }
    if as_of:
        context["believed"] = list(facts.believed_true_at(as_of).order_by("-importance", "id"))
        context["on_record"] = list(facts.on_record_at(as_of).order_by("-importance", "id"))
    status = 400 if as_of_error else 200
    return _vary(render(request, "facts/subject.html", context, status=status))


def _facts_page(target: str) -> bool:
    """Whether `target` is one of this project's fact pages (a safe place to send the reviewer
    back to): under the project's address, which reverse() gives."""
    return target.startswith(reverse("facts:queue")) and not target.startswith("//")


def _back(request, fact: Fact):
    target = request.POST.get("next") or ""
    if _facts_page(target):
        return redirect(target)
    return redirect(subject_url(fact))


def _action_failed(request, fact: Fact, error: StoreError):
    messages.error(request, f"Fact {fact.pk}: {error.message}")
    response = _back(request, fact)
    return response


def _safe_next(raw: str, fact: Fact) -> str:
    return raw if _facts_page(raw) else subject_url(fact)


def _invalidate_confirmation(request, fact: Fact) -> Confirmation:
    data = request.POST if request.method == "POST" else request.GET
    back = _safe_next(data.get("next") or "", fact)
    return Confirmation(
        title=f"Invalidate fact {fact.pk}?", action=reverse("facts:invalidate", args=[fact.pk]),
        button=f"Invalidate fact {fact.pk}", cancel=back,
        details=[("Subject", fact.subject), ("Fact", fact.text), ("Category", fact.category),
                 ("Recalled", f"{fact.access_count} time{'s' if fact.access_count != 1 else ''}")],
        consequences=["Agents stop recalling it from the moment you give (now, unless you name another).",
                      "It stays on record, with this reason in its history."],
        undo="Nothing makes it current again: if it was right after all, an agent or you propose it anew.",
        box="I understand that agents will no longer recall this fact.",
        fields=[{"name": "invalid_at", "label": "No longer true from", "value": data.get("invalid_at", ""),
                 "placeholder": "now, or 2026-01-31"},
                {"name": "reason", "label": "Reason", "value": data.get("reason", ""), "required": True}],
        hidden=[("next", back)],
    )


@require_http_methods(["GET", "HEAD", "POST"])
@reviewer_required
def invalidate(request, fact_id: int):
    """GET (or a POST without the tick): the confirmation panel; POST with it: invalidate."""
    fact = _fact_or_404(fact_id)
    if not confirmed(request):
        confirmation = _invalidate_confirmation(request, fact)
        if request.method == "POST":
            return not_confirmed(request, confirmation)
        return render_confirmation(request, confirmation)
    try:
        when = _parse_as_of(request.POST.get("invalid_at"))
    except ValueError:
        return _action_failed(request, fact,
                              InvalidInput("invalid_at must be a date or a date and time", field="invalid_at"))
    try:
        store.invalidate_fact(fact_id=fact.pk, actor=actor_of(request), reason=request.POST.get("reason", ""),
                              invalid_at=when)
    except StoreError as exc:
        return _action_failed(request, fact, exc)
    messages.success(request, f"Invalidated fact {fact.pk}.")
    return _back(request, fact)


@require_POST
@reviewer_required
def supersede(request, fact_id: int):
    fact = _fact_or_404(fact_id)
    try:
        importance = request.POST.get("importance", "").strip()
        new = store.supersede_fact(
            fact_id=fact.pk, actor=actor_of(request), text=request.POST.get("text", ""),
            category=request.POST.get("category") or None,
            importance=_int_field(importance, "importance") if importance else None,
            reason=request.POST.get("reason", ""),
        )
    except StoreError as exc:
        return _action_failed(request, fact, exc)
    messages.success(request, f"Fact {new.pk} supersedes fact {fact.pk}.")
    return _back(request, fact)


@require_POST
@reviewer_required
def keep(request, fact_id: int):
    fact = _fact_or_404(fact_id)
    try:
        store.keep_fact(fact_id=fact.pk, actor=actor_of(request))
    except StoreError as exc:
        return _action_failed(request, fact, exc)
    messages.success(request, f"Kept fact {fact.pk}: its retention starts again from now.")
    return _back(request, fact)


# ---- expiring soon, forgetting candidates, access log ----------------------------


@require_safe
@reviewer_required
def expiring(request):
    now = timezone.now()
    store.expire_due(now=now)
    days = settings.MEMORYUI_FACT_EXPIRING_SOON_DAYS
    facts = list(Fact.objects.expiring_between(now, now + timedelta(days=days))[:LIST_LIMIT])
    _log_reads(request, [f.subject for f in facts], "expiring soon")
    return _vary(render(request, "facts/expiring.html", {"facts": facts, "days": days, "now": now}))


@require_safe
@reviewer_required
def forgetting(request):
    now = timezone.now()
    found = recall.forgetting_candidates(now=now, limit=LIST_LIMIT)
    _log_reads(request, [f.subject for f, _ in found], "forgetting candidates")
    context = {
        "candidates": found, "now": now,
        "threshold": settings.MEMORYUI_FORGET_THRESHOLD,
        "cap": settings.MEMORYUI_FACT_STRENGTH_CAP,
    }
    return _vary(render(request, "facts/forgetting.html", context))


@require_http_methods(["GET", "HEAD", "POST"])
@_admin_only
def access_log(request):
    """Every read of a subject's facts, newest first. Filtered to one subject by
    `?like=<row id>` (the rows about the same subject as that row), so no subject goes
    into an address; the filter form POSTs the typed subject and lands on such a link."""
    qs = FactAccess.objects.recent()
    if request.method == "POST":
        try:
            typed = params.text_field(request.POST.get("subject", ""), "subject").strip()
        except StoreError as exc:
            return _vary(render(request, "facts/access_log.html",
                                {"rows": [], "error": exc.message, "subject": ""}, status=400))
        if not typed:
            return redirect("facts:access_log")
        newest = qs.filter(subject=typed).values_list("pk", flat=True).first()
        if newest is None:
            return _vary(render(request, "facts/access_log.html", {"rows": [], "subject": typed}))
        return redirect(reverse("facts:access_log") + f"?like={newest}")
    try:
        like = params.int_param(request.GET, "like", minimum=1)
        before = params.int_param(request.GET, "before", minimum=1)
    except params.BadParameter as exc:
        return _vary(render(request, "facts/access_log.html",
                            {"rows": [], "error": exc.message, "subject": ""}, status=400))
    subject_filter = ""
    if like is not None:
        anchor = FactAccess.objects.filter(pk=like).first()
        if anchor is None:
            raise Http404("no such access-log row")
        subject_filter = anchor.subject
        qs = qs.filter(subject=subject_filter)
    if before is not None:
        qs = qs.filter(id__lt=before)
    rows, more = keyset.take(qs, ACCESS_PAGE)
    next_url = None
    if more:
        next_url = reverse("facts:access_log") + "?" + urlencode(
            {k: v for k, v in {"like": like, "before": rows[-1].pk}.items() if v})
    return _vary(render(request, "facts/access_log.html",
                        {"rows": rows, "next_url": next_url, "subject": subject_filter}))


@require_safe
@reviewer_required
def fact_detail(request, fact_id: int):
    fact = _fact_or_404(fact_id)
    return redirect(subject_url(fact) + f"#fact-{fact.pk}")

