"""Admin pages: prune, deletion requests, receipts (the audit log: audit_views.py).

Every view checks the admin role itself (`admin_required`): a template hiding
a link is not a permission.
"""

import json
from contextlib import contextmanager, nullcontext

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.db.models import Q
from django.http import Http404, HttpResponse, HttpResponseRedirect, JsonResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_http_methods, require_POST, require_safe

from conversations import keyset, params, project_store
from conversations.apiauth import actor_of
from conversations.confirm import NOT_CONFIRMED, Confirmation, confirmed, render_confirmation
from conversations.errors import InvalidInput, NotFound, StoreError
from conversations.models import Conversation, Message, Project, parse_conversation_id
from conversations.project_http import acts_for_every_project, every_project
from conversations.roles import admin_required

from . import disk, erasure, pruning, suggestions, window
from .models import DeletionReceipt, PruneRun
from .pruning import MAX_DAYS, check_days, default_retention_days, prune_by_retention

PREVIEW_LIST = 200
RECEIPT_PAGE = 50
RUN_PAGE = 50


def _redirect(request, url):
    """htmx follows a plain redirect inside the swap; ask it for a real page load instead."""
    if getattr(request, "htmx", False):
        response = HttpResponse(status=204)
        response["HX-Redirect"] = url
        return response
    return HttpResponseRedirect(url)


def _project(request) -> Project:
    """The project of the page (the middleware's), or `default` where the request named none."""
    return getattr(request, "project", None) or project_store.default_project()


def _window_context() -> dict:
    """The current project's deletion requests still waiting for the window, for the banner."""
    waiting = window.waiting_receipts()
    first = waiting.first()
    return {"waiting": waiting.count(), "overdue": waiting.filter(verify_by__lt=timezone.now()).count(),
            "next_deadline": first.verify_by if first else None}


@require_safe
@admin_required
def index(request):
    return render(request, "retention/index.html", {
        "last_run": PruneRun.objects.first(),
        "receipt_count": DeletionReceipt.objects.count(),
        "last_receipt": DeletionReceipt.objects.newest_first().first(),
        "retention_days": _project(request).kept_days,
        "window": _window_context(),
    })


@require_POST
@admin_required
def erasure_window(request):
    """Run the maintenance window now: every waiting request's files cleaned and searched at once."""
    checked = len(window.run_window(actor=actor_of(request)).visible())
    messages.success(request, f"The window checked {checked} deletion request{'' if checked == 1 else 's'}.")
    return _redirect(request, reverse("retention:receipts"))


# --- prune ---------------------------------------------------------------------------

def _server_files(request) -> dict:
    """The database files hold every project: their size is shown to whoever acts for every
    project (a superuser), never to one project's admin."""
    every = acts_for_every_project(request)
    return {"server_files": every, "server_bytes": disk.database_bytes() if every else None}


def _prune_context(request, **extra) -> dict:
    project = _project(request)
    extra.setdefault("older_than_days", project.kept_days)
    return {"project": project, "retention_days": project.kept_days, "server_days": default_retention_days(),
            "max_days": MAX_DAYS, "for_every_project": acts_for_every_project(request),
            "holdings": pruning.holdings(), **_server_files(request),
            "running": PruneRun.objects.filter(status=PruneRun.RUNNING).first(),
            "recent_runs": PruneRun.objects.all()[:5], **extra}


def _all_projects(data) -> bool:
    return data.get("all_projects") == "yes"


def _acting(request, all_projects: bool, reason: str):
    """The page's project, or every project for a superuser who asked (audited)."""
    return every_project(request, reason=reason) if all_projects else nullcontext()


def _with_preview(context: dict, request, days: int | None, all_projects: bool = False) -> dict:
    """The dry run's counts, each project's when several, and the first conversations it would take."""
    with _acting(request, all_projects, "prune preview for every project"):
        result = prune_by_retention(days=days, dry_run=True, actor=actor_of(request), all_projects=all_projects)
        shown = result.conversation_ids[:PREVIEW_LIST]
        by_id = {str(c.pk): c for c in Conversation.objects.filter(pk__in=shown)}
    context.update(preview=result, older_than_days=days or "", all_projects=all_projects,
                   preview_rows=[by_id[i] for i in shown if i in by_id])
    return context


def _days(raw: str, *, required: bool) -> int | None:
    """The period typed; blank means each project's own retention where that is allowed."""
    raw = (raw or "").strip()
    if not raw and not required:
        return None
    return check_days(params.int_field(raw, "older_than_days", minimum=1, maximum=MAX_DAYS))


@require_safe
@admin_required
def prune_page(request):
    raw = request.GET.get("older_than_days", "").strip()
    all_projects = _all_projects(request.GET) and acts_for_every_project(request)
    context = _prune_context(request, older_than_days=raw or ("" if all_projects else _project(request).kept_days),
                             all_projects=all_projects)
    status = 200
    if raw or all_projects:
        try:
            days = _days(raw, required=not all_projects)
        except InvalidInput as exc:
            context["error"] = exc.message
            status = 422
        else:
            _with_preview(context, request, days, all_projects)
    return render(request, "retention/prune.html", context, status=status)


@require_POST
@admin_required
def prune_retention(request):
    """How long this project keeps a conversation after its last row (blank: the server's default)."""
    try:
        project_store.set_retention(project=_project(request), retention_days=request.POST.get("retention_days", ""),
                                    actor=actor_of(request))
    except InvalidInput as exc:
        return render(request, "retention/prune.html", _prune_context(request, retention_error=exc.message),
                      status=exc.status)
    return _redirect(request, reverse("retention:prune"))


def _confirmed_counts(post) -> tuple[int, int] | None:
    """The (conversations, messages) the admin saw in the preview and confirmed, or None."""
    if post.get("confirm") != "yes":
        return None
    try:
        return (params.int_field(post.get("conversations", ""), "conversations", minimum=0),
                params.int_field(post.get("messages", ""), "messages", minimum=0))
    except InvalidInput:
        return None


@require_POST
@admin_required
def prune_run(request):
    """Runs only what the admin confirmed: the confirmation box carries the preview's
    counts, and when the store would now take more or fewer (time passed, agents wrote)
    the new preview is shown to be confirmed again. Nothing is deleted on one click."""
    all_projects = _all_projects(request.POST)
    if all_projects and not acts_for_every_project(request):
        raise PermissionDenied("only a superuser prunes every project")
    try:
        days = _days(request.POST.get("older_than_days", ""), required=not all_projects)
    except InvalidInput as exc:
        return render(request, "retention/prune.html",
                      _prune_context(request, older_than_days=request.POST.get("older_than_days", ""),
                                     error=exc.message), status=422)
    confirmed = _confirmed_counts(request.POST)
    if confirmed is None:
        context = _with_preview(_prune_context(request), request, days, all_projects)
        context["error"] = "Tick the box to confirm the counts: nothing was pruned."
        return render(request, "retention/prune.html", context, status=422)
    context = _with_preview(_prune_context(request), request, days, all_projects)
    preview = context["preview"]
    if (preview.conversations, preview.messages) != confirmed:
        context["error"] = (f"The preview changed since you confirmed it ({confirmed[0]} conversations, "
                            f"{confirmed[1]} messages): check the new counts and confirm again. Nothing was pruned.")
        return render(request, "retention/prune.html", context, status=409)
    try:
        with _acting(request, all_projects, "prune of every project"):
            result = prune_by_retention(days=days, actor=actor_of(request), all_projects=all_projects)
    except StoreError as exc:  # another prune or a deletion request is running
        return render(request, "retention/prune.html",
                      _prune_context(request, older_than_days=days or "", error=exc.message), status=exc.status)
    if result.run_id is None:  # one run per project: the list shows this project's
        return _redirect(request, reverse("retention:prune_runs"))
    return _redirect(request, reverse("retention:prune_run_detail", args=[result.run_id]))


@require_safe
@admin_required
def prune_progress(request):
    """The running prune's progress bar, polled by the prune page while it waits for the run;
    opened in a browser (no htmx), a page of its own with a title."""
    run = PruneRun.objects.filter(status=PruneRun.RUNNING).first()
    name = "retention/prune.html#prune-progress" if request.htmx else "retention/prune_progress.html"
    return render(request, name, {"running": run})


@require_safe
@admin_required
def prune_runs(request):
    qs = PruneRun.objects.order_by("-id")
    before = params.int_param(request.GET, "before", minimum=1)
    if before is not None:
        qs = qs.filter(id__lt=before)
    rows, more = keyset.take(qs, RUN_PAGE)
    return render(request, "retention/prune_runs.html", {"runs": rows, "next_before": rows[-1].pk if more else None,
                                                         **_server_files(request)})


@require_safe
@admin_required
def prune_run_detail(request, run_id: int):
    run = PruneRun.objects.filter(pk=run_id).first()
    if run is None:
        raise Http404("no such prune run")
    return render(request, "retention/prune_run.html", {"run": run, **_server_files(request)})


# --- deletion requests --------------------------------------------------------------

def _request_fields(request):
    return request.POST.get("subject", ""), request.POST.get("conversation_ids", "")


def _preview(subject, ids, all_projects: bool = False):
    # Text no database can store is refused before erasure looks anything up with it.
    params.check_text(subject, "subject")
    params.check_text(ids, "conversation_ids")
    return erasure.preview_deletion(subject=subject, conversation_ids=ids, all_projects=all_projects)


def _form_error(request, subject, ids, exc: StoreError, all_projects: bool = False):
    """The deletion form again, with what was sent and what is wrong with it."""
    return render(request, "retention/deletion_form.html",
                  {"subject": subject, "conversation_ids": ids, "error": exc.message, "all_projects": all_projects,
                   "project": _project(request), "for_every_project": acts_for_every_project(request)},
                  status=exc.status)


@require_safe
@admin_required
def deletion_form(request):
    return render(request, "retention/deletion_form.html", {
        "subject": "", "conversation_ids": "", "project": _project(request),
        "for_every_project": acts_for_every_project(request)})


def _deletion_scope(request) -> bool:
    """Whether the request is filed for every project (a superuser's choice; anyone else: 403)."""
    all_projects = _all_projects(request.POST)
    if all_projects and not acts_for_every_project(request):
        raise PermissionDenied("only a superuser files a deletion request for every project")
    return all_projects


def _deletion_page(request, preview, *, error: str = "", status: int = 200, all_projects: bool = False):
    """The preview of a deletion request; when it would delete nothing, the stored
    subjects close to the one typed (suggestions.py) and the explicit choice to file
    a receipt that nothing is held."""
    empty = suggestions.nothing_stored(preview)
    hidden = [("subject", preview.subject), ("conversation_ids", " ".join(preview.requested_ids))]
    if all_projects:
        hidden.append(("all_projects", "yes"))
    if empty:
        confirmation = Confirmation(
            title="File a receipt that nothing is stored?", action=reverse("retention:deletion_execute"),
            button="File a receipt that nothing is stored", cancel=reverse("retention:deletion_form"),
            consequences=["Nothing is deleted: the receipt records that nothing about this was held now, "
                          "as proof for whoever asked."],
            undo="The receipt stays on the list of receipts.",
            box="I checked the subject: nothing is stored about it, and I want a receipt that says so.",
            hidden=hidden + [("allow_empty", "yes")], button_id="file-empty-receipt", error=error)
    else:
        confirmation = Confirmation(
            title="Carry out this deletion request?", action=reverse("retention:deletion_execute"),
            button="Delete and verify", cancel=reverse("retention:deletion_form"),
            consequences=[_files_cleaned("All of the above is deleted{now}, pinned conversations included"),
                          "Agents writing to these conversations get 404, and facts about the subject are no "
                          "longer recalled."],
            undo="Nothing undoes this.",
            box="I understand this deletes all of the above for good, pinned conversations included.",
            hidden=hidden, button_id="execute-deletion", error=error)
    return render(request, "retention/deletion_preview.html", {
        "preview": preview, "nothing_stored": empty, "confirm": confirmation, "conversation_ids": hidden[1][1],
        "suggestions": suggestions.suggest_subjects(preview.subject) if empty and preview.subject else [],
        "all_projects": all_projects, "project": _project(request),
    }, status=status)


@require_POST
@admin_required
def deletion_preview(request):
    # POST, not GET: the subject is personal data and must not land in URLs or access logs.
    subject, ids = _request_fields(request)
    all_projects = _deletion_scope(request)
    with _acting(request, all_projects, "deletion request preview for every project"):
        try:
            preview = _preview(subject, ids, all_projects)
        except StoreError as exc:
            return _form_error(request, subject, ids, exc, all_projects)
        return _deletion_page(request, preview, all_projects=all_projects)


@require_POST
@admin_required
def deletion_execute(request):
    """Acts only when confirmed; a request that would delete nothing files its receipt
    only when `allow_empty` says so too (sent straight at the URL, it is refused). Filed
    for the page's project, or, by a superuser who chose it, for every project (audited)."""
    subject, ids = _request_fields(request)
    all_projects = _deletion_scope(request)
    with _acting(request, all_projects, "deletion request for every project"):
        try:
            preview = _preview(subject, ids, all_projects)
        except StoreError as exc:
            return _form_error(request, subject, ids, exc, all_projects)
        if not confirmed(request):
            return _deletion_page(request, preview, status=NOT_CONFIRMED, all_projects=all_projects,
                                  error="Tick the confirmation box to carry out the deletion.")
        if request.POST.get("allow_empty") != "yes" and suggestions.nothing_stored(preview):
            return _deletion_page(request, preview, status=NOT_CONFIRMED, all_projects=all_projects,
                                  error="Nothing is stored about this: no receipt was filed. Choose a suggested "
                                        "subject, or file a receipt that nothing is stored.")
        try:
            receipt = erasure.execute_deletion(subject=subject, conversation_ids=ids, actor=actor_of(request),
                                               all_projects=all_projects)
        except StoreError as exc:
            return _form_error(request, subject, ids, exc, all_projects)
    return _redirect(request, reverse("retention:receipt", args=[receipt.pk]))


def _files_cleaned(deleted: str) -> str:
    """What a confirmation promises of the database files, as this server's requests do it: at
    once, or in two phases (window.py), the rows going now and the files in the next window.
    `deleted` says what goes, with `{now}` where the word "now" belongs."""
    if window.mode() == window.AT_ONCE:
        return (f"{deleted.format(now='')} and removed from the database files, which are then searched to "
                "prove it; you get a receipt.")
    return (f"{deleted.format(now=' now')}, and no page, search or export shows them again; you get a receipt. "
            "What is left of them in the database files is cleaned and searched for in the next maintenance "
            f"window, within {window.deadline_hours():g} hours: until then the receipt says “erased”, then what "
            "the search found.")


def _delete_confirmation(conversation, forks: int) -> Confirmation:
    consequences = [_files_cleaned("The conversation, its messages, checkpoints and the records that belong to it "
                                   "are deleted{now}"),
                    "An agent writing to it gets 404 from now on."]
    if forks:
        consequences.append(
            f"Its {forks} fork{'s' if forks != 1 else ''} keep their own copy and show “parent pruned”.")
    consequences.append("Facts about the subject stay (they show “source removed”).")
    return Confirmation(
        title="Delete this conversation for good?",
        action=reverse("retention:delete_conversation", args=[conversation.pk]),
        button="Delete this conversation", cancel=reverse("conversation", args=[conversation.pk]),
        consequences=consequences, undo="Nothing undoes this.",
        box="I understand that this conversation is deleted for good, pinned or not.",
    )


@require_http_methods(["GET", "POST"])
@admin_required
def delete_conversation(request, conversation_id):
    try:
        cid = parse_conversation_id(conversation_id)
    except NotFound:
        raise Http404("no such conversation") from None
    conversation = Conversation.objects.filter(pk=cid).first()
    if conversation is None:
        raise Http404("no such conversation")
    forks = Conversation.objects.live().filter(parent_id=cid).count()
    confirmation = _delete_confirmation(conversation, forks)
    status = 200
    if request.method == "POST" and not confirmed(request):
        # Sent without the tick (or straight at the URL): nothing is deleted.
        confirmation.error, status = "Tick the box to confirm: nothing was deleted.", NOT_CONFIRMED
    elif request.method == "POST":
        try:
            receipt = erasure.delete_one_conversation(conversation_id=cid, actor=actor_of(request))
        except StoreError as exc:  # a prune or a deletion request is running
            confirmation.error, status = exc.message, exc.status
        else:
            return _redirect(request, reverse("retention:receipt", args=[receipt.pk]))
    return render_confirmation(request, confirmation, page="retention/delete_conversation.html", status=status,
                               context={
        "conversation": conversation,
        "message_count": Message.objects.of(cid).count(),
        "checkpoint_count": conversation.checkpoints.count(),
        "forks": forks,
    })


# --- receipts -----------------------------------------------------------------------

@require_safe
@admin_required
def receipts(request):
    with _with_server_receipts(request) as seen:
        qs = seen.newest_first().select_related("project")
        before = request.GET.get("before", "")
        if before:
            anchor = seen.filter(pk=_uuid_or_404(before)).first()
            if anchor is None:
                raise Http404("no such receipt")
            qs = qs.filter(created_at__lte=anchor.created_at).exclude(created_at=anchor.created_at, id__gte=anchor.id)
        page, more = keyset.take(qs.prefetch_related("checks"), RECEIPT_PAGE)
    return render(request, "retention/receipts.html", {"receipts": page, "next_before": page[-1].pk if more else None,
                                                       "window": _window_context()})


@contextmanager
def _with_server_receipts(request):
    """The receipts the page shows: the project's; for a superuser also those of requests
    filed for every project, read in the audited bypass that filed them."""
    if not acts_for_every_project(request):
        yield DeletionReceipt.objects.all()
        return
    project = _project(request)
    with every_project(request, reason="deletion receipts filed for every project"):
        yield DeletionReceipt.everywhere.filter(Q(project_id=project.pk) | Q(project__isnull=True))


def _uuid_or_404(value):
    try:
        return parse_conversation_id(value)
    except NotFound:
        raise Http404("no such receipt") from None


def _get_receipt(request, request_id) -> tuple[DeletionReceipt, dict]:
    """The receipt and its document (which names its project), or 404."""
    pk = _uuid_or_404(request_id)
    receipt = DeletionReceipt.objects.filter(pk=pk).select_related("project").first()
    if receipt is None and acts_for_every_project(request):
        with _with_server_receipts(request) as seen:
            receipt = seen.filter(pk=pk).select_related("project").first()
    if receipt is None:
        raise Http404("no such receipt")
    return receipt, receipt.as_document()


@require_safe
@admin_required
def receipt(request, request_id):
    receipt, document = _get_receipt(request, request_id)
    return render(request, "retention/receipt.html",
                  {"receipt": receipt, "document": json.dumps(document, indent=2)})


@require_safe
@admin_required
def receipt_json(request, request_id):
    receipt, document = _get_receipt(request, request_id)
    response = JsonResponse(document, json_dumps_params={"indent": 2})
    response["Content-Disposition"] = f'attachment; filename="deletion-receipt-{receipt.pk}.json"'
    return response
