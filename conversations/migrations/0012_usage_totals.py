"""A conversation's tokens and cost so far, for the conversation list to show and sort by
(conversations/usage_totals.py): derived from its rows, brought up to date when read, gone
with its conversation. Row-level security follows its conversation's project."""

import django.db.models.deletion
from django.db import migrations, models

from conversations.migration_sql import postgresql_only, via_parent, without_row_level_security

TABLE, CONV = "conversations_usagetotal", "conversations_conversation"


class Migration(migrations.Migration):

    dependencies = [
        ('conversations', '0011_message_partitions'),
    ]

    operations = [
        migrations.CreateModel(
            name='UsageTotal',
            fields=[
                ('conversation', models.OneToOneField(db_constraint=False, on_delete=django.db.models.deletion.DO_NOTHING, primary_key=True, related_name='usage_total', serialize=False, to='conversations.conversation')),
                ('upto', models.BigIntegerField(default=-1)),
                ('replies', models.IntegerField(default=0)),
                ('input_tokens', models.BigIntegerField(default=0)),
                ('output_tokens', models.BigIntegerField(default=0)),
                ('cache_tokens', models.BigIntegerField(default=0)),
                ('cost_micros', models.BigIntegerField(default=0)),
                ('unpriced', models.IntegerField(default=0)),
            ],
            options={
                'indexes': [models.Index(fields=['cost_micros'], name='usage_total_cost_idx')],
            },
        ),
        postgresql_only(via_parent(TABLE, "conversation_id", CONV), without_row_level_security(TABLE)),
    ]
