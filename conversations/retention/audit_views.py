"""The audit log's admin pages: every event, filtered by actor, action and dates, paged by a
cursor, each linked to the page of what it acted on; and the same events as JSON lines."""

import json
from datetime import datetime
from urllib.parse import urlencode

from django.db.models import Q
from django.http import HttpResponse, StreamingHttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_safe

from conversations import params
from conversations.errors import NotFound, StoreError
from conversations.facts.models import Fact
from conversations.models import ApiKey, AuditEvent, Conversation, parse_conversation_id
from conversations.roles import admin_required

from .models import DeletionReceipt, PruneRun

AUDIT_PAGE = 100
AUDIT_CURSOR = "audit"


def _audit_filters(query) -> tuple[dict, Q, str | None]:
    """The filter form's values, the matching Q, and an error sentence (or None)."""
    values = {k: query.get(k, "").strip() for k in ("actor", "action", "since", "until")}
    q = Q()
    try:
        for key in ("actor", "action"):
            params.check_text(values[key], key)
    except StoreError as exc:
        return values, q, exc.message
    if values["actor"]:
        actor = values["actor"]
        q &= Q(actor=actor) if "*" not in actor else Q(actor__startswith=actor.rstrip("*"))
    if values["action"]:
        action = values["action"]
        q &= Q(action=action) if not action.endswith(".") else Q(action__startswith=action)
    for key in ("since", "until"):
        try:
            day = params.day_param(values, key)
        except StoreError:
            return values, q, f"{key} must be a date like 2026-01-31"
        if day is None:
            continue
        if key == "since":
            q &= Q(at__gte=params.day_start(day))
        else:
            # "until" includes the whole day it names; after 9999-12-31 there is nothing to exclude.
            end = params.day_after(day)
            if end is not None:
                q &= Q(at__lt=end)
    return values, q, None


@require_safe
@admin_required
def audit(request):
    values, q, error = _audit_filters(request.GET)
    if error:
        return render(request, "retention/audit.html",
                      {"filters": values, "error": error, "events": [], "actions": _known_actions()}, status=422)
    qs = AuditEvent.objects.filter(q).order_by("-at", "-id")
    try:
        cursor = params.cursor_param(request.GET, "after", AUDIT_CURSOR, datetime, int)
    except params.BadParameter:
        return render(request, "retention/audit.html",
                      {"filters": values, "error": "the page cursor is not valid; start from the first page",
                       "events": [], "actions": _known_actions()}, status=400)
    after = cursor is not None
    if cursor is not None:
        at, pk = cursor
        qs = qs.filter(Q(at__lt=at) | Q(at=at, id__lt=pk))
    rows = list(qs[: AUDIT_PAGE + 1])
    events = rows[:AUDIT_PAGE]
    for event in events:
        event.detail_json = json.dumps(event.detail, ensure_ascii=False, sort_keys=True)
    _link_targets(events)
    query = {k: v for k, v in values.items() if v}
    next_url = None
    if len(rows) > AUDIT_PAGE:
        cursor = params.encode_cursor(AUDIT_CURSOR, events[-1].at, events[-1].pk)
        next_url = f"{reverse('retention:audit')}?{urlencode({**query, 'after': cursor})}"
    context = {"filters": values, "events": events, "next_url": next_url, "first_page": not after,
               "export_url": f"{reverse('retention:audit_export')}?{urlencode(query)}", "actions": _known_actions()}
    if request.htmx and request.htmx.target == "audit-more":
        return render(request, "retention/audit.html#audit-rows", context)
    response = render(request, "retention/audit.html", context)
    response["Vary"] = "HX-Request"
    return response


def _link_targets(events) -> None:
    """Give each event the page of what it acted on (`target_url`), or say that the
    target is gone (`target_gone`): one query per kind of target on the page."""
    def ids_of(kind, parse):
        out = set()
        for e in events:
            if e.target_type in kind:
                try:
                    out.add(parse(e.target_id))
                except (NotFound, ValueError):
                    pass
        return out

    conversations = {str(pk) for pk in Conversation.objects.live().filter(
        pk__in=ids_of(("conversation",), parse_conversation_id)).values_list("pk", flat=True)}
    receipts = {str(pk) for pk in DeletionReceipt.objects.filter(
        pk__in=ids_of(("deletion_receipt", "deletion_request"), parse_conversation_id)).values_list("pk", flat=True)}
    facts = {str(pk) for pk in Fact.objects.exclude(status="erasing").filter(
        pk__in=ids_of(("fact",), lambda v: params.parse_int(v, minimum=1, maximum=params.MAX_BIGINT))
    ).values_list("pk", flat=True)}
    runs = {str(pk) for pk in PruneRun.objects.filter(
        pk__in=ids_of(("prune_run",), lambda v: params.parse_int(v, minimum=1, maximum=params.MAX_BIGINT))
    ).values_list("pk", flat=True)}
    keys = {str(pk) for pk in ApiKey.objects.filter(
        pk__in=ids_of(("api_key",), lambda v: params.parse_int(v, minimum=1, maximum=params.MAX_BIGINT))
    ).values_list("pk", flat=True)}
    pages = {
        "conversation": (conversations, lambda i: reverse("conversation", args=[i])),
        "deletion_receipt": (receipts, lambda i: reverse("retention:receipt", args=[i])),
        "deletion_request": (receipts, lambda i: reverse("retention:receipt", args=[i])),
        "fact": (facts, lambda i: reverse("facts:detail", args=[int(i)])),
        "prune_run": (runs, lambda i: reverse("retention:prune_run_detail", args=[int(i)])),
        "api_key": (keys, lambda i: reverse("keys") + f"#key-{i}"),
    }
    for e in events:
        e.target_url, e.target_gone = None, False
        if e.target_type not in pages or not e.target_id:
            continue
        found, url = pages[e.target_type]
        by_uuid = e.target_type in ("conversation", "deletion_receipt", "deletion_request")
        key = e.target_id.lower() if by_uuid else e.target_id
        if key in found:
            e.target_url = url(key)
        else:
            e.target_gone = True


def _known_actions() -> list[str]:
    return list(AuditEvent.objects.order_by("action").values_list("action", flat=True).distinct()[:200])


@require_safe
@admin_required
def audit_export(request):
    values, q, error = _audit_filters(request.GET)
    if error:
        return HttpResponse(error + "\n", status=422, content_type="text/plain; charset=utf-8")

    def lines():
        for event in AuditEvent.objects.filter(q).order_by("at", "id").iterator(chunk_size=1000):
            yield json.dumps({
                "id": event.pk, "at": event.at.isoformat(), "actor": event.actor, "action": event.action,
                "target_type": event.target_type, "target_id": event.target_id, "detail": event.detail,
            }, ensure_ascii=False, separators=(",", ":")) + "\n"

    response = StreamingHttpResponse(lines(), content_type="application/x-ndjson; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="audit-{timezone.now():%Y%m%d-%H%M%S}.jsonl"'
    return response
