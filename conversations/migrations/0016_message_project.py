"""PostgreSQL: each message row carries its conversation's project, and the fence's policies no
longer make the planner count the project twice.

Both change how row-level security is planned, not what it lets through
(bench/w20_project_fence.py measured the price of the policies at 1.10–1.12× on reads the
fence otherwise leaves at 1.02–1.03×):

- **A message's policy read its conversation.** The EXISTS in the policy was planned, for a
  search, once for every partition the statement touched, and run as a hashed set of the
  project's conversations built for each statement. A message row now holds its project
  (`project_id`, on PostgreSQL only: SQLite has no policies, and the models never name the
  column), and its policy compares that column, as the conversation's does. The column is
  written by the guard that already reads the conversation for every inserted message (its
  next position), so an append reads nothing more; whatever the writer sends is replaced, so a
  row cannot claim a project its conversation is not in. Existing rows take theirs here, with
  the no-update guard off for this one statement (ledger migration 0005 did the same): one
  write of the whole table, at most about 40 s per 1,000,000 messages, writers waiting.
- **The policy repeated the application's own filter, and the planner multiplied the two.**
  A project's list read `project_id = 9` and the policy's `project_id = <the project set>`:
  1/20 of the rows each, so the planner expected 11 of a project's 200 conversations, sorted
  them all instead of reading the first page from the index, and chose per-conversation
  loops for a search. The policy now compares with `===`, PostgreSQL's own bigint equality
  (the same leak-proof function) with the estimate of `<>`: the planner takes the fence to keep
  nearly every row, which is what it does once the application has filtered. Only the
  estimate differs; no index is chosen by it, and the application's filters lead every
  index that the project fences.
"""

from django.db import migrations

from conversations import partitions
from conversations.migration_sql import own_project, parents_project, via_parent

CONV, MSG = "conversations_conversation", "conversations_message"
GUARD = "message_no_update"

SEES = """CREATE OR REPLACE FUNCTION memoryui_sees(p bigint) RETURNS boolean LANGUAGE sql STABLE AS $$
        SELECT coalesce(current_setting('memoryui.all_projects', true), '') = 'on'
            OR p {equals} nullif(current_setting('memoryui.project', true), '')::bigint $$"""

GUARD_INSERT = """CREATE OR REPLACE FUNCTION memoryui_guard_message_insert() RETURNS trigger LANGUAGE plpgsql AS $$
    {declare}BEGIN
        {read}
        IF NEW.position >= COALESCE({next_position}, 0) THEN
            RAISE EXCEPTION 'positions are assigned by the store: position % was not handed out', NEW.position
                USING ERRCODE = 'integrity_constraint_violation';
        END IF;{fill}
        RETURN NEW;
    END $$"""
# As conversations migration 0002 wrote it.
GUARD_BEFORE = GUARD_INSERT.format(declare="", read="", fill="",
                                   next_position=f"(SELECT next_position FROM {CONV} WHERE id = NEW.conversation_id)")
# The conversation read once, through its own policy: one the writer cannot see gives no
# position, so the insert is refused before any project is written.
GUARD_AFTER = GUARD_INSERT.format(
    declare="DECLARE parent record;\n    ",
    read=f"SELECT next_position, project_id INTO parent FROM {CONV} WHERE id = NEW.conversation_id;",
    next_position="parent.next_position",
    fill="\n        NEW.project_id := parent.project_id;")


def _forward(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    with schema_editor.connection.cursor() as cursor:
        cursor.execute("SELECT quote_ident(current_schema())")
        schema = cursor.fetchone()[0]
        cursor.execute("SELECT 1 FROM pg_operator WHERE oprname = '===' AND oprnamespace = current_schema()::regnamespace")
        exists = cursor.fetchone() is not None
    statements = [] if exists else [
        f"CREATE OPERATOR {schema}.=== (LEFTARG = bigint, RIGHTARG = bigint, FUNCTION = int8eq, RESTRICT = neqsel)"]
    statements += [
        SEES.format(equals=f"OPERATOR({schema}.===)"),
        *parents_project(MSG, "conversation_id", CONV, guard=GUARD),
        GUARD_AFTER,
        *own_project(MSG),
    ]
    for sql in statements:
        schema_editor.execute(sql, params=None)
    partitions.fence_partitions(db=schema_editor.connection)


def _backward(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    for sql in [*via_parent(MSG, "conversation_id", CONV), GUARD_BEFORE]:
        schema_editor.execute(sql, params=None)
    # The partitions' policies name the column too: theirs go before it does.
    partitions.fence_partitions(db=schema_editor.connection)
    for sql in [f"ALTER TABLE {MSG} DROP COLUMN project_id", SEES.format(equals="="),
                "DROP OPERATOR IF EXISTS === (bigint, bigint)"]:
        schema_editor.execute(sql, params=None)


class Migration(migrations.Migration):
    dependencies = [("conversations", "0015_conversation_staged")]

    operations = [migrations.RunPython(_forward, _backward)]
