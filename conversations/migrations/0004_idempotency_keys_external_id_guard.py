"""Idempotency keys, and external ids that never change once set.

- `IdempotencyKey`: one row per write sent with an `Idempotency-Key` header
  (conversations/idempotency.py), unique per caller and key.
- A guard on both databases: once a conversation has an external id, neither it
  nor its namespace can change (a framework finds its conversation by them); a
  namespace set without an external id is a label and may be set once too.
"""

import django.utils.timezone
from django.db import migrations, models

from conversations.migration_sql import postgres_trigger, sqlite_refusal

CONV = "conversations_conversation"
MESSAGE = "external ids are immutable: namespace and external_id never change once set"

SQLITE_FORWARD = [
    sqlite_refusal("conversation_external_id_immutable", CONV, "UPDATE OF namespace, external_id", MESSAGE,
                   when="(OLD.external_id IS NOT NULL AND NEW.external_id IS NOT OLD.external_id)\n"
                        "      OR (OLD.namespace <> '' AND NEW.namespace IS NOT OLD.namespace)"),
]
SQLITE_BACKWARD = ["DROP TRIGGER IF EXISTS conversation_external_id_immutable"]

POSTGRES_FORWARD = [
    f"""CREATE OR REPLACE FUNCTION memoryui_external_id_immutable() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF (OLD.external_id IS NOT NULL AND NEW.external_id IS DISTINCT FROM OLD.external_id)
           OR (OLD.namespace <> '' AND NEW.namespace IS DISTINCT FROM OLD.namespace) THEN
            RAISE EXCEPTION '{MESSAGE}' USING ERRCODE = 'integrity_constraint_violation';
        END IF;
        RETURN NEW;
    END $$""",
    postgres_trigger("conversation_external_id_immutable", CONV, "UPDATE OF namespace, external_id",
                   "memoryui_external_id_immutable"),
]
POSTGRES_BACKWARD = [
    f"DROP TRIGGER IF EXISTS conversation_external_id_immutable ON {CONV}",
    "DROP FUNCTION IF EXISTS memoryui_external_id_immutable()",
]


def _run(statements_by_vendor):
    def run(apps, schema_editor):
        statements = statements_by_vendor.get(schema_editor.connection.vendor)
        if statements is None:
            raise RuntimeError(f"memoryui supports SQLite and PostgreSQL, not {schema_editor.connection.vendor}")
        for sql in statements:
            schema_editor.execute(sql, params=None)

    return run


class Migration(migrations.Migration):
    dependencies = [("conversations", "0003_subject_norm_external_ids")]

    operations = [
        migrations.CreateModel(
            name="IdempotencyKey",
            fields=[
                ("id", models.BigAutoField(primary_key=True, serialize=False)),
                ("caller", models.CharField(max_length=64)),
                ("key", models.CharField(max_length=255)),
                ("fingerprint", models.CharField(max_length=64)),
                ("status", models.PositiveSmallIntegerField(default=0)),
                ("content_type", models.CharField(blank=True, default="", max_length=100)),
                ("body", models.TextField(blank=True, default="")),
                ("conversation_id", models.UUIDField(blank=True, null=True)),
                ("subject_norm", models.CharField(blank=True, default="", max_length=1200)),
                ("created_at", models.DateTimeField(default=django.utils.timezone.now)),
            ],
            options={
                "indexes": [
                    models.Index(fields=["created_at"], name="idempotency_created_idx"),
                    models.Index(fields=["conversation_id"], name="idempotency_conversation_idx"),
                ],
                "constraints": [
                    models.UniqueConstraint(fields=("caller", "key"), name="idempotency_caller_key_uniq"),
                ],
            },
        ),
        migrations.RunPython(
            _run({"sqlite": SQLITE_FORWARD, "postgresql": POSTGRES_FORWARD}),
            _run({"sqlite": SQLITE_BACKWARD, "postgresql": POSTGRES_BACKWARD}),
        ),
    ]
