"""Import sources and their original entries (conversations/imports/models.py)."""

import django.utils.timezone
from django.db import migrations, models


class Migration(migrations.Migration):

    initial = True

    dependencies = [("conversations", "0003_subject_norm_external_ids")]

    operations = [
        migrations.CreateModel(
            name='ImportSource',
            fields=[
                ('id', models.BigAutoField(primary_key=True, serialize=False)),
                ('format', models.CharField(max_length=32)),
                ('namespace', models.CharField(blank=True, default='', max_length=200)),
                ('source_key', models.CharField(max_length=300)),
                ('conversation_id', models.UUIDField(db_index=True)),
                ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('updated_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('entries', models.BigIntegerField(default=0)),
                ('consumed_chars', models.BigIntegerField(default=0)),
                ('consumed_hash', models.CharField(blank=True, default='', max_length=80)),
                ('state', models.JSONField(blank=True, default=dict)),
            ],
            options={
                'constraints': [models.UniqueConstraint(fields=('format', 'namespace', 'source_key'), name='import_source_identity')],
            },
        ),
        migrations.CreateModel(
            name='SourceEntry',
            fields=[
                ('pk', models.CompositePrimaryKey('source_id', 'seq', blank=True, editable=False, primary_key=True, serialize=False)),
                ('source_id', models.BigIntegerField()),
                ('seq', models.BigIntegerField()),
                ('conversation_id', models.UUIDField()),
                ('position', models.BigIntegerField(default=-1)),
                ('line', models.BigIntegerField(blank=True, null=True)),
                ('uuid', models.CharField(blank=True, max_length=200, null=True)),
                ('parent_uuid', models.CharField(blank=True, max_length=200, null=True)),
                ('group', models.CharField(blank=True, max_length=200, null=True)),
                ('real', models.BooleanField(default=False)),
                ('raw', models.TextField()),
            ],
            options={
                'indexes': [models.Index(fields=['source_id', 'uuid'], name='source_entry_uuid_idx'), models.Index(fields=['source_id', 'parent_uuid'], name='source_entry_parent_idx'), models.Index(fields=['conversation_id'], name='source_entry_conv_idx')],
            },
        ),
    ]
