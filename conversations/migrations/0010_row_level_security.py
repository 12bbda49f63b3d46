"""PostgreSQL row-level security on the core's tables (conversations/migration_sql.py).

The functions the policies call read the two settings the backend sets from the current
scope (memoryui/postgresql/base.py): `memoryui.project` (a project id, or empty) and
`memoryui.all_projects` (on while every project is seen). A connection that set neither sees
no project's rows. The API key table stays outside: a key is looked up before its project is
known. Memberships and projects are the fence itself, read before it is set.
"""

from django.db import migrations

from conversations.migration_sql import own_project, postgresql_only, via_parent, without_row_level_security

FUNCTIONS = [
    """CREATE OR REPLACE FUNCTION memoryui_sees_all() RETURNS boolean LANGUAGE sql STABLE AS $$
        SELECT coalesce(current_setting('memoryui.all_projects', true), '') = 'on' $$""",
    """CREATE OR REPLACE FUNCTION memoryui_sees(p bigint) RETURNS boolean LANGUAGE sql STABLE AS $$
        SELECT coalesce(current_setting('memoryui.all_projects', true), '') = 'on'
            OR p = nullif(current_setting('memoryui.project', true), '')::bigint $$""",
    # The one project seen (NULL: none, or every project): a condition an index can serve.
    """CREATE OR REPLACE FUNCTION memoryui_project_id() RETURNS bigint LANGUAGE sql STABLE AS $$
        SELECT nullif(current_setting('memoryui.project', true), '')::bigint $$""",
]
CONV = "conversations_conversation"
TABLES = ["conversations_conversation", "conversations_auditevent", "conversations_message",
          "conversations_checkpoint"]
FORWARD = [
    *FUNCTIONS,
    *own_project(CONV),
    *own_project("conversations_auditevent"),
    *via_parent("conversations_message", "conversation_id", CONV),
    *via_parent("conversations_checkpoint", "conversation_id", CONV),
]
BACKWARD = [statement for table in TABLES for statement in without_row_level_security(table)]


class Migration(migrations.Migration):
    dependencies = [("conversations", "0009_projects")]

    operations = [postgresql_only(FORWARD, BACKWARD)]
