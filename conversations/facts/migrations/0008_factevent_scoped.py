"""A fact's events are read through the current project's facts (conversations/projects.py):
the model's default manager is scoped, its base manager every project's. No schema change."""

from django.db import migrations

from conversations.migration_sql import scoped_managers


class Migration(migrations.Migration):
    dependencies = [("facts", "0007_row_level_security")]

    operations = [*scoped_managers("factevent")]
