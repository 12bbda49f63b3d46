"""The verification page (admin): each conversation's chain state, the erased ones, the audit log.

It checks the most recently active conversations on every load, within a row budget, and
the audit log's last events; `manage.py verify_log` checks everything (the page says so)."""

from django.shortcuts import render
from django.views.decorators.http import require_safe

from conversations.chain_verify import ERASED, TAMPERED, UNCHECKED, audit_events_seen, verify_all
from conversations.roles import admin_required

PAGE_CONVERSATIONS = 100
# What one page load walks at most: rows of conversations (a bigger one is listed as not
# checked here), and the audit log's last events.
PAGE_ROWS = 200_000
PAGE_AUDIT_EVENTS = 10_000
# The existing status badges (app.css): tampered reads as a failure, erased as a notice.
BADGE = {TAMPERED: "failed", ERASED: "running", UNCHECKED: "unchecked"}


@require_safe
@admin_required
def verification(request):
    report = verify_all(limit=PAGE_CONVERSATIONS, row_budget=PAGE_ROWS, audit_last=PAGE_AUDIT_EVENTS)
    rows = [{"state": s, "badge": BADGE.get(s.state, s.state)} for s in report.tampered]
    rows += [{"state": s, "badge": BADGE.get(s.state, s.state)} for s in report.conversations
             if s.state != TAMPERED]
    erased = [{"state": s, "badge": BADGE.get(s.state, s.state)} for s in report.erased]
    return render(request, "retention/verification.html", {
        "report": report, "rows": rows, "erased": erased, "limit": PAGE_CONVERSATIONS, "page_rows": f"{PAGE_ROWS:,}",
        "audit_last": f"{PAGE_AUDIT_EVENTS:,}", "audit_events": audit_events_seen(last=PAGE_AUDIT_EVENTS),
        "counts": report.as_dict()["counts"],
    })
