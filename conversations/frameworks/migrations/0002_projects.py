"""Session summaries belong to their session's project."""

from django.db import migrations, models

from conversations.migration_sql import add_project_column, replace_index, scoped_managers

TABLE = "frameworks_sessionsummary"


class Migration(migrations.Migration):
    dependencies = [("frameworks", "0001_initial"), ("conversations", "0009_projects")]

    operations = [
        add_project_column(model_name="sessionsummary", table=TABLE),
        replace_index(model_name="sessionsummary", table=TABLE, columns="project_id, namespace, session_id",
                      index=models.Index(fields=["project", "namespace", "session_id"],
                                         name="session_summary_key_idx")),
        *scoped_managers("sessionsummary"),
    ]
