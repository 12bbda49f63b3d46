"""SQLite: the full-text index also holds the subject, so recall matches the query
inside one subject's facts (a doclist intersection in FTS5) instead of ranking
every fact in the store that shares a word and throwing most away.

The subject is indexed as one token, hex(subject), so "cust:7" does not match
inside "cust:7:old" and a common prefix ("cust") is not a huge doclist to walk.
That value is not a column of facts_fact, so the index is contentless (it keeps
terms and positions, never a copy of the text): the triggers pass the old values
when a fact is deleted.

PostgreSQL: recall reaches the subject's rows through the (subject, status)
index; ranking them needs each row's tsvector, so it is stored once (a generated
column the models do not declare) instead of parsed twice per row per recall,
and the GIN index moves onto it.
"""

from django.db import migrations

FTS = "facts_fact_fts"

SQLITE_FORWARD = [
    "DROP TRIGGER IF EXISTS fact_fts_insert",
    "DROP TRIGGER IF EXISTS fact_fts_delete",
    f"DROP TABLE IF EXISTS {FTS}",
    f"""CREATE VIRTUAL TABLE {FTS} USING fts5(
        text, subject_key, content='', tokenize='porter unicode61 remove_diacritics 2')""",
    f"INSERT INTO {FTS}(rowid, text, subject_key) SELECT id, text, hex(subject) FROM facts_fact",
    f"""CREATE TRIGGER fact_fts_insert AFTER INSERT ON facts_fact
    BEGIN INSERT INTO {FTS}(rowid, text, subject_key) VALUES (NEW.id, NEW.text, hex(NEW.subject)); END""",
    f"""CREATE TRIGGER fact_fts_delete AFTER DELETE ON facts_fact
    BEGIN INSERT INTO {FTS}({FTS}, rowid, text, subject_key) VALUES ('delete', OLD.id, OLD.text, hex(OLD.subject));
    END""",
]
SQLITE_BACKWARD = [
    "DROP TRIGGER IF EXISTS fact_fts_insert",
    "DROP TRIGGER IF EXISTS fact_fts_delete",
    f"DROP TABLE IF EXISTS {FTS}",
    f"""CREATE VIRTUAL TABLE {FTS} USING fts5(
        text, content='facts_fact', content_rowid='id', tokenize='porter unicode61 remove_diacritics 2')""",
    f"INSERT INTO {FTS}({FTS}) VALUES ('rebuild')",
    f"""CREATE TRIGGER fact_fts_insert AFTER INSERT ON facts_fact
    BEGIN INSERT INTO {FTS}(rowid, text) VALUES (NEW.id, NEW.text); END""",
    f"""CREATE TRIGGER fact_fts_delete AFTER DELETE ON facts_fact
    BEGIN INSERT INTO {FTS}({FTS}, rowid, text) VALUES ('delete', OLD.id, OLD.text); END""",
]


POSTGRES_FORWARD = [
    "DROP INDEX IF EXISTS fact_text_fts_idx",
    "ALTER TABLE facts_fact ADD COLUMN text_tsv tsvector "
    "GENERATED ALWAYS AS (to_tsvector('english'::regconfig, text)) STORED",
    "CREATE INDEX fact_text_tsv_idx ON facts_fact USING GIN (text_tsv)",
]
POSTGRES_BACKWARD = [
    "DROP INDEX IF EXISTS fact_text_tsv_idx",
    "ALTER TABLE facts_fact DROP COLUMN IF EXISTS text_tsv",
    "CREATE INDEX fact_text_fts_idx ON facts_fact USING GIN (to_tsvector('english', text))",
]


def _run(by_vendor):
    def run(apps, schema_editor):
        for sql in by_vendor.get(schema_editor.connection.vendor, ()):
            schema_editor.execute(sql, params=None)

    return run


class Migration(migrations.Migration):
    dependencies = [("facts", "0002_guards_and_fulltext")]

    operations = [
        migrations.RunPython(
            _run({"sqlite": SQLITE_FORWARD, "postgresql": POSTGRES_FORWARD}),
            _run({"sqlite": SQLITE_BACKWARD, "postgresql": POSTGRES_BACKWARD}),
        )
    ]
