"""The record proves itself (docs/DESIGN.md, invariant 13, conversations/chain.py).

Messages, checkpoints and audit events get `salt`, `commitment` and `chain_hash`;
a fork gets `forked_from_chain_hash`, its parent's chain hash at the fork position.
Columns are added with plain ALTER TABLE … ADD COLUMN (as 0003 and 0005): on SQLite
Django would rebuild the tables and drop their triggers.

Rows written before this migration are chained here, in their order, with the
append-only triggers on UPDATE switched off for the length of the migration (its
own transaction) and back on before it commits.
"""

from django.db import migrations, models

from conversations import chain
from conversations.migration_sql import sqlite_no_update

CONV = "conversations_conversation"
MSG = "conversations_message"
CKPT = "conversations_checkpoint"
AUDIT = "conversations_auditevent"
BLOB = {"sqlite": "blob", "postgresql": "bytea"}
COLUMNS = [(t, c) for t in (MSG, CKPT, AUDIT) for c in ("salt", "commitment", "chain_hash")] + [
    (CONV, "forked_from_chain_hash")]
NO_UPDATE = {MSG: "message_no_update", CKPT: "checkpoint_no_update", AUDIT: "auditevent_no_update"}
# The SQLite triggers exactly as 0002 made them.
SQLITE_REFUSAL = {MSG: "a message row", CKPT: "a checkpoint row", AUDIT: "an audit event"}


def add_columns(apps, schema_editor):
    vendor = schema_editor.connection.vendor
    if vendor not in BLOB:
        raise RuntimeError(f"memoryui supports SQLite and PostgreSQL, not {vendor}")
    for table, column in COLUMNS:
        schema_editor.execute(f"ALTER TABLE {table} ADD COLUMN {column} {BLOB[vendor]} NULL", params=None)


def drop_columns(apps, schema_editor):
    for table, column in COLUMNS:
        schema_editor.execute(f"ALTER TABLE {table} DROP COLUMN {column}", params=None)


def _triggers(schema_editor, enable: bool):
    cursor = schema_editor.connection.cursor()
    for table, name in NO_UPDATE.items():
        if schema_editor.connection.vendor == "postgresql":
            cursor.execute(f"ALTER TABLE {table} {'ENABLE' if enable else 'DISABLE'} TRIGGER {name}")
        elif enable:
            cursor.execute(sqlite_no_update(name, table, SQLITE_REFUSAL[table], indent=12))
        else:
            cursor.execute(f"DROP TRIGGER IF EXISTS {name}")


def chain_existing_rows(apps, schema_editor):
    """Seal every row already stored, in chain order (see conversations/chain.py)."""
    alias = schema_editor.connection.alias
    Message = apps.get_model("conversations", "Message")
    Checkpoint = apps.get_model("conversations", "Checkpoint")
    AuditEvent = apps.get_model("conversations", "AuditEvent")
    if not (Message.objects.using(alias).exists() or Checkpoint.objects.using(alias).exists()
            or AuditEvent.objects.using(alias).exists()):
        return
    _triggers(schema_editor, enable=False)
    cursor = schema_editor.connection.cursor()
    prev, last = chain.GENESIS, None
    rows = Message.objects.using(alias).order_by("conversation_id", "position").values_list(
        "conversation_id", "position", "kind", "content", "created_at")
    for cid, position, kind, content, created_at in rows.iterator(chunk_size=2000):
        if cid != last:
            prev, last = chain.GENESIS, cid
        salt, commitment, prev = chain.seal(prev, chain.message_payload(position, kind, content, created_at))
        Message.objects.using(alias).filter(conversation_id=cid, position=position).update(
            salt=salt, commitment=commitment, chain_hash=prev)
    prev, last = chain.GENESIS, None
    for ck in Checkpoint.objects.using(alias).order_by("conversation_id", "id").iterator(chunk_size=2000):
        if ck.conversation_id != last:
            prev, last = chain.GENESIS, ck.conversation_id
        body = chain.payload("checkpoint", [ck.message_position, ck.summary, ck.created_at, ck.created_by])
        salt, commitment, prev = chain.seal(prev, body)
        Checkpoint.objects.using(alias).filter(pk=ck.pk).update(salt=salt, commitment=commitment, chain_hash=prev)
    prev = chain.GENESIS
    for ev in AuditEvent.objects.using(alias).order_by("id").iterator(chunk_size=2000):
        body = chain.payload("audit", [ev.at, ev.actor, ev.action, ev.target_type, ev.target_id, ev.detail])
        salt, commitment, prev = chain.seal(prev, body)
        AuditEvent.objects.using(alias).filter(pk=ev.pk).update(salt=salt, commitment=commitment, chain_hash=prev)
    del cursor
    _triggers(schema_editor, enable=True)


def _field():
    return models.BinaryField(null=True, editable=False)


class Migration(migrations.Migration):
    dependencies = [("conversations", "0005_conversation_received_at")]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunPython(add_columns, drop_columns)],
            state_operations=[
                migrations.AddField(model_name=model, name=name, field=_field())
                for model in ("message", "checkpoint", "auditevent") for name in ("salt", "commitment", "chain_hash")
            ] + [migrations.AddField(model_name="conversation", name="forked_from_chain_hash", field=_field())],
        ),
        migrations.RunPython(chain_existing_rows, migrations.RunPython.noop),
    ]
