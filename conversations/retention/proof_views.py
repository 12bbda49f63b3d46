"""The verification page (admin): each conversation's chain state, the erased ones, the audit log.

It checks the most recently active conversations on every load; `manage.py verify_log`
checks all of them (the page says so)."""

from django.shortcuts import render
from django.views.decorators.http import require_safe

from conversations.proof import ERASED, TAMPERED, verify_all

from .views import admin_required

PAGE_CONVERSATIONS = 100
# The existing status badges (app.css): tampered reads as a failure, erased as a notice.
BADGE = {TAMPERED: "failed", ERASED: "running"}


@require_safe
@admin_required
def verification(request):
    report = verify_all(limit=PAGE_CONVERSATIONS)
    rows = [{"state": s, "badge": BADGE.get(s.state, s.state)} for s in report.tampered]
    rows += [{"state": s, "badge": BADGE.get(s.state, s.state)} for s in report.conversations
             if s.state != TAMPERED]
    erased = [{"state": s, "badge": BADGE.get(s.state, s.state)} for s in report.erased]
    return render(request, "retention/verification.html", {
        "report": report, "rows": rows, "erased": erased, "limit": PAGE_CONVERSATIONS,
        "counts": report.as_dict()["counts"],
    })
