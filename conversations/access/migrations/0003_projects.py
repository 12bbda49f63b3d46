"""The conversation access log belongs to a project: every existing row goes into `default`."""

from django.db import migrations, models

from conversations.migration_sql import add_index, add_project_column, scoped_managers

TABLE = "access_conversationaccess"


class Migration(migrations.Migration):
    dependencies = [("access", "0002_append_only_guards"), ("conversations", "0009_projects")]

    operations = [
        add_project_column(model_name="conversationaccess", table=TABLE),
        add_index(model_name="conversationaccess", table=TABLE, columns="project_id, id DESC",
                  index=models.Index(fields=["project", "-id"], name="access_project_idx")),
        *scoped_managers("conversationaccess"),
    ]
