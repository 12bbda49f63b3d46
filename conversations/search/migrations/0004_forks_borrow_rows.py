"""A fork's copied rows are not tokenised again: search finds them through the rows
they were copied from.

`search_borrowed` (conversations.search.models.BorrowedRows) says "rows 0..upto of
this conversation are the source's rows 0..upto, byte for byte"; fork_conversation
writes it before its INSERT … SELECT. Both databases:

- a row inserted below its conversation's `upto` gets no index entry (SQLite: the
  insert trigger's WHEN; PostgreSQL: its `search_tsv` stays NULL and the GIN index,
  now partial, holds no entry for it). A fork that adds no rows grows the index by
  nothing, and a fork of 50,000 rows costs about what copying them costs.
- when a conversation is marked `deleting` (every deletion path sets it before it
  deletes a row), its borrowers adopt, in the same transaction: the rows the
  source held itself are tokenised under the borrower, and the rows below the
  source's own `upto` are pointed at the source's source. So pruning a parent never
  makes a fork unfindable, and a fork of a fork follows the chain.
- a borrowed row's deletion touches no index entry (SQLite: a contentless FTS5
  'delete' of a row it never had would corrupt it); the record goes with its
  conversation row.

PostgreSQL: `search_tsv` was a stored generated column (migration 0003), which can
only ever hold the row's words; it becomes a plain column that a BEFORE INSERT
trigger fills with the same function, or leaves NULL for a borrowed row. Adopting
fills it for rows that had none, so the append-only guard on the message table now
allows exactly one kind of UPDATE: `search_tsv` from NULL to the row's own words,
every other column unchanged. Any other UPDATE still fails.
"""

import importlib

from django.db import migrations, models

from conversations.migration_sql import postgres_trigger

initial = importlib.import_module("conversations.search.migrations.0001_initial")
pending = importlib.import_module("conversations.search.migrations.0002_pending_rows")

MSG, CONV, KEY, FTS, SPAN = initial.MSG, initial.CONV, initial.KEY, initial.FTS, initial.SPAN
PENDING = pending.PENDING
BORROWED = "search_borrowed"
INDEX = "search_message_tsv_idx"
COLUMN = "search_tsv"

# The position condition of a row that is found through its source's rows.
_BORROWED_ROW = (f"EXISTS (SELECT 1 FROM {BORROWED} b WHERE b.conversation_id = {{row}}.conversation_id "
                 f"AND {{row}}.position <= b.upto)")

# The lowest position of a borrower's rows that NEW (being deleted) held itself: above
# NEW's own borrowed prefix (those are found through NEW's source) and at most the
# borrower's `upto`. These rows are tokenised under the borrower when NEW goes.
_NEW_PREFIX = f"coalesce((SELECT s.upto FROM {BORROWED} s WHERE s.conversation_id = NEW.id), -1)"

_REPOINT = f"""UPDATE {BORROWED} SET source_id = s.source_id, upto = min({BORROWED}.upto, s.upto)
        FROM (SELECT source_id, upto FROM {BORROWED} WHERE conversation_id = NEW.id) s
        WHERE {BORROWED}.source_id = NEW.id"""

SQLITE_FORWARD = [
    "DROP TRIGGER search_message_index",
    "DROP TRIGGER search_message_unindex",
    f"""CREATE TRIGGER search_message_index AFTER INSERT ON {MSG}
    WHEN NEW.position < {SPAN} AND NOT {_BORROWED_ROW.format(row='NEW')}
    BEGIN INSERT INTO {PENDING}(id)
        SELECT k.seq * {SPAN} + NEW.position FROM {KEY} k WHERE k.conversation_id = NEW.conversation_id;
    END""",
    f"""CREATE TRIGGER search_message_unindex AFTER DELETE ON {MSG}
    WHEN OLD.position < {SPAN} AND NOT {_BORROWED_ROW.format(row='OLD')}
    BEGIN INSERT INTO {FTS}({FTS}, rowid, body)
        SELECT 'delete', k.seq * {SPAN} + OLD.position, {initial.sqlite_text('OLD.content')} FROM {KEY} k
        WHERE k.conversation_id = OLD.conversation_id
          AND NOT EXISTS (SELECT 1 FROM {PENDING} p WHERE p.id = k.seq * {SPAN} + OLD.position);
        DELETE FROM {PENDING} WHERE id = (
            SELECT k.seq * {SPAN} + OLD.position FROM {KEY} k WHERE k.conversation_id = OLD.conversation_id);
    END""",
    f"""CREATE TRIGGER search_borrowers_adopt AFTER UPDATE OF deleting ON {CONV}
    WHEN NEW.deleting AND NOT OLD.deleting
    BEGIN
        INSERT INTO {FTS}(rowid, body)
        SELECT k.seq * {SPAN} + m.position, {initial.sqlite_text('m.content')} FROM {BORROWED} b
        JOIN {KEY} k ON k.conversation_id = b.conversation_id
        JOIN {MSG} m ON m.conversation_id = b.conversation_id AND m.position <= b.upto
            AND m.position > {_NEW_PREFIX} AND m.position < {SPAN}
        WHERE b.source_id = NEW.id;
        {_REPOINT};
        DELETE FROM {BORROWED} WHERE source_id = NEW.id;
    END""",
    f"""CREATE TRIGGER search_borrowed_forget AFTER DELETE ON {CONV}
    BEGIN DELETE FROM {BORROWED} WHERE conversation_id = OLD.id OR source_id = OLD.id; END""",
]

# Backward: every borrowed row gets its own index entry, then migration 0002's triggers.
SQLITE_BACKWARD = [
    f"""INSERT INTO {FTS}(rowid, body)
        SELECT k.seq * {SPAN} + m.position, {initial.sqlite_text('m.content')} FROM {BORROWED} b
        JOIN {KEY} k ON k.conversation_id = b.conversation_id
        JOIN {MSG} m ON m.conversation_id = b.conversation_id AND m.position <= b.upto AND m.position < {SPAN}""",
    "DROP TRIGGER search_borrowers_adopt",
    "DROP TRIGGER search_borrowed_forget",
    "DROP TRIGGER search_message_index",
    "DROP TRIGGER search_message_unindex",
] + [sql for sql in pending.SQLITE_FORWARD if "CREATE TRIGGER search_message_" in sql]

_REFUSE = ("RAISE EXCEPTION 'append-only: % rows are never %d', TG_TABLE_NAME, lower(TG_OP) "
           "USING ERRCODE = 'integrity_constraint_violation'")

POSTGRES_FORWARD = [
    f"ALTER TABLE {MSG} ALTER COLUMN {COLUMN} DROP EXPRESSION",
    f"""CREATE OR REPLACE FUNCTION search_message_words() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF {_BORROWED_ROW.format(row='NEW')} THEN
            NEW.{COLUMN} := NULL;
        ELSE
            NEW.{COLUMN} := search_message_tsvector(NEW.content);
        END IF;
        RETURN NEW;
    END $$""",
    postgres_trigger("search_message_words", MSG, "INSERT", "search_message_words"),
    # A row without words has no entry: the index holds what search can find, no more.
    f"DROP INDEX {INDEX}",
    f"CREATE INDEX {INDEX} ON {MSG} USING GIN ({COLUMN}) WHERE {COLUMN} IS NOT NULL",
    f"""CREATE OR REPLACE FUNCTION search_message_no_update() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        -- Adopting a borrowed row: its words, where it had none, and nothing else.
        IF OLD.{COLUMN} IS NULL AND NEW.{COLUMN} = search_message_tsvector(NEW.content)
           AND to_jsonb(NEW) - '{COLUMN}' = to_jsonb(OLD) - '{COLUMN}' THEN
            RETURN NEW;
        END IF;
        {_REFUSE};
    END $$""",
    f"DROP TRIGGER message_no_update ON {MSG}",
    postgres_trigger("message_no_update", MSG, "UPDATE", "search_message_no_update"),
    f"""CREATE OR REPLACE FUNCTION search_borrowers_adopt() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        UPDATE {MSG} m SET {COLUMN} = search_message_tsvector(m.content)
        FROM {BORROWED} b
        WHERE m.conversation_id = b.conversation_id AND b.source_id = NEW.id AND m.position <= b.upto
          AND m.position > {_NEW_PREFIX};
        UPDATE {BORROWED} SET source_id = s.source_id, upto = least({BORROWED}.upto, s.upto)
        FROM (SELECT source_id, upto FROM {BORROWED} WHERE conversation_id = NEW.id) s
        WHERE {BORROWED}.source_id = NEW.id;
        DELETE FROM {BORROWED} WHERE source_id = NEW.id;
        RETURN NEW;
    END $$""",
    postgres_trigger("search_borrowers_adopt", CONV, "UPDATE OF deleting", "search_borrowers_adopt",
                     when="NEW.deleting AND NOT OLD.deleting", timing="AFTER"),
    f"""CREATE OR REPLACE FUNCTION search_borrowed_forget() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN DELETE FROM {BORROWED} WHERE conversation_id = OLD.id OR source_id = OLD.id; RETURN OLD; END $$""",
    postgres_trigger("search_borrowed_forget", CONV, "DELETE", "search_borrowed_forget", timing="AFTER"),
]

# Backward: migration 0003's generated column (every row's words) and full index.
POSTGRES_BACKWARD = [
    f"DROP TRIGGER IF EXISTS search_borrowers_adopt ON {CONV}",
    f"DROP TRIGGER IF EXISTS search_borrowed_forget ON {CONV}",
    f"DROP TRIGGER IF EXISTS search_message_words ON {MSG}",
    f"DROP TRIGGER IF EXISTS message_no_update ON {MSG}",
    postgres_trigger("message_no_update", MSG, "UPDATE"),
    "DROP FUNCTION IF EXISTS search_borrowers_adopt()",
    "DROP FUNCTION IF EXISTS search_borrowed_forget()",
    "DROP FUNCTION IF EXISTS search_message_words()",
    "DROP FUNCTION IF EXISTS search_message_no_update()",
    f"ALTER TABLE {MSG} DROP COLUMN {COLUMN}",  # its index goes with it
    f"ALTER TABLE {MSG} ADD COLUMN {COLUMN} tsvector GENERATED ALWAYS AS (search_message_tsvector(content)) STORED",
    f"CREATE INDEX {INDEX} ON {MSG} USING GIN ({COLUMN})",
]


class Migration(migrations.Migration):
    dependencies = [
        ("search", "0003_stored_words_date_index"),
    ]

    operations = [
        migrations.CreateModel(
            name="BorrowedRows",
            fields=[
                ("conversation_id", models.UUIDField(primary_key=True, serialize=False)),
                ("source_id", models.UUIDField(db_index=True)),
                ("upto", models.BigIntegerField()),
            ],
            options={"db_table": BORROWED},
        ),
        migrations.RunPython(
            initial._run({"sqlite": SQLITE_FORWARD, "postgresql": POSTGRES_FORWARD}),
            initial._run({"sqlite": SQLITE_BACKWARD, "postgresql": POSTGRES_BACKWARD}),
        ),
    ]
