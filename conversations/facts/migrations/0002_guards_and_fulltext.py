"""The database enforces the facts' invariants, and indexes their words.

- a fact event is never updated, and deleted only while its fact is marked
  `erasing` (the erasure path, conversations/facts/erasure.py);
- a fact's words and provenance (subject, text, category, importance, source,
  author, recorded_at) are never updated: a change of mind is a new fact that
  supersedes the old one;
- a fact is deleted only while marked `erasing`;
- full text: SQLite keeps an FTS5 index (external content: it stores terms, not a
  second copy of the text) in sync by triggers; PostgreSQL uses a GIN expression
  index over to_tsvector('english', text).
"""

from django.db import migrations

from conversations.migration_sql import postgres_trigger, sqlite_no_update, sqlite_refusal

FACT = "facts_fact"
EVENT = "facts_factevent"
FTS = "facts_fact_fts"

IMMUTABLE = ("subject", "text", "category", "importance", "recorded_at", "source_conversation_id",
             "source_position", "created_by")

SQLITE_FORWARD = [
    sqlite_no_update("factevent_no_update", EVENT, "a fact event"),
    sqlite_refusal("factevent_guard_delete", EVENT, "DELETE",
                   "append-only: fact events are deleted only when their fact is erased",
                   when=f"NOT EXISTS (SELECT 1 FROM {FACT} WHERE id = OLD.fact_id AND status = 'erasing')"),
    sqlite_refusal("fact_words_immutable", FACT, "UPDATE",
                   "a fact is never edited in place: supersede it with a new fact",
                   when=" OR ".join(f"NEW.{c} IS NOT OLD.{c}" for c in IMMUTABLE)),
    sqlite_refusal("fact_guard_delete", FACT, "DELETE", "facts are deleted only by erasure",
                   when="OLD.status <> 'erasing'"),
    f"""CREATE VIRTUAL TABLE {FTS} USING fts5(
        text, content='{FACT}', content_rowid='id', tokenize='porter unicode61 remove_diacritics 2')""",
    f"""CREATE TRIGGER fact_fts_insert AFTER INSERT ON {FACT}
    BEGIN INSERT INTO {FTS}(rowid, text) VALUES (NEW.id, NEW.text); END""",
    f"""CREATE TRIGGER fact_fts_delete AFTER DELETE ON {FACT}
    BEGIN INSERT INTO {FTS}({FTS}, rowid, text) VALUES ('delete', OLD.id, OLD.text); END""",
]
SQLITE_BACKWARD = [
    f"DROP TRIGGER IF EXISTS {name}"
    for name in ("factevent_no_update", "factevent_guard_delete", "fact_words_immutable", "fact_guard_delete",
                 "fact_fts_insert", "fact_fts_delete")
] + [f"DROP TABLE IF EXISTS {FTS}"]

POSTGRES_FORWARD = [
    f"""CREATE OR REPLACE FUNCTION facts_guard_event_delete() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF NOT EXISTS (SELECT 1 FROM {FACT} WHERE id = OLD.fact_id AND status = 'erasing') THEN
            RAISE EXCEPTION 'append-only: fact events are deleted only when their fact is erased'
                USING ERRCODE = 'integrity_constraint_violation';
        END IF;
        RETURN OLD;
    END $$""",
    f"""CREATE OR REPLACE FUNCTION facts_fact_words_immutable() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF {" OR ".join(f"NEW.{c} IS DISTINCT FROM OLD.{c}" for c in IMMUTABLE)} THEN
            RAISE EXCEPTION 'a fact is never edited in place: supersede it with a new fact'
                USING ERRCODE = 'integrity_constraint_violation';
        END IF;
        RETURN NEW;
    END $$""",
    """CREATE OR REPLACE FUNCTION facts_guard_fact_delete() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF OLD.status <> 'erasing' THEN
            RAISE EXCEPTION 'facts are deleted only by erasure' USING ERRCODE = 'integrity_constraint_violation';
        END IF;
        RETURN OLD;
    END $$""",
    postgres_trigger("factevent_no_update", EVENT, "UPDATE"),
    postgres_trigger("factevent_guard_delete", EVENT, "DELETE", "facts_guard_event_delete"),
    postgres_trigger("fact_words_immutable", FACT, "UPDATE", "facts_fact_words_immutable"),
    postgres_trigger("fact_guard_delete", FACT, "DELETE", "facts_guard_fact_delete"),
    f"CREATE INDEX fact_text_fts_idx ON {FACT} USING GIN (to_tsvector('english', text))",
]
POSTGRES_BACKWARD = [
    f"DROP TRIGGER IF EXISTS {name} ON {table}"
    for name, table in (
        ("factevent_no_update", EVENT),
        ("factevent_guard_delete", EVENT),
        ("fact_words_immutable", FACT),
        ("fact_guard_delete", FACT),
    )
] + [
    "DROP INDEX IF EXISTS fact_text_fts_idx",
    "DROP FUNCTION IF EXISTS facts_guard_event_delete()",
    "DROP FUNCTION IF EXISTS facts_fact_words_immutable()",
    "DROP FUNCTION IF EXISTS facts_guard_fact_delete()",
]


def _run(statements_by_vendor):
    def run(apps, schema_editor):
        statements = statements_by_vendor.get(schema_editor.connection.vendor)
        if statements is None:
            raise RuntimeError(f"memoryui supports SQLite and PostgreSQL, not {schema_editor.connection.vendor}")
        for sql in statements:
            schema_editor.execute(sql, params=None)

    return run


class Migration(migrations.Migration):
    dependencies = [
        ("facts", "0001_initial"),
        # memoryui_refuse() is defined there.
        ("conversations", "0002_append_only_guards"),
    ]

    operations = [
        migrations.RunPython(
            _run({"sqlite": SQLITE_FORWARD, "postgresql": POSTGRES_FORWARD}),
            _run({"sqlite": SQLITE_BACKWARD, "postgresql": POSTGRES_BACKWARD}),
        ),
    ]
