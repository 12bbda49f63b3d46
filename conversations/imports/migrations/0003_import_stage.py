"""Conversations an import is still writing (models.ImportStage).

A stage row is deleted by the import that holds it (while its conversation is still
marked `deleting`, just before the import unmarks it) or with its conversation; the
database refuses any other delete, like the other rows an import keeps.
"""

from django.db import migrations, models
import django.utils.timezone

from conversations.migration_sql import WHILE_CONVERSATION_LIVE, postgres_trigger, sqlite_refusal

STAGE = "imports_importstage"

SQLITE_FORWARD = [
    sqlite_refusal("importstage_guard_delete", STAGE, "DELETE",
                   "an import stage is deleted only while its conversation is hidden", when=WHILE_CONVERSATION_LIVE),
]
SQLITE_BACKWARD = ["DROP TRIGGER IF EXISTS importstage_guard_delete"]
# memoryui_guard_owned_delete() comes from imports/0002.
POSTGRES_FORWARD = [
    postgres_trigger("importstage_guard_delete", STAGE, "DELETE", "memoryui_guard_owned_delete"),
]
POSTGRES_BACKWARD = [f"DROP TRIGGER IF EXISTS importstage_guard_delete ON {STAGE}"]


def _run(statements_by_vendor):
    def run(apps, schema_editor):
        for sql in statements_by_vendor[schema_editor.connection.vendor]:
            schema_editor.execute(sql, params=None)

    return run


class Migration(migrations.Migration):
    dependencies = [("imports", "0002_entries_append_only")]

    operations = [
        migrations.CreateModel(
            name="ImportStage",
            fields=[
                ("conversation_id", models.UUIDField(primary_key=True, serialize=False)),
                ("holder", models.CharField(max_length=100)),
                ("source_key", models.CharField(blank=True, default="", max_length=300)),
                ("started_at", models.DateTimeField(default=django.utils.timezone.now)),
                ("heartbeat_at", models.DateTimeField(default=django.utils.timezone.now)),
            ],
        ),
        migrations.RunPython(_run({"sqlite": SQLITE_FORWARD, "postgresql": POSTGRES_FORWARD}),
                             _run({"sqlite": SQLITE_BACKWARD, "postgresql": POSTGRES_BACKWARD})),
    ]
