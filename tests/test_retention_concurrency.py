"""Agents keep appending, from another process, while a prune runs."""

import json
import subprocess
import sys

import pytest

from conversations.models import Conversation, Message
from conversations.retention.pruning import prune_older_than
from tests.helpers import wait_until
from tests.retention_support import ROOT, age, conversation, database_url, subprocess_env

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

APPENDER = """
import json, sys, time, django
django.setup()
from conversations import store
cid, stop = sys.argv[1], sys.argv[2]
import os
latencies, errors = [], []
print("ready", flush=True)
while not os.path.exists(stop) and len(latencies) < 1_000_000:
    started = time.monotonic()
    try:
        store.append_message(conversation_id=cid, message={"kind": "note", "text": f"still here {len(latencies)}"})
    except Exception as exc:
        errors.append(repr(exc))
        break
    latencies.append(time.monotonic() - started)
print(json.dumps({"appends": len(latencies), "errors": errors, "max_wait": max(latencies, default=0)}))
"""


def test_appends_from_another_process_succeed_while_a_prune_runs(tmp_path):
    victims = [conversation(title=f"old {i}", messages=0) for i in range(3)]
    from django.db import transaction

    from conversations import store

    with transaction.atomic():
        for v in victims:
            for j in range(60):
                store.append_message(conversation_id=v.pk, message={"kind": "user", "content": f"old text {j}"})
    for v in victims:
        age(v, 100)
    busy = conversation(title="busy agent", messages=1)
    stop = tmp_path / "stop"
    appender = subprocess.Popen(
        [sys.executable, "-c", APPENDER, str(busy.pk), str(stop)], cwd=ROOT, text=True,
        env=subprocess_env(DATABASE_URL=database_url()), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    try:
        assert appender.stdout.readline().strip() == "ready"
        batches_with_an_append_between = 0

        def after_each_batch(done, total):
            nonlocal batches_with_an_append_between
            if batches_with_an_append_between < 5:
                seen = Message.objects.of(busy.pk).count()
                # Between two of our batches, the other process gets its append in.
                wait_until(lambda: Message.objects.of(busy.pk).count() > seen, timeout=60, interval=0.005,
                           message="an append between batches")
                batches_with_an_append_between += 1

        result = prune_older_than(days=90, batch_size=10, progress=after_each_batch)
    finally:
        stop.write_text("stop")
        out, err = appender.communicate(timeout=60)
    report = json.loads(out.strip().splitlines()[-1])
    assert report["errors"] == [], err
    assert batches_with_an_append_between == 5
    assert result.conversations == 3 and result.messages == 180
    assert not Conversation.objects.filter(pk__in=[v.pk for v in victims]).exists()
    # The busy conversation's positions are still 0..n-1, one per append.
    positions = list(Message.objects.of(busy.pk).order_by("position").values_list("position", flat=True))
    assert positions == list(range(1 + report["appends"]))
    print(f"appends during the prune: {report['appends']}, longest wait {report['max_wait']:.3f}s")
