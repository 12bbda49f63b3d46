"""Facts belong to a project (conversations/projects.py): every existing fact and access-log
row goes into `default`, and the indexes that recall, the queue and the access log read lead
with the project, so a project's reads stay one index range."""

from django.db import migrations, models
from django.db.models import Q

from conversations.migration_sql import add_project_column, replace_index, scoped_managers

FACT, ACCESS = "facts_fact", "facts_factaccess"


class Migration(migrations.Migration):
    dependencies = [("facts", "0005_subject_norm"), ("conversations", "0009_projects")]

    operations = [
        add_project_column(model_name="fact", table=FACT),
        replace_index(model_name="fact", table=FACT, columns="project_id, subject, status",
                      index=models.Index(fields=["project", "subject", "status"], name="fact_subject_status_idx")),
        replace_index(
            model_name="fact", table=FACT,
            columns="project_id, subject, valid_from, invalid_at, expires_at, importance, recorded_at, "
                    "last_accessed_at",
            where="status = 'approved' AND superseded_by_id IS NULL",
            index=models.Index(
                fields=["project", "subject", "valid_from", "invalid_at", "expires_at", "importance", "recorded_at",
                        "last_accessed_at"],
                condition=Q(status="approved", superseded_by__isnull=True), name="fact_recall_idx")),
        replace_index(model_name="fact", table=FACT, columns="project_id, status, recorded_at",
                      index=models.Index(fields=["project", "status", "recorded_at"],
                                         name="fact_status_recorded_idx")),
        *scoped_managers("fact"),
        add_project_column(model_name="factaccess", table=ACCESS),
        replace_index(model_name="factaccess", table=ACCESS, columns="project_id, at DESC, id DESC",
                      index=models.Index(fields=["project", "-at", "-id"], name="factaccess_at_idx")),
        *scoped_managers("factaccess"),
    ]
