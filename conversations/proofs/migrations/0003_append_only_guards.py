"""Signed heads are proof: never updated, never deleted. A signing key's public half is never
changed or deleted once on record (its retirement date may be set).

Same guards as the audit log's (conversations migration 0002); PostgreSQL reuses its
memoryui_refuse() function.
"""

from django.db import migrations

from conversations.migration_sql import postgres_trigger, sqlite_no_delete, sqlite_no_update, sqlite_refusal

HEAD = "proofs_signedhead"
KEY = "proofs_signingkey"

SQLITE_FORWARD = [
    sqlite_no_update("signedhead_no_update", HEAD, "a signed head"),
    sqlite_no_delete("signedhead_no_delete", HEAD, "a signed head"),
    sqlite_refusal("signingkey_no_change", KEY, "UPDATE OF key_id, public_key",
                   "append-only: a public signing key on record is never changed",
                   when="OLD.key_id IS NOT NEW.key_id OR OLD.public_key IS NOT NEW.public_key"),
    sqlite_no_delete("signingkey_no_delete", KEY, "a public signing key on record"),
]
SQLITE_BACKWARD = [f"DROP TRIGGER IF EXISTS {name}" for name in (
    "signedhead_no_update", "signedhead_no_delete", "signingkey_no_change", "signingkey_no_delete")]

POSTGRES_FORWARD = [
    postgres_trigger("signedhead_no_update", HEAD, "UPDATE"),
    postgres_trigger("signedhead_no_delete", HEAD, "DELETE"),
    postgres_trigger("signingkey_no_change", KEY, "UPDATE",
                   when="OLD.key_id IS DISTINCT FROM NEW.key_id OR OLD.public_key IS DISTINCT FROM NEW.public_key"),
    postgres_trigger("signingkey_no_delete", KEY, "DELETE"),
]
POSTGRES_BACKWARD = [
    f"DROP TRIGGER IF EXISTS signedhead_no_update ON {HEAD}",
    f"DROP TRIGGER IF EXISTS signedhead_no_delete ON {HEAD}",
    f"DROP TRIGGER IF EXISTS signingkey_no_change ON {KEY}",
    f"DROP TRIGGER IF EXISTS signingkey_no_delete ON {KEY}",
]


def _run(by_vendor):
    def run(apps, schema_editor):
        for sql in by_vendor[schema_editor.connection.vendor]:
            schema_editor.execute(sql, params=None)

    return run


class Migration(migrations.Migration):
    dependencies = [
        ("proofs", "0002_checkpoint_chain"),
        ("conversations", "0002_append_only_guards"),  # memoryui_refuse()
    ]

    operations = [
        migrations.RunPython(_run({"sqlite": SQLITE_FORWARD, "postgresql": POSTGRES_FORWARD}),
                             _run({"sqlite": SQLITE_BACKWARD, "postgresql": POSTGRES_BACKWARD})),
    ]
