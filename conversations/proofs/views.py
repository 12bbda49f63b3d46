"""Admin pages: the signing keys, and the subject access export (request, then download).

Admins only. Asking for an export and downloading it are each recorded in the audit
log (the subject by its SHA-256 only); the download is also a read of the subject's
conversations and facts, recorded in the access logs. The subject travels in POST
bodies, never in an address, so it is in no access log line of a proxy.
"""

from django.http import StreamingHttpResponse
from django.shortcuts import render
from django.utils.cache import add_never_cache_headers
from django.views.decorators.http import require_POST, require_safe

from conversations import store
from conversations.errors import InvalidInput
from conversations.project_http import acts_for_every_project, every_project
from conversations.roles import actor_of, is_admin, role_required

from . import bundle, heads
from .keys import SigningUnavailable
from .models import SignHeadsRun

_admin_only = role_required(
    is_admin, "Only admins see signing keys and export what is held about a subject.")


@require_safe
@_admin_only
def keys_page(request):
    document = heads.keys_document()
    last_run = SignHeadsRun.objects.filter(finished_at__isnull=False).order_by("-started_at").first()
    return render(request, "proofs/keys.html", {
        "tab": "signing", "document": document, "last_run": last_run,
        "keys_url": request.build_absolute_uri("/api/v1/signing-keys"),
    })


def _export_page(request, *, status=200, **context):
    context.setdefault("subject", "")
    context.setdefault("all_projects", False)
    context["tab"] = "subject_export"
    context["for_every_project"] = acts_for_every_project(request)
    context["project"] = getattr(request, "project", None)
    response = render(request, "proofs/subject_export.html", context, status=status)
    add_never_cache_headers(response)  # the page names the subject
    return response


@require_safe
@_admin_only
def subject_export_form(request):
    return _export_page(request)


def _prepare(request, subject: str):
    """The export of the page's project, or of every project for a superuser who asked (audited)."""
    all_projects = request.POST.get("all_projects") == "yes"
    if not all_projects:
        return bundle.prepare(subject)
    with every_project(request, reason="subject export for every project"):
        return bundle.prepare(subject, all_projects=True)


@require_POST
@_admin_only
def subject_export_request(request):
    subject = request.POST.get("subject", "")
    try:
        export = _prepare(request, subject)
    except (InvalidInput, SigningUnavailable) as exc:
        return _export_page(request, status=exc.status, subject=subject, error=exc.message,
                            all_projects=request.POST.get("all_projects") == "yes")
    store.record_audit(actor=actor_of(request), action="subject.export_requested", target_type="subject",
                       target_id=export.audit_detail("page")["subject_sha256"], detail=export.audit_detail("page"))
    return _export_page(request, subject=export.subject, export=export, all_projects=export.project is None)


@require_POST
@_admin_only
def subject_export_download(request):
    try:
        export = _prepare(request, request.POST.get("subject", ""))
    except (InvalidInput, SigningUnavailable) as exc:
        return _export_page(request, status=exc.status, subject=request.POST.get("subject", ""), error=exc.message)
    bundle.record_download(export, actor=actor_of(request), via="page")
    response = StreamingHttpResponse(export.chunks(), content_type="application/zip")
    response["Content-Disposition"] = f'attachment; filename="{export.filename}"'
    add_never_cache_headers(response)
    return response
