"""New conversations get time-ordered ids (UUID version 7, `models.new_conversation_id`).

A Python-side default only: the database never sees it, so this changes Django's
state and nothing in the database (a plain AlterField would make SQLite rebuild the
conversation table and drop its triggers). Existing ids are kept as they are.
"""

from django.db import migrations, models

import conversations.models


class Migration(migrations.Migration):
    dependencies = [
        ("conversations", "0006_record_chain"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="conversation",
                    name="id",
                    field=models.UUIDField(default=conversations.models.new_conversation_id, editable=False,
                                           primary_key=True, serialize=False),
                ),
            ],
            database_operations=[],
        ),
    ]
