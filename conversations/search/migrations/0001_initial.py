"""Full-text search over message content, kept in sync by the database itself.

SQLite: an FTS5 index, contentless (it keeps terms and positions, never a second
copy of the text: a deletion leaves nothing behind in a content table), filled
and emptied by triggers on the message table, so every writer (the store's hot
path, fork's INSERT … SELECT, pruning's batched deletes, erasure) keeps it
right without knowing it exists. A contentless index needs the old text to
delete a row; the delete trigger recomputes it from the row being deleted with
the same expression (the message is immutable, so it is the same text).

PostgreSQL: a GIN expression index over the same text's tsvector; deleted rows
leave it with VACUUM, and erasure's VACUUM FULL of the message table rebuilds it.

What is indexed is the message's text, not its JSON envelope: journal `text`,
string `content` or its text blocks, a tool result's tool `name`, and each tool
call's name and arguments. Rows that are not valid JSON are indexed as stored.
"""

from django.db import migrations, models

from conversations.migration_sql import postgres_trigger

MSG = "conversations_message"
CONV = "conversations_conversation"
KEY = "search_conversationkey"
FTS = "search_message_fts"
SPAN = 2**32
# On PostgreSQL a tsvector holds at most 1 MB: index the first this-many characters.
PG_INDEXED_CHARS = 262_144


def sqlite_text(c: str) -> str:
    """The indexed text of a stored message `c` (NEW.content or OLD.content)."""
    return f"""(CASE WHEN json_valid({c}) AND json_type({c}) = 'object' THEN
        coalesce(json_extract({c}, '$.text'), '') || char(10) ||
        CASE json_type({c}, '$.content')
            WHEN 'text' THEN json_extract({c}, '$.content')
            WHEN 'array' THEN coalesce((SELECT group_concat(json_extract(b.value, '$.text'), char(10))
                FROM json_each({c}, '$.content') b
                WHERE b.type = 'object' AND json_extract(b.value, '$.type') = 'text'), '')
            ELSE '' END || char(10) ||
        coalesce(json_extract({c}, '$.name'), '') || char(10) ||
        CASE json_type({c}, '$.tool_calls') WHEN 'array' THEN coalesce((
            SELECT group_concat(coalesce(json_extract(t.value, '$.name'), '') || ' ' ||
                                coalesce(json_extract(t.value, '$.arguments'), ''), char(10))
            FROM json_each({c}, '$.tool_calls') t WHERE t.type = 'object'), '')
        ELSE '' END
    ELSE {c} END)"""


SQLITE_FORWARD = [
    f"""CREATE VIRTUAL TABLE {FTS} USING fts5(
        body, content='', tokenize='porter unicode61 remove_diacritics 2')""",
    f"""CREATE TRIGGER search_key_insert AFTER INSERT ON {CONV}
    BEGIN INSERT INTO {KEY}(conversation_id) VALUES (NEW.id); END""",
    f"""CREATE TRIGGER search_key_delete AFTER DELETE ON {CONV}
    BEGIN DELETE FROM {KEY} WHERE conversation_id = OLD.id; END""",
    f"""CREATE TRIGGER search_message_index AFTER INSERT ON {MSG} WHEN NEW.position < {SPAN}
    BEGIN INSERT INTO {FTS}(rowid, body)
        SELECT k.seq * {SPAN} + NEW.position, {sqlite_text('NEW.content')} FROM {KEY} k
        WHERE k.conversation_id = NEW.conversation_id;
    END""",
    f"""CREATE TRIGGER search_message_unindex AFTER DELETE ON {MSG} WHEN OLD.position < {SPAN}
    BEGIN INSERT INTO {FTS}({FTS}, rowid, body)
        SELECT 'delete', k.seq * {SPAN} + OLD.position, {sqlite_text('OLD.content')} FROM {KEY} k
        WHERE k.conversation_id = OLD.conversation_id;
    END""",
    # What was there before this migration.
    f"INSERT INTO {KEY}(conversation_id) SELECT id FROM {CONV} ORDER BY created_at, id",
    f"""INSERT INTO {FTS}(rowid, body)
        SELECT k.seq * {SPAN} + m.position, {sqlite_text('m.content')}
        FROM {MSG} m JOIN {KEY} k ON k.conversation_id = m.conversation_id WHERE m.position < {SPAN}""",
]
SQLITE_BACKWARD = [
    f"DROP TRIGGER IF EXISTS {name}"
    for name in ("search_key_insert", "search_key_delete", "search_message_index", "search_message_unindex")
] + [f"DROP TABLE IF EXISTS {FTS}"]

POSTGRES_FORWARD = [
    # IMMUTABLE so it can key an index: it reads nothing but its argument. A row that
    # is not JSON (an old writer's) is indexed as stored rather than failing the insert.
    """CREATE OR REPLACE FUNCTION search_message_text(content text) RETURNS text
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
    DECLARE j jsonb;
    BEGIN
        BEGIN
            j := content::jsonb;
        EXCEPTION WHEN others THEN
            RETURN content;
        END;
        IF jsonb_typeof(j) <> 'object' THEN
            RETURN content;
        END IF;
        RETURN concat_ws(E'\\n',
            j->>'text',
            CASE jsonb_typeof(j->'content')
                WHEN 'string' THEN j->>'content'
                WHEN 'array' THEN (SELECT string_agg(b->>'text', E'\\n') FROM jsonb_array_elements(j->'content') b
                                   WHERE jsonb_typeof(b) = 'object' AND b->>'type' = 'text')
            END,
            j->>'name',
            CASE jsonb_typeof(j->'tool_calls') WHEN 'array' THEN
                (SELECT string_agg(concat_ws(' ', t->>'name', CASE jsonb_typeof(t->'arguments')
                    WHEN 'string' THEN t->>'arguments' ELSE (t->'arguments')::text END), E'\\n')
                 FROM jsonb_array_elements(j->'tool_calls') t WHERE jsonb_typeof(t) = 'object')
            END);
    END $$""",
    f"""CREATE OR REPLACE FUNCTION search_message_tsvector(content text) RETURNS tsvector
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
        SELECT to_tsvector('english'::regconfig, left(search_message_text(content), {PG_INDEXED_CHARS}))
    $$""",
    f"CREATE INDEX search_message_tsv_idx ON {MSG} USING GIN (search_message_tsvector(content))",
    f"""CREATE OR REPLACE FUNCTION search_key_insert() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN INSERT INTO {KEY}(conversation_id) VALUES (NEW.id); RETURN NEW; END $$""",
    f"""CREATE OR REPLACE FUNCTION search_key_delete() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN DELETE FROM {KEY} WHERE conversation_id = OLD.id; RETURN OLD; END $$""",
    postgres_trigger("search_key_insert", CONV, "INSERT", "search_key_insert", timing="AFTER"),
    postgres_trigger("search_key_delete", CONV, "DELETE", "search_key_delete", timing="AFTER"),
    f"INSERT INTO {KEY}(conversation_id) SELECT id FROM {CONV} ORDER BY created_at, id",
]
POSTGRES_BACKWARD = [
    f"DROP TRIGGER IF EXISTS search_key_insert ON {CONV}",
    f"DROP TRIGGER IF EXISTS search_key_delete ON {CONV}",
    "DROP INDEX IF EXISTS search_message_tsv_idx",
    "DROP FUNCTION IF EXISTS search_key_insert()",
    "DROP FUNCTION IF EXISTS search_key_delete()",
    "DROP FUNCTION IF EXISTS search_message_tsvector(text)",
    "DROP FUNCTION IF EXISTS search_message_text(text)",
]


def _run(by_vendor):
    def run(apps, schema_editor):
        statements = by_vendor.get(schema_editor.connection.vendor)
        if statements is None:
            raise RuntimeError(f"memoryui supports SQLite and PostgreSQL, not {schema_editor.connection.vendor}")
        for sql in statements:
            schema_editor.execute(sql, params=None)

    return run


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("conversations", "0003_subject_norm_external_ids"),
    ]

    operations = [
        migrations.CreateModel(
            name="ConversationKey",
            fields=[
                ("seq", models.BigAutoField(primary_key=True, serialize=False)),
                ("conversation_id", models.UUIDField(unique=True)),
            ],
            options={"db_table": "search_conversationkey"},
        ),
        migrations.RunPython(
            _run({"sqlite": SQLITE_FORWARD, "postgresql": POSTGRES_FORWARD}),
            _run({"sqlite": SQLITE_BACKWARD, "postgresql": POSTGRES_BACKWARD}),
        ),
    ]
