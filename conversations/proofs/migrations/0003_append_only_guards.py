"""Signed heads are proof: never updated, never deleted. A signing key's public half is never
changed or deleted once on record (its retirement date may be set).

Same guards as the audit log's (conversations migration 0002); PostgreSQL reuses its
memoryui_refuse() function.
"""

from django.db import migrations

HEAD = "proofs_signedhead"
KEY = "proofs_signingkey"

SQLITE_FORWARD = [
    f"""CREATE TRIGGER signedhead_no_update BEFORE UPDATE ON {HEAD}
    BEGIN SELECT RAISE(ABORT, 'append-only: a signed head is never updated'); END""",
    f"""CREATE TRIGGER signedhead_no_delete BEFORE DELETE ON {HEAD}
    BEGIN SELECT RAISE(ABORT, 'append-only: a signed head is never deleted'); END""",
    f"""CREATE TRIGGER signingkey_no_change BEFORE UPDATE OF key_id, public_key ON {KEY}
    WHEN OLD.key_id IS NOT NEW.key_id OR OLD.public_key IS NOT NEW.public_key
    BEGIN SELECT RAISE(ABORT, 'append-only: a public signing key on record is never changed'); END""",
    f"""CREATE TRIGGER signingkey_no_delete BEFORE DELETE ON {KEY}
    BEGIN SELECT RAISE(ABORT, 'append-only: a public signing key on record is never deleted'); END""",
]
SQLITE_BACKWARD = [f"DROP TRIGGER IF EXISTS {name}" for name in (
    "signedhead_no_update", "signedhead_no_delete", "signingkey_no_change", "signingkey_no_delete")]

POSTGRES_FORWARD = [
    f"CREATE TRIGGER signedhead_no_update BEFORE UPDATE ON {HEAD} FOR EACH ROW EXECUTE FUNCTION memoryui_refuse()",
    f"CREATE TRIGGER signedhead_no_delete BEFORE DELETE ON {HEAD} FOR EACH ROW EXECUTE FUNCTION memoryui_refuse()",
    f"""CREATE TRIGGER signingkey_no_change BEFORE UPDATE ON {KEY} FOR EACH ROW
    WHEN (OLD.key_id IS DISTINCT FROM NEW.key_id OR OLD.public_key IS DISTINCT FROM NEW.public_key)
    EXECUTE FUNCTION memoryui_refuse()""",
    f"CREATE TRIGGER signingkey_no_delete BEFORE DELETE ON {KEY} FOR EACH ROW EXECUTE FUNCTION memoryui_refuse()",
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
