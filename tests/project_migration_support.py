"""The projects migration run on a copy of a database as it was before projects (one process).

    DATABASE_URL=… python -m tests.project_migration_support --messages 100000

Migrates an empty database to the state before projects (conversations 0008 and each
sub-app's migration before its `*_projects` one) with Django's MigrationExecutor, fills it
as the code of that time left it (bulk statements, through the historical models and raw
SQL: conversations and their messages with their hash chains, checkpoints, facts and their
events, access logs, API keys, people in the role groups, audit events, receipts, import
sources, LangGraph threads, the ledger, idempotency keys), migrates it forward to the
latest state, then looks at the result with today's code. Prints one JSON document of what
it saw, for tests/test_project_migration.py to judge.
"""

import argparse
import hashlib
import json
import os
import time
import uuid
from datetime import UTC, datetime, timedelta

import django

BEFORE = [
    ("conversations", "0008_chain_hash_function"), ("access", "0002_append_only_guards"),
    ("facts", "0005_subject_norm"), ("frameworks", "0001_initial"), ("imports", "0003_import_stage"),
    ("langgraph", "0002_langchain_history"), ("ledger", "0003_record_chain"),
    ("proofs", "0005_conversation_id_as_text"), ("retention", "0004_erased_rows"),
    ("search", "0005_dates_of_indexed_rows"), ("loginguard", "0001_initial"),
]
PER_CONVERSATION = 500
START = datetime(2026, 1, 5, 9, 30, tzinfo=UTC)
KEY_SECRET = "mui_0ldkey01_the-secret-of-a-key-made-before-projects"
OLD_WORD = "quetzalcoatl"  # a word only the old rows hold, for search
# People and the groups they were in; the strongest role wins.
PEOPLE = {"ann": ["auditor"], "rev": ["reviewer"], "boss": ["auditor", "admin"], "nobody": []}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=100_000)
    args = parser.parse_args(argv)
    django.setup()
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    seen = {"vendor": connection.vendor}
    started = time.perf_counter()
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    seen["seconds_to_before"] = round(time.perf_counter() - started, 1)
    apps = MigrationExecutor(connection).loader.project_state(BEFORE).apps
    at = time.perf_counter()
    made = fill(apps, args.messages)
    seen["seconds_to_fill"] = round(time.perf_counter() - at, 1)
    before = snapshot(connection)
    at = time.perf_counter()
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())
    connection.close()
    seen["seconds_to_migrate"] = round(time.perf_counter() - at, 1)
    seen.update(made=made, before=before, after=snapshot(connection))
    seen.update(look_after(made))
    seen["seconds"] = round(time.perf_counter() - started, 1)
    print(json.dumps(seen, default=str))


# -- the database before projects ---------------------------------------------------------


def fill(apps, messages: int) -> dict:
    """Rows of every kind, as the code before projects wrote them; returns what the checks need."""
    from django.db import connection, transaction

    from conversations import chain
    from conversations.message_schema import encode_message

    Conversation = apps.get_model("conversations", "Conversation")
    conversations = max(2, messages // PER_CONVERSATION)
    made = {"conversations": [], "external": ("claude-code", "session-0"), "messages": conversations * PER_CONVERSATION}
    with transaction.atomic():
        rows = []
        for c in range(conversations):
            cid = uuid.UUID(int=(c + 1) << 64 | 0x7 << 76)
            made["conversations"].append(str(cid))
            rows.append(Conversation(
                id=cid, title=f"old conversation {c}", subject=f"customer:{c % 10}", subject_norm=f"customer:{c % 10}",
                meta={}, namespace="claude-code" if c % 2 == 0 else "", external_id=f"session-{c}" if c % 2 == 0
                else None, created_at=START, last_activity_at=START + timedelta(minutes=c), received_at=START,
                next_position=PER_CONVERSATION, pinned=False, deleting=False, parent_relation=""))
        Conversation.objects.bulk_create(rows)
        _messages(connection, made["conversations"], encode_message, chain)
        _chained(apps, made["conversations"][0], chain)
        _around(apps, made["conversations"])
    return made


def _messages(connection, ids, encode_message, chain):
    """PER_CONVERSATION messages each, sealed as the store sealed them, in batches of raw INSERTs."""
    sql = ("INSERT INTO conversations_message (conversation_id, position, kind, content, created_at, salt, "
           "commitment, chain_hash) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)")
    with connection.cursor() as cursor:
        for n, cid in enumerate(ids):
            db_id = uuid.UUID(cid).hex if connection.vendor == "sqlite" else uuid.UUID(cid)
            prev, batch = chain.GENESIS, []
            for position in range(PER_CONVERSATION):
                word = f" {OLD_WORD}" if n == 0 and position == 8 else ""
                message = ({"kind": "user", "content": f"where is order {position}{word}"} if position % 2 == 0
                           else {"kind": "assistant", "content": f"order {position} ships tomorrow"})
                kind, text = encode_message(message)
                when = START + timedelta(minutes=n, microseconds=position)
                salt, commitment, prev = chain.seal(prev, chain.message_payload(position, kind, text, when))
                batch.append((db_id, position, kind, text, connection.ops.adapt_datetimefield_value(when), salt,
                              commitment, prev))
            cursor.executemany(sql, batch)


def _seal(chain, record_type: str, prev: bytes, values: dict) -> dict:
    payload = chain.payload(record_type, [values[name] for name in chain.FIELDS[record_type]])
    salt, commitment, chain_hash = chain.seal(prev, payload)
    return {"salt": salt, "commitment": commitment, "chain_hash": chain_hash}


def _chained(apps, cid: str, chain) -> None:
    """A checkpoint, task-state versions, an action and audit events, each chain sealed."""
    conversation_id = uuid.UUID(cid)
    Checkpoint = apps.get_model("conversations", "Checkpoint")
    values = {"message_position": 99, "summary": "the first hundred rows", "created_at": START, "created_by": "key:1"}
    Checkpoint.objects.create(conversation_id=conversation_id, **values, **_seal(chain, "checkpoint", chain.GENESIS,
                                                                               values))
    State = apps.get_model("ledger", "TaskStateEvent")
    prev = chain.GENESIS
    for version in (1, 2):
        values = {"version": version, "position": 10 * version, "state": json.dumps({"step": version}),
                  "changes": json.dumps({"step": version}), "actor": "key:1", "created_at": START}
        sealed = _seal(chain, "state", prev, values)
        State.objects.create(conversation_id=conversation_id, **values, **sealed)
        prev = sealed["chain_hash"]
    Action = apps.get_model("ledger", "Action")
    values = {"position": 20, "namespace": "claude-code", "idempotency_key": "refund-7", "name": "refund",
              "arguments": '{"amount":12}', "result": '{"ok":true}', "status": "performed", "original_id": None,
              "actor": "key:1", "created_at": START}
    Action.objects.create(conversation_id=conversation_id, **values, **_seal(chain, "action", chain.GENESIS, values))
    Audit = apps.get_model("conversations", "AuditEvent")
    prev = chain.GENESIS
    for n in range(3):
        values = {"at": START + timedelta(seconds=n), "actor": "user:boss", "action": "api_key.created",
                  "target_type": "api_key", "target_id": str(n + 1), "detail": {"scopes": ["read"], "n": n}}
        sealed = _seal(chain, "audit", prev, values)
        Audit.objects.create(**values, **sealed)
        prev = sealed["chain_hash"]


def _around(apps, ids: list[str]) -> None:
    """The rows around conversations: people, keys, facts, logs, receipts, imports, LangGraph, keys."""
    first, second = uuid.UUID(ids[0]), uuid.UUID(ids[1])
    Group, User = apps.get_model("auth", "Group"), apps.get_model("auth", "User")
    for name, groups in PEOPLE.items():
        user = User.objects.create(username=name, password="!", is_active=True)
        for group in groups:
            user.groups.add(Group.objects.get_or_create(name=group)[0])
    User.objects.create(username="root", password="!", is_active=True, is_superuser=True, is_staff=True)
    ApiKey = apps.get_model("conversations", "ApiKey")
    prefix = KEY_SECRET.split("_")[1]
    ApiKey.objects.create(name="old agent", prefix=prefix, key_hash=hashlib.sha256(KEY_SECRET.encode()).hexdigest(),
                          scopes=["read", "write", "facts:read"], created_at=START, created_by="boss")
    Fact, Event = apps.get_model("facts", "Fact"), apps.get_model("facts", "FactEvent")
    for n, status in enumerate(("approved", "approved", "proposed")):
        fact = Fact.objects.create(subject="customer:0", subject_norm="customer:0", text=f"Prefers email {n}.",
                                   category="preference", importance=5, status=status, valid_from=START,
                                   recorded_at=START, created_by="key:1", source_conversation_id=first,
                                   source_position=n)
        Event.objects.create(fact=fact, kind="proposed", at=START, actor="key:1", detail={})
    apps.get_model("facts", "FactAccess").objects.create(at=START, actor="user:rev", subject="customer:0",
                                                         subject_norm="customer:0", view="subject")
    apps.get_model("access", "ConversationAccess").objects.create(at=START, actor="user:ann", conversation_id=first,
                                                                  via="page", detail="")
    apps.get_model("retention", "DeletionReceipt").objects.create(
        id=uuid.uuid4(), created_at=START, actor="user:boss", kind="subject", subject_sha256="0" * 64,
        conversation_ids=[], counts={"messages": 0}, verification={"clean": True})
    Source = apps.get_model("imports", "ImportSource")
    source = Source.objects.create(format="claude-code", namespace="claude-code", source_key="session-0",
                                   conversation_id=first, created_at=START, updated_at=START, entries=1,
                                   consumed_chars=10, consumed_hash="h", state={})
    apps.get_model("imports", "SourceEntry").objects.create(source_id=source.pk, seq=0, conversation_id=first,
                                                            position=0, line=1, uuid="u-0", parent_uuid="",
                                                            group="", real=True, raw='{"uuid":"u-0"}')
    apps.get_model("frameworks", "SessionSummary").objects.create(source_id=source.pk, namespace="claude-code",
                                                                  session_id="session-0", conversation_id=first,
                                                                  data={"summary": "x"}, updated_at=START)
    apps.get_model("langgraph", "LangGraphCheckpoint").objects.create(
        thread_id="thread-1", checkpoint_ns="", checkpoint_id="c1", parent_checkpoint_id="", type="json", data=b"{}",
        metadata_type="json", metadata_data=b"{}", metadata={}, run_id="", conversation_id=second, rows=0,
        message_ids=[], created_at=START)
    apps.get_model("langgraph", "LangGraphWrite").objects.create(
        thread_id="thread-1", checkpoint_ns="", checkpoint_id="c1", task_id="t", task_path="", idx=0,
        channel="messages", type="json", data=b"{}", conversation_id=second)
    apps.get_model("langgraph", "LangChainHistory").objects.create(namespace="langchain", session_id="chat-1",
                                                                   generation=0, conversation_id=second)
    apps.get_model("conversations", "IdempotencyKey").objects.create(
        caller="key:1", key="k-1", fingerprint="f" * 64, status=201, body="{}", content_type="application/json",
        conversation_id=first, subject_norm="", created_at=datetime.now(UTC))


# -- what is there ------------------------------------------------------------------------


def snapshot(connection) -> dict:
    """Rows per table, the triggers, and a digest of every chain column."""
    from django.db import connection as db

    tables = sorted(t for t in db.introspection.table_names() if not t.startswith(("django_", "sqlite_"))
                    and "_fts" not in t)
    counts = {}
    with db.cursor() as cursor:
        for table in tables:
            cursor.execute(f'SELECT COUNT(*) FROM "{table}"')
            counts[table] = cursor.fetchone()[0]
        if db.vendor == "sqlite":
            cursor.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")
        else:
            cursor.execute("SELECT tgname FROM pg_trigger WHERE NOT tgisinternal")
        triggers = sorted(name for (name,) in cursor.fetchall())
        digest = hashlib.sha256()
        for table, order in (("conversations_message", "conversation_id, position"),
                             ("conversations_checkpoint", "id"), ("conversations_auditevent", "id"),
                             ("ledger_taskstateevent", "id"), ("ledger_action", "id")):
            cursor.execute(f"SELECT salt, commitment, chain_hash FROM {table} ORDER BY {order}")
            for row in cursor.fetchall():
                for value in row:
                    digest.update(bytes(value) if value is not None else b"-")
    return {"counts": counts, "triggers": triggers, "chains": digest.hexdigest()}


def look_after(made: dict) -> dict:
    """What today's code sees of the migrated database."""
    from django.db import connection

    from conversations.models import Project

    out = {"projects": list(Project.objects.values_list("id", "slug"))}
    out["outside_default"] = _rows_outside_default(connection)
    out["memberships"] = _memberships()
    out["refused"] = _guards(connection, made)
    out.update(_the_old_key(made))
    out["verified"] = _verify()
    out["per_project"] = _per_project_ids(made)
    return out


def _rows_outside_default(connection) -> dict:
    """Per table with a project column: its rows not in `default` (1), and how many are in it."""
    from django.apps import apps

    found = {}
    with connection.cursor() as cursor:
        for model in apps.get_models():
            if "project" not in {f.name for f in model._meta.concrete_fields} or model._meta.db_table == "":
                continue
            table = model._meta.db_table
            cursor.execute(f"SELECT COUNT(*) FROM {table} WHERE project_id IS NULL OR project_id <> 1")
            outside = cursor.fetchone()[0]
            cursor.execute(f"SELECT COUNT(*) FROM {table} WHERE project_id = 1")
            found[table] = {"outside": outside, "in_default": cursor.fetchone()[0]}
    return found


def _memberships() -> dict:
    from django.contrib.auth import get_user_model

    from conversations import projects
    from conversations.models import Membership
    from conversations.roles import roles_of

    held = {m.user.username: [m.project.slug, m.role] for m in Membership.objects.select_related("user", "project")}
    with projects.scoped(projects.one(projects.DEFAULT_PROJECT_ID)):
        roles = {u.username: sorted(roles_of(u)) for u in get_user_model().objects.all()}
    return {"held": held, "roles_in_default": roles}


def _guards(connection, made: dict) -> dict:
    """Each raw statement the append-only guards must refuse: the error it got, or None."""
    from django.db import transaction

    cid = uuid.UUID(made["conversations"][0])
    db_id = cid.hex if connection.vendor == "sqlite" else cid
    statements = {
        "update a message": ("UPDATE conversations_message SET content = 'x' WHERE conversation_id = %s", [db_id]),
        "delete a message": ("DELETE FROM conversations_message WHERE conversation_id = %s", [db_id]),
        "update a checkpoint": ("UPDATE conversations_checkpoint SET summary = 'x'", []),
        "update an audit event": ("UPDATE conversations_auditevent SET actor = 'x'", []),
        "delete an audit event": ("DELETE FROM conversations_auditevent", []),
        "update a receipt": ("UPDATE retention_deletionreceipt SET actor = 'x'", []),
        "delete an import source": ("DELETE FROM imports_importsource", []),
        "update a task state": ("UPDATE ledger_taskstateevent SET actor = 'x'", []),
        "move a conversation to another project": (
            "UPDATE conversations_conversation SET project_id = 2 WHERE id = %s", [db_id]),
    }
    refused = {}
    for what, (sql, params) in statements.items():
        try:
            with transaction.atomic(), connection.cursor() as cursor:
                cursor.execute(sql, params)
                refused[what] = None if cursor.rowcount else "no row touched"
        except Exception as exc:  # the guard's error, whatever the database calls it
            refused[what] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
    return refused


def _the_old_key(made: dict) -> dict:
    """The key made before projects, through the API: where it acts and what it sees."""
    from django.test import Client
    from django.test.utils import setup_test_environment

    from conversations import api_keys, project_store, projects, store

    setup_test_environment()
    key = api_keys.authenticate_api_key(KEY_SECRET)
    other = project_store.create_project(slug="other", name="Other")
    with projects.scoped(projects.one(other.pk)):
        theirs = store.create_conversation(title="the other project's", namespace="claude-code",
                                           external_id="session-0")
    client = Client(HTTP_AUTHORIZATION=f"Bearer {KEY_SECRET}")
    listed = client.get("/api/v1/conversations", {"limit": 100}).json()
    found = client.get("/api/v1/search", {"q": OLD_WORD}).json()
    recalled = client.get("/api/v1/facts/recall", {"subject": "customer:0"}).json()
    first = made["conversations"][0]
    appended = client.post(f"/api/v1/conversations/{first}/messages", {"kind": "user", "content": "after"},
                           content_type="application/json")
    return {"key_project": key.project_id if key else "no key",
            "listed": [c["id"] for c in listed["items"]], "other_conversation": str(theirs.pk),
            "search_hits": [(h["conversation_id"], h["position"]) for h in found["items"]],
            "recalled": sorted(r["fact"]["text"] for r in recalled["items"]),
            "appended": [appended.status_code, appended.json().get("position")]}


def _verify() -> dict:
    from conversations.chain_verify import verify_all

    document = verify_all().as_dict()
    rows = {name: sum(c[name] for c in document["conversations"]) for name in ("messages", "checkpoints", "ledger")}
    return {"ok": document["ok"], "counts": document["counts"], "rows": rows,
            "audit": [document["audit_log"]["state"], document["audit_log"]["rows"]]}


def _per_project_ids(made: dict) -> dict:
    """The same external ids, keys and threads in `default` and in another project."""
    from django.db import IntegrityError, transaction

    from conversations import projects, store
    from conversations.imports.models import ImportSource
    from conversations.langgraph.models import LangChainHistory, LangGraphCheckpoint
    from conversations.models import Conversation, Project

    other = Project.objects.get(slug="other")
    namespace, external_id = made["external"]
    out = {}
    with projects.scoped(projects.one(projects.DEFAULT_PROJECT_ID)):
        found, created = store.get_or_create_conversation(namespace=namespace, external_id=external_id)
        out["default_again"] = [str(found.pk), created]
    conversation = Conversation.everywhere.filter(project=other).first()
    rows = {
        "import source": lambda project: ImportSource.everywhere.create(
            project=project, format="claude-code", namespace="claude-code", source_key="session-0",
            conversation_id=conversation.pk, entries=0, consumed_chars=0, consumed_hash="", state={}),
        "langgraph checkpoint": lambda project: LangGraphCheckpoint.everywhere.create(
            project=project, thread_id="thread-1", checkpoint_ns="", checkpoint_id="c1", parent_checkpoint_id="",
            type="json", data=b"{}", metadata_type="json", metadata_data=b"{}", metadata={}, run_id="",
            conversation_id=conversation.pk, rows=0, message_ids=[]),
        "langchain history": lambda project: LangChainHistory.everywhere.create(
            project=project, namespace="langchain", session_id="chat-1", generation=0,
            conversation_id=conversation.pk),
    }
    for what, create in rows.items():
        outcome = {}
        for project in (other, Project.objects.get(pk=projects.DEFAULT_PROJECT_ID)):
            try:
                with transaction.atomic():
                    create(project)
                outcome[project.slug] = "created"
            except IntegrityError:
                outcome[project.slug] = "refused"
        out[what] = outcome
    return out


if __name__ == "__main__":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memoryui.settings")
    main()
