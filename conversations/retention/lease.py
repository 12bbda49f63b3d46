"""One maintenance run at a time: a prune and a deletion request never overlap.

Both delete rows in batches and then give pages back; two at once would fight
over the same marked conversations and double the time writers share the
database with them. The run holds a lease, one row in the database (so every
gunicorn worker and every `manage.py` process sees it): a second run is refused
with `maintenance_running` and told who holds it since when.

A holder refreshes its heartbeat between steps. A run that died cannot release
its lease: the lease is taken over when its process is gone (same host, pid not
alive) or its heartbeat is older than STALE_AFTER.
"""

import os
import socket
import time
import uuid
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta

from django.db import IntegrityError, OperationalError, connection, transaction
from django.utils import timezone

from conversations import metrics
from conversations.db import busy_timeout
from conversations.errors import StoreError

from .models import MaintenanceLease

NAME = "maintenance"
STALE_AFTER = timedelta(minutes=10)
BEAT_EVERY_SECONDS = 5.0


class MaintenanceRunning(StoreError):
    code = "maintenance_running"
    status = 409


@dataclass
class Lease:
    holder: str
    kind: str
    _last_beat: float = 0.0

    def beat(self) -> None:
        """Say the run is alive; cheap to call after every batch."""
        now = time.monotonic()
        if now - self._last_beat < BEAT_EVERY_SECONDS:
            return
        self._last_beat = now
        try:
            with transaction.atomic():
                kept = MaintenanceLease.objects.filter(name=NAME, holder=self.holder).update(
                    heartbeat_at=timezone.now())
        except OperationalError:
            # The database is busy (a caller may have shortened the busy timeout to let
            # writers through): a heartbeat can wait for the next step.
            self._last_beat = 0.0
            return
        if not kept:
            raise MaintenanceRunning(
                "this run's maintenance lease was taken over (it looked stale); stopping so that two runs "
                "never overlap", code="maintenance_lease_lost")


def _holder() -> str:
    return f"{socket.gethostname()[:30]}:{os.getpid()}:{uuid.uuid4().hex[:12]}"


def process_gone(holder: str) -> bool:
    """Whether the process a holder string names (host:pid:…) has ended on this host; a
    holder of another host, or unreadable, is never taken for gone."""
    host, _, rest = holder.partition(":")
    pid = rest.partition(":")[0]
    if host != socket.gethostname()[:30] or not pid.isascii() or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except (PermissionError, OverflowError, ValueError):
        return False
    return False


def is_stuck(lease: MaintenanceLease) -> bool:
    """Whether a held lease's run has died: the next run would take it over (/readyz reports it)."""
    return lease.heartbeat_at <= timezone.now() - STALE_AFTER or process_gone(lease.holder)


def _describe(lease: MaintenanceLease) -> str:
    what = "a prune" if lease.kind == "prune" else "a deletion request"
    return (f"{what} started by {lease.actor} at {lease.acquired_at:%Y-%m-%d %H:%M:%S} UTC is still running "
            f"(last progress {lease.heartbeat_at:%H:%M:%S} UTC); try again when it has finished")


def acquire(*, kind: str, actor: str) -> Lease:
    holder = _holder()
    now = timezone.now()
    try:
        with transaction.atomic():
            qs = MaintenanceLease.objects.for_update().filter(name=NAME)
            current = qs.first()
            if current is not None:
                if not is_stuck(current):
                    raise MaintenanceRunning(_describe(current))
                qs.delete()
            MaintenanceLease.objects.create(name=NAME, holder=holder, kind=kind, actor=str(actor)[:200],
                                            acquired_at=now, heartbeat_at=now)
    except IntegrityError:  # PostgreSQL: another run inserted the row first
        current = MaintenanceLease.objects.filter(name=NAME).first()
        raise MaintenanceRunning(_describe(current) if current else "another maintenance run just started") from None
    return Lease(holder=holder, kind=kind, _last_beat=time.monotonic())


def release(lease: Lease) -> None:
    with transaction.atomic():
        MaintenanceLease.objects.filter(name=NAME, holder=lease.holder).delete()


@contextmanager
def maintenance(*, kind: str, actor: str):
    started, outcome = time.monotonic(), "failed"
    try:
        lease = acquire(kind=kind, actor=actor)
    except MaintenanceRunning:
        metrics.maintenance_run(kind=kind, outcome="refused", seconds=0.0)
        raise
    try:
        yield lease
        outcome = "finished"
    finally:
        metrics.maintenance_run(kind=kind, outcome=outcome, seconds=time.monotonic() - started)
        try:
            release(lease)
        except Exception:  # the database may be what failed; a stale lease is taken over later
            pass


def current() -> MaintenanceLease | None:
    return MaintenanceLease.objects.filter(name=NAME).first()


# How often, and how long at most, maintenance tries for SQLite's write lock (`in_turn`).
LOCK_POLL_SECONDS = 0.002
LOCK_WAIT_SECONDS = 120


def in_turn(step):
    """Run `step` (a write in a transaction of its own), waiting for SQLite's write lock
    by polling every few milliseconds instead of in the busy handler.

    SQLite's busy handler sleeps up to 100 ms between tries, and an agent of another
    process appending back to back frees the lock for well under a millisecond between
    its transactions: maintenance waiting that way would wait for minutes."""
    if connection.vendor != "sqlite" or connection.in_atomic_block:
        return step()
    deadline = time.monotonic() + LOCK_WAIT_SECONDS
    with busy_timeout(0):
        while True:
            try:
                return step()
            except OperationalError as exc:
                if ("locked" not in str(exc) and "busy" not in str(exc)) or time.monotonic() > deadline:
                    raise
            time.sleep(LOCK_POLL_SECONDS)
