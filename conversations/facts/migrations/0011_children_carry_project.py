"""PostgreSQL: a fact's events and its vector carry the fact's project, as a message carries its
conversation's (conversations migration 0016).

A recall reads each fact with its vector and writes a `recalled` event for each fact it returns;
both rows' policies checked their fact through EXISTS, planned with every statement: 0.2 ms for
the read and 0.15–0.2 ms for the events' insert, what made a project's recall 1.10–1.11× the
same recall without the policies (bench/w20_project_fence.py). Each row now holds its project
(on PostgreSQL only: SQLite has no policies, and the models never name the column), written by
a trigger from the fact as the writer sees it, whatever the writer sends: a fact of another
project is not seen, so the row gets no project and its policy refuses it. The policies compare
the column. Existing rows take theirs here, the events with their no-update guard off for this
one statement.
"""

from django.db import migrations

from conversations.migration_sql import own_project, parents_project, via_parent

FACT = "facts_fact"
CHILDREN = {"facts_factevent": "factevent_no_update", "facts_factvector": None}
FUNCTION = "facts_child_project"

TRIGGER_FUNCTION = f"""CREATE OR REPLACE FUNCTION {FUNCTION}() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        -- Through the fact's own policy: another project's fact gives no project.
        NEW.project_id := (SELECT project_id FROM {FACT} WHERE id = NEW.fact_id);
        RETURN NEW;
    END $$"""


def _forward(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    statements = [TRIGGER_FUNCTION]
    for table, guard in CHILDREN.items():
        statements += [
            *parents_project(table, "fact_id", FACT, guard=guard),
            f"CREATE TRIGGER {table}_project BEFORE INSERT ON {table} FOR EACH ROW EXECUTE FUNCTION {FUNCTION}()",
            *own_project(table),
        ]
    for sql in statements:
        schema_editor.execute(sql, params=None)


def _backward(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    statements = []
    for table in CHILDREN:
        statements += [*via_parent(table, "fact_id", FACT), f"DROP TRIGGER {table}_project ON {table}",
                       f"ALTER TABLE {table} DROP COLUMN project_id"]
    statements.append(f"DROP FUNCTION {FUNCTION}()")
    for sql in statements:
        schema_editor.execute(sql, params=None)


class Migration(migrations.Migration):
    dependencies = [("facts", "0010_recall_in_every_project"), ("conversations", "0016_message_project")]

    operations = [migrations.RunPython(_forward, _backward)]
