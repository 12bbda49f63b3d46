"""Facts and the facts access log keep their subject's normal form (NFC, case-folded),
so a deletion request for `cust:42` also erases what was recorded as `Cust:42`.

Added with plain ALTER TABLE … ADD COLUMN: on SQLite a table rebuild would drop the
facts' guard and full-text triggers (migration 0002).
"""

from django.db import migrations, models

from conversations.subjects import normalize_subject

FACT = "facts_fact"
ACCESS = "facts_factaccess"

FORWARD = [
    f"ALTER TABLE {FACT} ADD COLUMN subject_norm varchar(1200) NOT NULL DEFAULT ''",
    f"ALTER TABLE {ACCESS} ADD COLUMN subject_norm varchar(1200) NOT NULL DEFAULT ''",
    f"CREATE INDEX fact_subject_norm_idx ON {FACT} (subject_norm)",
    f"CREATE INDEX factaccess_subject_norm_idx ON {ACCESS} (subject_norm)",
]
BACKWARD = [
    "DROP INDEX IF EXISTS factaccess_subject_norm_idx",
    "DROP INDEX IF EXISTS fact_subject_norm_idx",
    f"ALTER TABLE {ACCESS} DROP COLUMN subject_norm",
    f"ALTER TABLE {FACT} DROP COLUMN subject_norm",
]


def fill(apps, schema_editor):
    for name in ("Fact", "FactAccess"):
        model = apps.get_model("facts", name)
        for subject in model.objects.values_list("subject", flat=True).distinct().iterator():
            model.objects.filter(subject=subject).update(subject_norm=normalize_subject(subject))


class Migration(migrations.Migration):
    dependencies = [("facts", "0004_recall_covering_index")]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunSQL(FORWARD, BACKWARD)],
            state_operations=[
                migrations.AddField(
                    model_name="fact", name="subject_norm",
                    field=models.CharField(blank=True, default="", editable=False, max_length=1200),
                ),
                migrations.AddField(
                    model_name="factaccess", name="subject_norm",
                    field=models.CharField(blank=True, default="", editable=False, max_length=1200),
                ),
                migrations.AddIndex(
                    model_name="fact", index=models.Index(fields=["subject_norm"], name="fact_subject_norm_idx"),
                ),
                migrations.AddIndex(
                    model_name="factaccess",
                    index=models.Index(fields=["subject_norm"], name="factaccess_subject_norm_idx"),
                ),
            ],
        ),
        migrations.RunPython(fill, migrations.RunPython.noop),
    ]
