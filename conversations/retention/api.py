"""Retention over JSON: prune, deletion requests, receipts. Admin scope only."""

import uuid
from contextlib import nullcontext
from datetime import datetime
from typing import Any

from django.db.models import Q
from ninja import Field, Query, Router, Schema, Status
from pydantic import StrictBool, StrictInt, StrictStr

from conversations import keyset, params, projects
from conversations.api_schemas import ListOut, errors_doc, inline_schema, json_body_doc
from conversations.apiauth import actor_of, scope
from conversations.errors import NotFound
from conversations.jsonbody import StrictBody, read_body
from conversations.models import parse_conversation_id
from conversations.project_http import every_project

from . import erasure, suggestions, window
from .models import DeletionReceipt
from .pruning import MAX_BATCH, MAX_DAYS, prune_by_retention

router = Router(tags=["retention"])
RECEIPT_PAGE = 50


class PruneIn(StrictBody):
    older_than_days: StrictInt | None = Field(
        None, ge=1, le=MAX_DAYS, description="Days since memoryui received a conversation's last row; default: each "
                                             "project's own retention (else MEMORYUI_RETENTION_DAYS).")
    dry_run: StrictBool = False
    batch_size: StrictInt = Field(5000, ge=1, le=MAX_BATCH)


class ProjectPruneOut(Schema):
    project: str
    older_than_days: int
    cutoff: datetime
    conversations: int
    messages: int
    checkpoints: int
    resumed: int
    estimated_bytes: int
    run_id: int | None


# The database file holds every project: its size before and after is a total of all of them,
# which a project's key may not learn (the prune page shows it to superusers only).
_SERVER_BYTES = ("The database file's size (every project's rows together): for an all-projects key only, "
                 "null for a project's key.")


class PruneOut(Schema):
    dry_run: bool
    project: str | None = Field(..., description="The project pruned; null when several were (see `projects`).")
    projects: list[ProjectPruneOut] = Field(..., description="Each project pruned, by its own retention, with its "
                                                             "own run: one for a project's key, every project for "
                                                             "an all-projects key that names none.")
    older_than_days: int | None = Field(..., description="Null when the projects pruned keep different periods.")
    cutoff: datetime | None
    conversations: int
    messages: int
    checkpoints: int
    resumed: int
    bytes_before: int | None = Field(..., description=_SERVER_BYTES)
    bytes_after: int | None = Field(..., description=_SERVER_BYTES)
    bytes_freed: int | None = Field(..., description=_SERVER_BYTES)
    estimated_bytes: int
    conversation_ids: list[str]
    run_id: int | None
    uploads_removed: int = Field(..., description="Expired import uploads removed (a dry run removes none).")
    seconds: float
    notes: list[str]


class DeletionIn(StrictBody):
    subject: StrictStr = Field("", max_length=erasure.SUBJECT_MAX)
    conversation_ids: list[StrictStr] = Field(default_factory=list, max_length=erasure.MAX_EXTRA_IDS)
    dry_run: StrictBool = False
    # Filing a receipt that nothing is held is a choice: without it, nothing stored is a 404.
    allow_empty: StrictBool = False
    all_projects: StrictBool = Field(False, description="Erase in every project, not only the key's (a data "
                                                        "controller's request): an all-projects key only. Recorded "
                                                        "in the audit log; the receipt says so.")


class PreviewConversationOut(Schema):
    id: str
    title: str
    messages: int
    checkpoints: int
    pinned: bool
    about_subject: bool = Field(..., description="False for a conversation named only by its id.")


class SuggestionOut(Schema):
    subject: str
    conversations: int
    facts: int
    why: str = Field(..., description="`edit_distance`, `local_part` or `prefix`.")


class DeletionPreviewOut(Schema):
    dry_run: bool
    subject_sha256: str | None
    conversations: list[PreviewConversationOut]
    missing_conversation_ids: list[str]
    counts: dict[str, Any] = Field(..., description="Rows a deletion would remove, by kind (with the facts "
                                   "store: its counts and `sample_texts`).")
    facts_available: bool
    nothing_stored: bool
    suggestions: list[SuggestionOut] = Field(..., description="With `nothing_stored`: the stored subjects "
                                             "close to the one sent.")


class ReceiptOut(Schema):
    request_id: str
    created_at: datetime
    actor: str
    kind: str
    project: str | None = Field(None, description="The project the request erased in; null with all_projects.")
    all_projects: bool = Field(False, description="The request erased in every project (a data controller's).")
    subject_sha256: str | None
    conversation_ids: list[str]
    counts: dict
    verification: dict
    verify_by: datetime | None = Field(None, description="Two phases: the rows went when the request was filed "
                                                        "(status `erased`); the files are searched by then.")
    reapplied: dict | None = Field(None, description=(
        "Set when this request carried out an earlier one again after a restore of an older backup: the earlier "
        "request_id, the backup (after_restore_of, backup_created_at) and when (restored_at)."))


class ReceiptListOut(ListOut):
    items: list[ReceiptOut]


@router.post("/prune", response={200: PruneOut, **errors_doc(400, 413, 415, 422)},
             summary="Prune conversations received more than older_than_days ago (or preview)",
             openapi_extra=json_body_doc(inline_schema(PruneIn), {
                 "preview": {"summary": "What a 90-day prune would remove", "value": {"older_than_days": 90,
                                                                                       "dry_run": True}}}))
@scope("admin")
def prune(request):
    """The key's project, by its own retention; an all-projects key that names no project
    (`X-Memoryui-Project`) prunes every project, each by its own, one run each."""
    payload = read_body(request, PruneIn)
    result = prune_by_retention(days=payload.older_than_days, dry_run=payload.dry_run, batch_size=payload.batch_size,
                                actor=actor_of(request), all_projects=projects.current().every)
    # The moments as every answer writes them (params.iso), where as_dict keeps isoformat.
    out = result.as_dict() | {"cutoff": result.cutoff, "projects": result.projects}
    if not projects.current().every:
        out |= {"bytes_before": None, "bytes_after": None, "bytes_freed": None}
    return out


def _preview_out(preview: erasure.DeletionPreview) -> dict:
    empty = suggestions.nothing_stored(preview)
    # The caller sent the subject; it is not echoed back (responses end up in logs).
    return {
        "dry_run": True,
        "subject_sha256": erasure.subject_sha256(preview.subject) or None,
        "conversations": [vars(c) for c in preview.conversations],
        "missing_conversation_ids": preview.missing_ids,
        "counts": {"conversations": len(preview.conversations), "messages": preview.messages,
                   "checkpoints": preview.checkpoints, **(preview.facts or {})},
        "facts_available": preview.facts is not None,
        "nothing_stored": empty,
        # The stored subjects close to the one sent (suggestions.py), when it holds nothing.
        "suggestions": [s.as_dict() for s in suggestions.suggest_subjects(preview.subject)] if empty else [],
    }


@router.post("/deletion-requests",
             response={200: DeletionPreviewOut, 201: ReceiptOut, **errors_doc(400, 404, 413, 415, 422)},
             summary="Preview (dry_run) or carry out a deletion request; returns the receipt",
             openapi_extra=json_body_doc(inline_schema(DeletionIn), {
                 "preview": {"summary": "Preview what a subject's deletion removes",
                             "value": {"subject": "customer:42", "dry_run": True}}}))
@scope("admin")
def deletion_request(request):
    """For the key's project; with `all_projects`, for every project (an all-projects key)."""
    payload = read_body(request, DeletionIn)
    everywhere = payload.all_projects
    acting = every_project(request, reason="deletion request for every project") if everywhere else nullcontext()
    with acting:
        ask = {"subject": payload.subject, "conversation_ids": payload.conversation_ids, "all_projects": everywhere}
        if payload.dry_run:
            return _preview_out(erasure.preview_deletion(**ask))
        if not payload.allow_empty:
            suggestions.refuse_empty(erasure.preview_deletion(**ask))
        receipt = erasure.execute_deletion(**ask, actor=actor_of(request))
    return Status(201, _receipt_out(receipt))


class WindowReceiptOut(Schema):
    request_id: str
    status: str


class WindowOut(Schema):
    checked: int = Field(..., description="The project's deletion requests whose files this window cleaned and "
                                          "searched (it runs for every project's at once).")
    seconds: float
    receipts: list[WindowReceiptOut]


@router.post("/deletion-requests/window", response={200: WindowOut, **errors_doc(409)},
             summary="Run the maintenance window: clean and search the files for every waiting request")
@scope("admin")
def erasure_window(request):
    """Deletion requests answer `erased` once their rows are gone; their files are cleaned and searched
    in a window (cron: `manage.py erasure_window`), once for all of them. This runs it now. 409 while
    a prune or a deletion request runs."""
    result = window.run_window(actor=actor_of(request))
    ours = result.visible()
    return {"checked": len(ours), "seconds": round(result.seconds, 3),
            "receipts": [{"request_id": r, "status": result.statuses[r]} for r in ours]}


def _receipt_out(receipt: DeletionReceipt) -> dict:
    # The moment as every answer writes it (params.iso), where the downloaded document keeps isoformat.
    return receipt.as_document() | {"created_at": receipt.created_at}


@router.get("/receipts", response={200: ReceiptListOut, **errors_doc(400, 422)},
            summary="Deletion receipts, newest first, in keyset pages")
@scope("admin")
def list_receipts(request, cursor: str | None = Query(None, max_length=params.CURSOR_MAX), limit: int = RECEIPT_PAGE):
    limit = max(1, min(limit, 200))
    qs = DeletionReceipt.objects.newest_first()
    after = keyset.decode(cursor, "receipts", datetime, uuid.UUID)
    if after:
        qs = qs.filter(Q(created_at__lt=after[0]) | Q(created_at=after[0], id__lt=after[1]))
    rows, next_cursor = keyset.page(qs, limit, "receipts", lambda r: (r.created_at, r.pk))
    return keyset.listing([_receipt_out(r) for r in rows], next_cursor,
                          keyset.next_url(request, next_cursor, [("limit", limit)]))


@router.get("/receipts/{request_id}", response=ReceiptOut, summary="One deletion receipt")
@scope("admin")
def get_receipt(request, request_id: str):
    try:
        rid = parse_conversation_id(request_id)
    except NotFound:
        raise NotFound(f"receipt {request_id[:80]!r} not found", field="request_id") from None
    receipt = DeletionReceipt.objects.filter(pk=rid).first()
    if receipt is None:
        raise NotFound(f"receipt {rid} not found", field="request_id")
    return _receipt_out(receipt)
