"""Columns for erasure by normalised subject, external ids, and how a child relates to its parent.

- `subject_norm`: the subject NFC-normalised and case-folded (conversations/subjects.py);
  deletion requests match on it, so `Cust:42` and `cust:42` are one subject.
- `namespace` + `external_id`: a framework's own session id (unique together when
  an external id is set), so it finds "its" conversation without a mapping table.
- `parent_relation`: "fork" for a fork, "subagent" for a subagent's transcript kept
  under its session; empty for a conversation without a parent.

The columns are added with plain ALTER TABLE … ADD COLUMN: on SQLite Django would
otherwise rebuild the table for a NOT NULL column, and a rebuild drops the
table's triggers (migration 0002).
"""

from django.db import migrations, models

from conversations.subjects import normalize_subject

CONV = "conversations_conversation"

FORWARD = [
    f"ALTER TABLE {CONV} ADD COLUMN subject_norm varchar(1200) NOT NULL DEFAULT ''",
    f"ALTER TABLE {CONV} ADD COLUMN namespace varchar(200) NOT NULL DEFAULT ''",
    f"ALTER TABLE {CONV} ADD COLUMN external_id varchar(200) NULL",
    f"ALTER TABLE {CONV} ADD COLUMN parent_relation varchar(16) NOT NULL DEFAULT ''",
    f"CREATE INDEX conversation_subject_norm_idx ON {CONV} (subject_norm)",
    f"CREATE INDEX conversation_namespace_idx ON {CONV} (namespace)",
    f"CREATE UNIQUE INDEX conversation_external_id_uniq ON {CONV} (namespace, external_id) "
    "WHERE external_id IS NOT NULL",
    f"UPDATE {CONV} SET parent_relation = 'fork' WHERE parent_id IS NOT NULL",
]
BACKWARD = [
    "DROP INDEX IF EXISTS conversation_external_id_uniq",
    "DROP INDEX IF EXISTS conversation_namespace_idx",
    "DROP INDEX IF EXISTS conversation_subject_norm_idx",
    f"ALTER TABLE {CONV} DROP COLUMN parent_relation",
    f"ALTER TABLE {CONV} DROP COLUMN external_id",
    f"ALTER TABLE {CONV} DROP COLUMN namespace",
    f"ALTER TABLE {CONV} DROP COLUMN subject_norm",
]


def fill_subject_norm(apps, schema_editor):
    Conversation = apps.get_model("conversations", "Conversation")
    subjects = Conversation.objects.exclude(subject="").values_list("subject", flat=True).distinct()
    for subject in subjects.iterator():
        Conversation.objects.filter(subject=subject).update(subject_norm=normalize_subject(subject))


class Migration(migrations.Migration):
    dependencies = [("conversations", "0002_append_only_guards")]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunSQL(FORWARD, BACKWARD)],
            state_operations=[
                migrations.AddField(
                    model_name="conversation", name="subject_norm",
                    field=models.CharField(blank=True, default="", editable=False, max_length=1200),
                ),
                migrations.AddField(
                    model_name="conversation", name="namespace",
                    field=models.CharField(blank=True, default="", max_length=200),
                ),
                migrations.AddField(
                    model_name="conversation", name="external_id",
                    field=models.CharField(blank=True, max_length=200, null=True),
                ),
                migrations.AddField(
                    model_name="conversation", name="parent_relation",
                    field=models.CharField(blank=True, default="", max_length=16),
                ),
                migrations.AddIndex(
                    model_name="conversation",
                    index=models.Index(fields=["subject_norm"], name="conversation_subject_norm_idx"),
                ),
                migrations.AddIndex(
                    model_name="conversation",
                    index=models.Index(fields=["namespace"], name="conversation_namespace_idx"),
                ),
                migrations.AddConstraint(
                    model_name="conversation",
                    constraint=models.UniqueConstraint(
                        condition=models.Q(external_id__isnull=False), fields=("namespace", "external_id"),
                        name="conversation_external_id_uniq",
                    ),
                ),
            ],
        ),
        migrations.RunPython(fill_subject_norm, migrations.RunPython.noop),
    ]
