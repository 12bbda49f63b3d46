"""Prometheus metrics at /metrics, added up over gunicorn's worker processes.

Off unless MEMORYUI_METRICS_TOKEN is set: then /metrics answers a scrape that sends
`Authorization: Bearer <token>`, and nothing else (401); unset, /metrics is a 404 and
nothing is recorded, so the request path pays nothing for it.

What is counted, and under which labels, is conversations/metrics.py, where the core and
the sub-apps record it; this module only reads: the counters, the database's size, and the
gauges the apps registered for scrape time.

Several workers: prometheus-client's multiprocess mode. memoryui/gunicorn_conf.py
points PROMETHEUS_MULTIPROC_DIR at a private folder under the data folder before the
workers start (each writes its own memory-mapped files there), and marks a worker's
files dead when it exits; a scrape, served by whichever worker, reads them all.
"""

import hmac
import os
from pathlib import Path

from django.conf import settings
from django.db import DatabaseError, connection
from django.http import Http404, HttpResponse
from django.views.decorators.http import require_GET
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from conversations import metrics as recorded

# -- the scrape -------------------------------------------------------------------------


class _DatabaseSize:
    """Sizes read at scrape time by the worker that serves it (a gauge per worker would not add up)."""

    def collect(self):
        size = GaugeMetricFamily("memoryui_database_bytes", "Size of the database on disk")
        wal = GaugeMetricFamily("memoryui_sqlite_wal_bytes", "Size of the SQLite write-ahead log")
        if connection.vendor == "sqlite":
            # stat only: the live file is never opened outside SQLite (retention/rawfiles.py says why).
            main = Path(connection.settings_dict["NAME"])
            size.add_metric([], _stat_size(main))
            wal.add_metric([], _stat_size(Path(f"{main}-wal")))
            yield size
            yield wal
            return
        up = GaugeMetricFamily("memoryui_database_up", "1 when the scrape could read the database, else 0")
        try:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_database_size(current_database())")
                size.add_metric([], cursor.fetchone()[0])
        except DatabaseError:
            # A scrape while the database is away still answers (the counters are on disk,
            # not in it); the next scrape reconnects, as /readyz does.
            connection.close_if_unusable_or_obsolete()
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        yield up
        yield size


def _stat_size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


class _AppGauges:
    def collect(self):
        yield from recorded.scrape_time_families()


class _ThisProcess:
    """The process's own registry, when there is no multiprocess folder (runserver, tests)."""

    def collect(self):
        from prometheus_client import REGISTRY

        yield from REGISTRY.collect()


def scrape() -> bytes:
    registry = CollectorRegistry()
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        from prometheus_client import multiprocess

        multiprocess.MultiProcessCollector(registry)
    else:
        registry.register(_ThisProcess())
    registry.register(_DatabaseSize())
    registry.register(_AppGauges())
    return generate_latest(registry)


@require_GET
def metrics_view(request):
    token = settings.MEMORYUI_METRICS_TOKEN
    if not token:
        raise Http404("metrics are off (set MEMORYUI_METRICS_TOKEN)")
    sent = request.headers.get("Authorization", "")
    if not hmac.compare_digest(sent.encode("utf-8", "replace"), f"Bearer {token}".encode()):
        response = HttpResponse("a scrape needs Authorization: Bearer <MEMORYUI_METRICS_TOKEN>\n", status=401,
                                content_type="text/plain; charset=utf-8")
        response["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return response
    return HttpResponse(scrape(), content_type=CONTENT_TYPE_LATEST)

