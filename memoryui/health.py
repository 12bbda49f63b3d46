"""/healthz and /readyz: what a load balancer or a Kubernetes probe asks.

Both answer JSON without authentication and say nothing about what is stored:
only which check failed.

- /healthz: the process is up and serving (no database query: a database outage
  must not make an orchestrator restart healthy app servers).
- /readyz: the database answers, every migration is applied, the database shows every
  erasure of the erasure journal (`erasures`: a restored backup, or a point-in-time
  recovery, is not ready until `manage.py restore` or `manage.py reapply_erasures` has
  re-applied those newer than it; the journal missing, another one or damaged is not
  ready either: conversations/retention/erasure_journal.py), and the maintenance
  lease is not stuck (its holder stopped beating: a crashed prune or deletion request,
  which the next run takes over but an operator should hear about). 503 while any
  fails; a server whose database went away is ready again as soon as it is back,
  because a failed check drops the connection and the next probe opens a new one.
"""

from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.http import JsonResponse
from django.views.decorators.http import require_GET

from conversations.retention import erasure_journal, lease

# Migrations are not un-applied under a running server: once seen complete, not asked again.
_migrated = False


@require_GET
def healthz(request):
    return JsonResponse({"status": "ok"})


@require_GET
def readyz(request):
    checks = {"database": _database(), "migrations": "unknown", "erasures": "unknown", "maintenance": "unknown"}
    if checks["database"] == "ok":
        checks["migrations"] = _run(_migrations)
        if checks["migrations"] == "ok":
            checks["erasures"] = _run(erasure_journal.readiness)
        checks["maintenance"] = _run(_maintenance)
    ready = all(v == "ok" for v in checks.values())
    return JsonResponse({"status": "ready" if ready else "not_ready", "checks": checks},
                        status=200 if ready else 503)


def _run(check) -> str:
    try:
        return check()
    except Exception:
        _drop_connection()
        return "unavailable"


def _database() -> str:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
        return "ok"
    except Exception:
        _drop_connection()
        return "unavailable"


def _drop_connection() -> None:
    # A connection that failed is closed, so the next probe connects afresh and sees recovery.
    try:
        connection.close()
    except Exception:
        pass


def _migrations() -> str:
    global _migrated
    if _migrated:
        return "ok"
    executor = MigrationExecutor(connection)
    pending = executor.migration_plan(executor.loader.graph.leaf_nodes())
    if pending:
        return "pending"
    _migrated = True
    return "ok"


def _maintenance() -> str:
    held = lease.current()
    return "stuck" if held is not None and lease.is_stuck(held) else "ok"
