"""What memoryui counts for Prometheus; memoryui/metrics.py serves it at /metrics, added up
over gunicorn's worker processes. The core and the sub-apps record here (the top layer only
reads), so nothing below memoryui/ imports it.

Off unless MEMORYUI_METRICS_TOKEN is set: then /metrics answers a scrape that sends
`Authorization: Bearer <token>`, and nothing else (401); unset, /metrics is a 404 and
nothing is recorded, so the request path pays nothing for it.

Several workers: prometheus-client's multiprocess mode. memoryui/gunicorn_conf.py
points PROMETHEUS_MULTIPROC_DIR at a private folder under the data folder before the
workers start (each writes its own memory-mapped files there), and marks a worker's
files dead when it exits; a scrape, served by whichever worker, reads them all.

Labels hold only what the code chose: a route is the URL *pattern*
(`api/v1/conversations/<conversation_id>/messages`), never the path; statuses,
methods, formats and outcomes come from fixed sets. A subject, a message's text or
a key can never become a label, so a scrape reveals none (tests/test_ops_metrics.py).

What counts a project's data (appends, conversations, facts, imports, replays, prunes and
deletions) carries its project's slug as the label `project`: projects are few, and made
by operators, so the label stays bounded. `*` is every project at once (a prune or a
deletion request filed for the whole server); `none`, a request that acted in no project.
"""

import re

from django.apps import apps
from django.conf import settings
from django.db import DatabaseError, connection
from prometheus_client import Counter, Histogram

from conversations import plugins, projects


def enabled() -> bool:
    return bool(settings.MEMORYUI_METRICS_TOKEN)


_METHODS = {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}
_SAFE_LABEL = re.compile(r"^[a-z0-9_]{1,32}$")

REQUESTS = Counter("memoryui_http_requests", "HTTP requests answered, by route pattern, method and status",
                   ["route", "method", "status"])
LATENCY = Histogram("memoryui_http_request_duration_seconds", "Time to answer a request, by route pattern",
                    ["route", "method"],
                    buckets=(0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30))
APPENDS = Counter("memoryui_appended_messages", "Messages appended to conversations (every door), by project",
                  ["project"])
APPEND_BATCHES = Histogram("memoryui_append_batch_size", "Messages written by one append transaction, by project",
                           ["project"], buckets=(1, 2, 5, 10, 20, 50, 100, 200, 500, 1000))
CONVERSATIONS = Counter("memoryui_conversations_created", "Conversations created (forks and imports too), by project",
                        ["project"])
FACTS = Counter("memoryui_facts_written", "Facts written (proposed, or superseding one), by project and status",
                ["project", "status"])
REPLAYS = Counter("memoryui_idempotent_replays", "Writes answered from their Idempotency-Key (nothing written "
                                                 "again), by project", ["project"])
IMPORTS = Counter("memoryui_imports", "Import sources (sessions, files, streams) begun, by format and project",
                  ["format", "project"])
MAINTENANCE = Counter("memoryui_maintenance_runs", "Prunes and deletion requests, by kind, outcome and project",
                      ["kind", "outcome", "project"])
MAINTENANCE_SECONDS = Histogram("memoryui_maintenance_run_duration_seconds",
                                "How long a prune or deletion request held the maintenance lease",
                                ["kind", "outcome", "project"],
                                buckets=(0.1, 0.5, 1, 5, 15, 60, 300, 900, 3600, 14400))
ERASURE_VERIFICATIONS = Counter("memoryui_erasure_verifications",
                                "Deletion receipts filed, by their verification status and project",
                                ["status", "project"])

EVERY_PROJECT, NO_PROJECT = "*", "none"
_slugs: dict[int, str] = {}


def _label(value: str) -> str:
    """A label value from a fixed vocabulary, or "other": nothing a client typed gets through."""
    value = str(value or "").lower()
    return value if _SAFE_LABEL.match(value) else "other"


def project_label(project_id) -> str:
    """A project's slug (made by an operator: a bounded set), `*` for every project (None)."""
    if project_id is None:
        return EVERY_PROJECT
    slug = _slugs.get(project_id)
    if slug is None:
        # Slugs never change: one look-up per project per process.
        slug = apps.get_model("conversations", "Project").objects.filter(pk=project_id).values_list(
            "slug", flat=True).first() or "other"
        _slugs[project_id] = slug
    return slug


def scope_label(scope=None) -> str:
    """The label of the project a scope acts in (conversations/projects.py)."""
    scope = scope if scope is not None else projects.current()
    if scope.every:
        return EVERY_PROJECT
    return project_label(scope.project_id) if scope.project_id is not None else NO_PROJECT


def observe_request(*, route: str, method: str, status: int, seconds: float) -> None:
    method = method if method in _METHODS else "other"
    REQUESTS.labels(route, method, str(status)).inc()
    LATENCY.labels(route, method).observe(seconds)


def appended(rows: int, *, conversation_id=None) -> None:
    if not enabled():
        return
    scope = projects.current()
    if scope.one or conversation_id is None:
        project = scope_label(scope)
    else:  # an operator's process: the conversation's own project
        project = project_label(apps.get_model("conversations", "Conversation").everywhere.filter(
            pk=conversation_id).values_list("project_id", flat=True).first())
    APPENDS.labels(project).inc(rows)
    APPEND_BATCHES.labels(project).observe(rows)


def replayed(scope=None) -> None:
    REPLAYS.labels(scope_label(scope)).inc()


def import_begun(fmt: str, project_id) -> None:
    if enabled():
        IMPORTS.labels(_label(fmt), project_label(project_id)).inc()


def maintenance_run(*, kind: str, outcome: str, seconds: float) -> None:
    """A run in the scope it acts in: one project's prune, or a deletion request for every project."""
    if enabled():
        project = scope_label()
        MAINTENANCE.labels(_label(kind), outcome, project).inc()
        MAINTENANCE_SECONDS.labels(_label(kind), outcome, project).observe(seconds)


def erasure_verified(status: str, project_id) -> None:
    if enabled():
        ERASURE_VERIFICATIONS.labels(_label(status), project_label(project_id)).inc()


# -- post_save receivers: rows other apps write, counted without a line in their code -------
# (each app connects its own in its AppConfig.ready(): nothing here imports an app)


def on_import_source_saved(sender, instance, created, **kwargs):
    if created:
        import_begun(instance.format, instance.project_id)


def on_receipt_saved(sender, instance, created, **kwargs):
    """A receipt filed, or a window's verdict on one (its `status`: erased, verified, found, …)."""
    if created and enabled():
        # A window's check is of its receipt, whose project (or every project) it counts under.
        receipt = instance.receipt if hasattr(instance, "receipt_id") else instance
        erasure_verified((instance.verification or {}).get("status", "none"), receipt.project_id)


def on_conversation_saved(sender, instance, created, **kwargs):
    if created and enabled():
        CONVERSATIONS.labels(project_label(instance.project_id)).inc()


def on_fact_saved(sender, instance, created, **kwargs):
    if created and enabled():
        FACTS.labels(project_label(instance.project_id), _label(instance.status)).inc()


# -- gauges read at scrape time ----------------------------------------------------------

def scrape_time_families():
    """The gauges apps registered at `plugins.scrape_time_gauges` (retention: the deletion requests
    waiting for their window, and those past their deadline), read now; one whose database is
    away is left out of this scrape."""
    for collect in plugins.scrape_time_gauges.registered():
        try:
            yield from collect()
        except DatabaseError:
            connection.close_if_unusable_or_obsolete()
