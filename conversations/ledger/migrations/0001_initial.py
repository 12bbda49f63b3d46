
import django.db.models.deletion
import django.utils.timezone
from django.db import migrations, models


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ('conversations', '0003_subject_norm_external_ids'),
    ]

    operations = [
        migrations.CreateModel(
            name='Action',
            fields=[
                ('id', models.BigAutoField(primary_key=True, serialize=False)),
                ('position', models.BigIntegerField()),
                ('namespace', models.CharField(blank=True, default='', max_length=200)),
                ('idempotency_key', models.CharField(max_length=255)),
                ('name', models.CharField(max_length=200)),
                ('arguments', models.TextField()),
                ('result', models.TextField()),
                ('status', models.CharField(choices=[('performed', 'performed'), ('failed', 'failed'), ('already_performed', 'already_performed')], max_length=20)),
                ('original_id', models.BigIntegerField(blank=True, null=True)),
                ('inherited_from', models.BigIntegerField(blank=True, null=True)),
                ('actor', models.CharField(blank=True, default='', max_length=200)),
                ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('conversation', models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.DO_NOTHING, related_name='+', to='conversations.conversation')),
            ],
            options={
                'indexes': [models.Index(fields=['namespace', 'idempotency_key', 'id'], name='ledger_action_key_idx'), models.Index(fields=['conversation', 'position', 'id'], name='ledger_action_timeline_idx'), models.Index(fields=['created_at', 'id'], name='ledger_action_created_idx'), models.Index(condition=models.Q(('inherited_from__isnull', False)), fields=['inherited_from'], name='ledger_action_inherited_idx')],
                'constraints': [models.UniqueConstraint(condition=models.Q(('inherited_from__isnull', True), ('status', 'performed')), fields=('namespace', 'idempotency_key'), name='ledger_action_performed_once'), models.CheckConstraint(condition=models.Q(('status__in', ('performed', 'failed', 'already_performed'))), name='ledger_action_status'), models.CheckConstraint(condition=models.Q(models.Q(('status', 'already_performed'), _negated=True), ('original_id__isnull', False), _connector='OR'), name='ledger_action_retry_has_original'), models.CheckConstraint(condition=models.Q(('position__gte', -1)), name='ledger_action_position_min')],
            },
        ),
        migrations.CreateModel(
            name='TaskStateEvent',
            fields=[
                ('id', models.BigAutoField(primary_key=True, serialize=False)),
                ('version', models.BigIntegerField()),
                ('position', models.BigIntegerField()),
                ('state', models.TextField()),
                ('changes', models.TextField()),
                ('actor', models.CharField(blank=True, default='', max_length=200)),
                ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('conversation', models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.DO_NOTHING, related_name='+', to='conversations.conversation')),
            ],
            options={
                'constraints': [models.UniqueConstraint(fields=('conversation', 'version'), name='ledger_state_version_uniq'), models.CheckConstraint(condition=models.Q(('version__gte', 1)), name='ledger_state_version_pos'), models.CheckConstraint(condition=models.Q(('position__gte', -1)), name='ledger_state_position_min')],
            },
        ),
        migrations.CreateModel(
            name='WorkspaceSnapshot',
            fields=[
                ('id', models.BigAutoField(primary_key=True, serialize=False)),
                ('position', models.BigIntegerField()),
                ('repo', models.CharField(max_length=1000)),
                ('ref', models.CharField(max_length=400)),
                ('commit_sha', models.CharField(max_length=64)),
                ('base_sha', models.CharField(blank=True, default='', max_length=64)),
                ('files_changed', models.IntegerField()),
                ('insertions', models.IntegerField()),
                ('deletions', models.IntegerField()),
                ('actor', models.CharField(blank=True, default='', max_length=200)),
                ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('conversation', models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.DO_NOTHING, related_name='+', to='conversations.conversation')),
            ],
            options={
                'constraints': [models.UniqueConstraint(fields=('conversation', 'position', 'repo'), name='ledger_snapshot_turn_uniq'), models.CheckConstraint(condition=models.Q(('position__gte', 0)), name='ledger_snapshot_position_min'), models.CheckConstraint(condition=models.Q(('deletions__gte', 0), ('files_changed__gte', 0), ('insertions__gte', 0)), name='ledger_snapshot_figures_min')],
            },
        ),
    ]
