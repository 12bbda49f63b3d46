"""Projects (conversations/projects.py): every conversation, key, person and audit event in one.

- `Project`, with `default` created here (id 1): everything that existed goes into it, by
  the new columns' default (conversations/migration_sql.py), with no UPDATE of any row.
- `Membership`: a person's role per project. Whoever held a role (the auditor, reviewer
  and admin groups) holds it in `default`.
- `Conversation.project`: external ids become unique per project and namespace (two
  projects may both hold session `abc`), the list's index leads with the project, and a
  guard refuses to move a conversation to another project (a fork stays in its parent's).
- `ApiKey.project` and `ApiKey.namespaces`: existing keys act in `default`; a key without
  a project is an operator's key for the whole server.
- `AuditEvent.project`: NULL for the server's own events.
"""

import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models

from conversations.migration_sql import (
    add_project_column,
    postgres_trigger,
    run_sql_by_vendor,
    scoped_managers,
    sqlite_refusal,
)

CONV = "conversations_conversation"
MESSAGE = "a conversation never moves to another project"
ROLES = ("auditor", "reviewer", "admin")


def create_default(apps, schema_editor):
    Project = apps.get_model("conversations", "Project")
    alias = schema_editor.connection.alias
    project = Project.objects.using(alias).create(slug="default", name="Default")
    if project.pk != 1:
        raise RuntimeError(f"the default project must be id 1, got {project.pk}")


def memberships_from_groups(apps, schema_editor):
    alias = schema_editor.connection.alias
    Group = apps.get_model("auth", "Group")
    Membership = apps.get_model("conversations", "Membership")
    # The strongest role a person held, if more than one group.
    for role in ROLES:
        group = Group.objects.using(alias).filter(name=role).first()
        if group is None:
            continue
        for user in group.user_set.using(alias).all():
            Membership.objects.using(alias).update_or_create(user_id=user.pk, project_id=1,
                                                             defaults={"role": role})


SQLITE_CONVERSATION = [
    "DROP INDEX IF EXISTS conversation_external_id_uniq",
    "DROP INDEX IF EXISTS conversation_activity_idx",
    f"CREATE UNIQUE INDEX conversation_external_id_uniq ON {CONV} (project_id, namespace, external_id) "
    "WHERE external_id IS NOT NULL",
    f'CREATE INDEX conversation_activity_idx ON {CONV} (project_id, last_activity_at DESC, id DESC)',
    sqlite_refusal("conversation_project_immutable", CONV, "UPDATE OF project_id", MESSAGE,
                   when="NEW.project_id IS NOT OLD.project_id"),
]
POSTGRES_CONVERSATION = [
    "DROP INDEX IF EXISTS conversation_external_id_uniq",
    "DROP INDEX IF EXISTS conversation_activity_idx",
    f"CREATE UNIQUE INDEX conversation_external_id_uniq ON {CONV} (project_id, namespace, external_id) "
    "WHERE external_id IS NOT NULL",
    f'CREATE INDEX conversation_activity_idx ON {CONV} (project_id, last_activity_at DESC, id DESC)',
    f"""CREATE OR REPLACE FUNCTION memoryui_project_immutable() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF NEW.project_id IS DISTINCT FROM OLD.project_id THEN
            RAISE EXCEPTION '{MESSAGE}' USING ERRCODE = 'integrity_constraint_violation';
        END IF;
        RETURN NEW;
    END $$""",
    postgres_trigger("conversation_project_immutable", CONV, "UPDATE OF project_id", "memoryui_project_immutable"),
]


class Migration(migrations.Migration):
    dependencies = [
        ("conversations", "0008_chain_hash_function"),
        ("auth", "0012_alter_user_first_name_max_length"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="Project",
            fields=[
                ("id", models.BigAutoField(primary_key=True, serialize=False)),
                ("slug", models.SlugField(max_length=64, unique=True)),
                ("name", models.CharField(max_length=200)),
                ("created_at", models.DateTimeField(default=django.utils.timezone.now)),
                ("retention_days", models.PositiveIntegerField(blank=True, null=True)),
            ],
            options={"ordering": ["id"]},
        ),
        migrations.RunPython(create_default, migrations.RunPython.noop),
        migrations.CreateModel(
            name="Membership",
            fields=[
                ("id", models.BigAutoField(primary_key=True, serialize=False)),
                ("role", models.CharField(choices=[(r, r) for r in ROLES], max_length=16)),
                ("created_at", models.DateTimeField(default=django.utils.timezone.now)),
                ("project", models.ForeignKey(on_delete=django.db.models.deletion.CASCADE,
                                              related_name="memberships", to="conversations.project")),
                ("user", models.ForeignKey(on_delete=django.db.models.deletion.CASCADE,
                                           related_name="memberships", to=settings.AUTH_USER_MODEL)),
            ],
            options={"constraints": [models.UniqueConstraint(fields=("user", "project"),
                                                             name="membership_user_project_uniq")]},
        ),
        migrations.RunPython(memberships_from_groups, migrations.RunPython.noop),
        add_project_column(model_name="conversation", table=CONV),
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunPython(run_sql_by_vendor(SQLITE_CONVERSATION, POSTGRES_CONVERSATION),
                                                      migrations.RunPython.noop)],
            state_operations=[
                migrations.RemoveConstraint(model_name="conversation", name="conversation_external_id_uniq"),
                migrations.AddConstraint(
                    model_name="conversation",
                    constraint=models.UniqueConstraint(
                        condition=models.Q(external_id__isnull=False), fields=("project", "namespace", "external_id"),
                        name="conversation_external_id_uniq"),
                ),
                migrations.RemoveIndex(model_name="conversation", name="conversation_activity_idx"),
                migrations.AddIndex(
                    model_name="conversation",
                    index=models.Index(fields=["project", "-last_activity_at", "-id"],
                                       name="conversation_activity_idx"),
                ),
            ],
        ),
        *scoped_managers("conversation"),
        add_project_column(model_name="apikey", table="conversations_apikey", null=True),
        *scoped_managers("apikey"),
        migrations.AddField(model_name="apikey", name="namespaces",
                            field=models.JSONField(blank=True, default=list)),
        add_project_column(model_name="auditevent", table="conversations_auditevent", null=True,
                           indexes=[("audit_project_idx", "project_id, id DESC")]),
        migrations.SeparateDatabaseAndState(
            state_operations=[migrations.AddIndex(
                model_name="auditevent",
                index=models.Index(fields=["project", "-id"], name="audit_project_idx"))],
        ),
        *scoped_managers("auditevent"),
    ]
