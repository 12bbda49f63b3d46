"""One maintenance run at a time: prunes and deletion requests never overlap."""

import subprocess
import sys
from datetime import timedelta

import pytest
from django.utils import timezone

from conversations.models import Conversation
from conversations.retention import erasure, lease
from conversations.retention.lease import MaintenanceRunning, maintenance
from conversations.retention.models import MaintenanceLease, PruneRun
from conversations.retention.pruning import prune_older_than
from tests.retention_support import conversation

pytestmark = pytest.mark.django_db


def test_a_second_run_is_refused_while_one_holds_the_lease():
    old = conversation(title="old", messages=2, age_days=100)
    with maintenance(kind="deletion", actor="user:alice"):
        with pytest.raises(MaintenanceRunning) as refused:
            prune_older_than(days=90, actor="user:bob")
        with pytest.raises(MaintenanceRunning):
            erasure.execute_deletion(subject="", conversation_ids=[str(old.pk)], actor="user:bob")
    assert refused.value.code == "maintenance_running" and refused.value.status == 409
    assert "a deletion request started by user:alice" in refused.value.message
    assert Conversation.objects.filter(pk=old.pk).exists()
    assert not PruneRun.objects.exists()  # the refused prune recorded no run


def test_the_lease_is_released_when_the_run_ends_or_fails():
    with maintenance(kind="prune", actor="user:alice"):
        pass
    assert not MaintenanceLease.objects.exists()
    with pytest.raises(ZeroDivisionError):
        with maintenance(kind="prune", actor="user:alice"):
            raise ZeroDivisionError
    assert not MaintenanceLease.objects.exists()
    prune_older_than(days=90, actor="user:bob")  # free again


def test_a_lease_whose_process_died_is_taken_over():
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    pid = int(dead.stdout)
    now = timezone.now()
    MaintenanceLease.objects.create(name=lease.NAME, holder=f"{lease.socket.gethostname()[:30]}:{pid}:abc",
                                    kind="prune", actor="user:crashed", acquired_at=now, heartbeat_at=now)
    with maintenance(kind="deletion", actor="user:next") as held:
        assert MaintenanceLease.objects.get().holder == held.holder


def test_a_lease_with_a_stopped_heartbeat_is_taken_over():
    long_ago = timezone.now() - lease.STALE_AFTER - timedelta(seconds=1)
    MaintenanceLease.objects.create(name=lease.NAME, holder="another-host:1:abc", kind="prune",
                                    actor="user:crashed", acquired_at=long_ago, heartbeat_at=long_ago)
    with maintenance(kind="prune", actor="user:next"):
        pass


def test_a_live_lease_on_another_host_is_respected():
    now = timezone.now()
    MaintenanceLease.objects.create(name=lease.NAME, holder="another-host:1:abc", kind="prune",
                                    actor="user:elsewhere", acquired_at=now, heartbeat_at=now)
    with pytest.raises(MaintenanceRunning):
        lease.acquire(kind="prune", actor="user:me")


def test_a_run_whose_lease_was_taken_over_stops(monkeypatch):
    with pytest.raises(MaintenanceRunning) as lost:
        with maintenance(kind="prune", actor="user:slow") as held:
            MaintenanceLease.objects.update(holder="another-host:1:xyz")
            monkeypatch.setattr(lease, "BEAT_EVERY_SECONDS", 0)
            held.beat()
    assert lost.value.code == "maintenance_lease_lost"
