"""`manage.py copy_database --to postgres:///NAME`: everything from the embedded SQLite
database into an empty PostgreSQL one, verified, the source untouched.

Each step runs as its own process with its own DATABASE_URL, as a person moving would
run it: a SQLite source filled through the store (and the demo data), the copy, then
a digest of every table read back through each database. The test run's own database takes
no part (`database_independent`): it runs once, in `.ci/run`'s SQLite pass, against the
PostgreSQL server that pass is given (PGPORT), and it needs one.
"""

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from tests.conftest import skip_or_fail

ROOT = Path(__file__).resolve().parent.parent
pytestmark = [pytest.mark.slow, pytest.mark.database_independent]

FILL = r"""
import django; django.setup()
from datetime import timedelta
from django.utils import timezone
from conversations import api_keys, store
from conversations.models import Conversation, IdempotencyKey
from conversations.facts import store as facts
from conversations.retention.erasure import execute_deletion
from conversations.retention.pruning import prune_older_than
from conversations.ledger import store as ledger

c = store.create_conversation(title="Refund for order 7", subject="customer:42", meta={"agent": "bot", "n": [1, 2]},
                              namespace="claude-agent", external_id="session-1")
for i in range(30):
    store.append_message(conversation_id=c.pk,
                         message={"kind": "user" if i % 2 else "assistant", "content": f"step {i} é ✓ \u00a0"})
store.append_messages(conversation_id=c.pk, messages=[
    {"kind": "note", "text": "n\u0001ul kept escaped", "meta": {"z": 1, "a": 2}},
    {"kind": "tool", "tool_call_id": "c1", "content": "ok", "is_error": True}])
store.checkpoint_at(conversation_id=c.pk, position=10, summary="first ten folded", actor="key:bot")
store.checkpoint_at(conversation_id=c.pk, position=20, summary="twenty folded", actor="key:bot")
child = store.fork_conversation(conversation_id=c.pk, position=15, title="branch", actor="user:alice",
                                external_id="b-1")
store.append_message(conversation_id=child.pk, message={"kind": "did", "text": "branch step"})
store.set_pinned(conversation_id=child.pk, pinned=True, actor="user:alice")
fact = facts.propose_fact(subject="customer:42", text="Prefers email.", importance=3, created_by="key:bot",
                          source_conversation_id=c.pk, source_position=3)
facts.approve_fact(fact_id=fact.pk, actor="user:rev")
facts.supersede_fact(fact_id=fact.pk, actor="user:rev", text="Prefers email, never phone.", reason="clarified")
ledger.set_state(conversation_id=c.pk, state={"order": 7}, expected_version=0, actor="key:bot")
ledger.record_action(conversation_id=c.pk, idempotency_key="refund-7", name="refund", arguments={"amount": 12},
                     result={"ok": True}, status="performed", actor="key:bot")
api_keys.create_api_key(name="agent", scopes=["read", "write"], created_by="admin")
gone = store.create_conversation(title="to erase", subject="customer:99")
store.append_message(conversation_id=gone.pk, message={"kind": "user", "content": "erase me please"})
execute_deletion(subject="customer:99", actor="user:admin")
old = store.create_conversation(title="old")
Conversation.objects.filter(pk=old.pk).update(last_activity_at=timezone.now() - timedelta(days=400),
                                              received_at=timezone.now() - timedelta(days=400))
prune_older_than(days=90, actor="system")
IdempotencyKey.objects.create(caller="key:1", key="k-1", fingerprint="f" * 64, status=201, body='{"position": 3}',
                              content_type="application/json", conversation_id=c.pk)
print(c.pk)
"""

DIGEST = r"""
import django, json; django.setup()
from conversations.copying import models_in_order, _table_digest, _conversation_digest
from conversations.models import Conversation
from django.db import connection
tables = set(connection.introspection.table_names())
out = {m._meta.db_table: [m._base_manager.count(), _table_digest(m, "default")]
       for m in models_in_order() if m._meta.db_table in tables}
out["conversations"] = {str(c): _conversation_digest(c, "default")
                        for c in Conversation.objects.values_list("pk", flat=True)}
print(json.dumps(out))
"""

TRY_GUARDS = r"""
import django, sys; django.setup()
from django.db import connection, transaction
from conversations import api_keys, store
from conversations.models import Conversation, Message
cid = sys.argv[1]
refused = 0
for sql in ("UPDATE conversations_message SET content = 'x'", "DELETE FROM conversations_message",
            "UPDATE conversations_conversation SET external_id = 'other' WHERE external_id IS NOT NULL"):
    try:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(sql)
    except Exception:
        refused += 1
position = store.append_message(conversation_id=cid, message={"kind": "user", "content": "after the move"})
key, _ = api_keys.create_api_key(name="after", scopes=["read"])
print(refused, position, Conversation.objects.get(pk=cid).next_position, key.pk)
"""


def _run(args, url, check=True, data_dir=None):
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "DJANGO_SETTINGS_MODULE")}
    env.update(DATABASE_URL=url, DJANGO_SETTINGS_MODULE="memoryui.settings", MEMORYUI_LOG_LEVEL="ERROR",
               MEMORYUI_DATA_DIR=str(data_dir), PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          check=check, timeout=600)


@pytest.fixture
def postgres_target():
    name = f"mui_copy_{uuid.uuid4().hex[:10]}"
    try:
        subprocess.run(["createdb", name], check=True, capture_output=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        skip_or_fail("PostgreSQL is not reachable (createdb failed): copy_database needs a target")
    yield f"postgres:///{name}"
    subprocess.run(["dropdb", "--if-exists", name], capture_output=True, timeout=60)


def test_it_copies_everything_verified_and_leaves_the_source_alone(tmp_path, postgres_target):
    source = f"sqlite:///{tmp_path / 'memoryui.sqlite3'}"
    _run(["manage.py", "migrate", "-v0"], source, data_dir=tmp_path)
    _run(["manage.py", "load_demo", "--coding-turns", "10"], source, data_dir=tmp_path)
    cid = _run(["-c", FILL], source, data_dir=tmp_path).stdout.split()[-1]
    before = json.loads(_run(["-c", DIGEST], source, data_dir=tmp_path).stdout)

    copied = _run(["manage.py", "copy_database", "--to", postgres_target], source, data_dir=tmp_path, check=False)

    assert copied.returncode == 0, copied.stdout[-3000:] + copied.stderr[-3000:]
    assert "Copied and verified" in copied.stdout
    assert "100%" in copied.stderr  # the progress bar
    after = json.loads(_run(["-c", DIGEST], source, data_dir=tmp_path).stdout)
    target = json.loads(_run(["-c", DIGEST], postgres_target, data_dir=tmp_path).stdout)
    assert after == before  # nothing changed in the source
    for table in ("conversations_message", "conversations_checkpoint", "conversations_auditevent",
                  "facts_fact", "facts_factevent", "retention_deletionreceipt", "retention_prunerun",
                  "conversations_apikey", "conversations_idempotencykey", "ledger_action"):
        assert before[table][0] > 0, table  # the source really has rows of each kind
    assert target == before  # every table, row for row, and each conversation's content

    # The copy is a working database: the guards hold, positions and ids continue.
    refused, position, next_position, key_id = _run(["-c", TRY_GUARDS, cid], postgres_target,
                                                    data_dir=tmp_path).stdout.split()
    assert refused == "3"
    assert (int(position), int(next_position)) == (32, 33)  # 30 appends and a batch of 2 were copied
    assert int(key_id) > before["conversations_apikey"][0]


def test_it_refuses_a_target_that_is_not_empty(tmp_path, postgres_target):
    source = f"sqlite:///{tmp_path / 'memoryui.sqlite3'}"
    _run(["manage.py", "migrate", "-v0"], source, data_dir=tmp_path)
    _run(["manage.py", "migrate", "-v0"], postgres_target, data_dir=tmp_path)
    refused = _run(["manage.py", "copy_database", "--to", postgres_target], source, data_dir=tmp_path, check=False)
    assert refused.returncode != 0 and "not empty" in refused.stderr


def test_it_refuses_a_postgresql_source_or_a_sqlite_target(tmp_path, postgres_target):
    refused = _run(["manage.py", "copy_database", "--to", f"sqlite:///{tmp_path / 'x.sqlite3'}"],
                   f"sqlite:///{tmp_path / 'memoryui.sqlite3'}", data_dir=tmp_path, check=False)
    assert refused.returncode != 0 and "must be a PostgreSQL database" in refused.stderr
    refused = _run(["manage.py", "copy_database", "--to", postgres_target], postgres_target, data_dir=tmp_path,
                   check=False)
    assert refused.returncode != 0 and "must be the embedded SQLite database" in refused.stderr
