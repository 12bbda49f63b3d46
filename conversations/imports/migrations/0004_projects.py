"""Import sources belong to a project: a session key is unique per project, format and
namespace, so two projects may both import session `abc`. Every existing source goes into
`default`."""

from django.db import migrations

from conversations.migration_sql import add_project_column, replace_unique, scoped_managers


class Migration(migrations.Migration):
    dependencies = [("imports", "0003_import_stage"), ("conversations", "0009_projects")]

    operations = [
        add_project_column(model_name="importsource", table="imports_importsource"),
        replace_unique(model_name="importsource", table="imports_importsource", name="import_source_identity",
                       fields=["project", "format", "namespace", "source_key"]),
        *scoped_managers("importsource"),
    ]
