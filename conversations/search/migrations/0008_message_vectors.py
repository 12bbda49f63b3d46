"""Messages get vectors, for search by meaning (conversations/search/meaning.py).

`search_messagevector` holds each message's vector and binary code. Nothing computes a
vector inside an append: an insert trigger puts the row's index id into
`search_meaning_pending` (integers only, never text) in the append's own transaction, and
the background embedder (conversations/embeddings/worker.py) empties it, so an append
never waits for a model and no row is ever left out. A fork's copied rows are not queued
(the same condition as the full-text index's): they are found through their source's
vectors. When a source is marked `deleting`, its borrowers' rows that it held are queued,
in the adoption trigger that gives them their own index entries (both databases), so a
fork stays findable by meaning however its ancestors go.

Both tables are project data through their conversation: on PostgreSQL row-level security
answers a vector only where its conversation is seen, and a queued id only where the
conversation of its search key is.
"""

import importlib

import django.db.models.deletion
from django.db import migrations, models

from conversations.migration_sql import postgres_trigger, postgresql_only, via_parent, without_row_level_security

initial = importlib.import_module("conversations.search.migrations.0001_initial")
borrowing = importlib.import_module("conversations.search.migrations.0004_forks_borrow_rows")
dates = importlib.import_module("conversations.search.migrations.0005_dates_of_indexed_rows")

MSG, CONV, KEY, SPAN = initial.MSG, initial.CONV, initial.KEY, initial.SPAN
BORROWED = borrowing.BORROWED
PENDING = "search_meaning_pending"
VECTORS = "search_messagevector"

_ADOPTED = f"""SELECT k.seq * {SPAN} + m.position FROM {BORROWED} b
        JOIN {KEY} k ON k.conversation_id = b.conversation_id
        JOIN {MSG} m ON m.conversation_id = b.conversation_id AND m.position <= b.upto
            AND m.position > {borrowing._NEW_PREFIX} AND m.position < {SPAN}
        WHERE b.source_id = NEW.id"""


def _adopt_trigger(statements: list[str], marker: str) -> str:
    return next(sql for sql in statements if sql.lstrip().startswith(marker))


_SQLITE_ADOPT = _adopt_trigger(dates.SQLITE_FORWARD, "CREATE TRIGGER search_borrowers_adopt")
_PG_ADOPT = _adopt_trigger(borrowing.POSTGRES_FORWARD, "CREATE OR REPLACE FUNCTION search_borrowers_adopt()")

SQLITE_FORWARD = [
    f"CREATE TABLE {PENDING} (id INTEGER PRIMARY KEY)",
    f"""CREATE TRIGGER search_meaning_enqueue AFTER INSERT ON {MSG}
    WHEN NEW.position < {SPAN} AND NOT {borrowing._BORROWED_ROW.format(row='NEW')}
    BEGIN INSERT OR IGNORE INTO {PENDING}(id)
        SELECT k.seq * {SPAN} + NEW.position FROM {KEY} k WHERE k.conversation_id = NEW.conversation_id;
    END""",
    "DROP TRIGGER search_borrowers_adopt",
    _SQLITE_ADOPT.replace("BEGIN\n", f"BEGIN\n        INSERT OR IGNORE INTO {PENDING}(id) {_ADOPTED};\n", 1),
    # What exists is queued: the background embedder works through it.
    f"""INSERT INTO {PENDING}(id) SELECT k.seq * {SPAN} + m.position FROM {MSG} m
        JOIN {KEY} k ON k.conversation_id = m.conversation_id
        WHERE m.position < {SPAN} AND NOT {borrowing._BORROWED_ROW.format(row='m')}""",
]
SQLITE_BACKWARD = [
    "DROP TRIGGER IF EXISTS search_meaning_enqueue",
    "DROP TRIGGER search_borrowers_adopt",
    _SQLITE_ADOPT,
    f"DROP TABLE IF EXISTS {PENDING}",
]

POSTGRES_FORWARD = [
    f"CREATE TABLE {PENDING} (id bigint PRIMARY KEY)",
    f"""CREATE OR REPLACE FUNCTION search_meaning_enqueue() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF NEW.position < {SPAN} AND NOT {borrowing._BORROWED_ROW.format(row='NEW')} THEN
            INSERT INTO {PENDING}(id) SELECT k.seq * {SPAN} + NEW.position FROM {KEY} k
            WHERE k.conversation_id = NEW.conversation_id ON CONFLICT DO NOTHING;
        END IF;
        RETURN NULL;
    END $$""",
    postgres_trigger("search_meaning_enqueue", MSG, "INSERT", "search_meaning_enqueue", timing="AFTER"),
    _PG_ADOPT.replace("BEGIN\n", f"BEGIN\n        INSERT INTO {PENDING}(id) {_ADOPTED} ON CONFLICT DO NOTHING;\n", 1),
    f"""INSERT INTO {PENDING}(id) SELECT k.seq * {SPAN} + m.position FROM {MSG} m
        JOIN {KEY} k ON k.conversation_id = m.conversation_id
        WHERE m.position < {SPAN} AND NOT {borrowing._BORROWED_ROW.format(row='m')}""",
    *via_parent(PENDING, "id >> 32", KEY, "seq"),
    *via_parent(VECTORS, "conversation_id", CONV),
]
POSTGRES_BACKWARD = [
    *without_row_level_security(VECTORS),
    f"DROP TRIGGER IF EXISTS search_meaning_enqueue ON {MSG}",
    "DROP FUNCTION IF EXISTS search_meaning_enqueue()",
    _PG_ADOPT,
    f"DROP TABLE IF EXISTS {PENDING}",
]


class Migration(migrations.Migration):
    dependencies = [("search", "0007_key_project"), ("embeddings", "0001_initial")]

    operations = [
        migrations.CreateModel(
            name="MessageVector",
            fields=[
                ("id", models.BigAutoField(primary_key=True, serialize=False)),
                ("msg", models.BigIntegerField(unique=True)),
                ("conversation_id", models.UUIDField(db_index=True)),
                ("vector", models.BinaryField()),
                ("code", models.BinaryField()),
                ("model", models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name="+",
                                            to="embeddings.embeddingmodel")),
            ],
            options={"db_table": VECTORS,
                     "indexes": [models.Index(fields=["model"], name="messagevector_model_idx")]},
        ),
        migrations.RunPython(
            initial._run({"sqlite": SQLITE_FORWARD, "postgresql": POSTGRES_FORWARD}),
            initial._run({"sqlite": SQLITE_BACKWARD, "postgresql": POSTGRES_BACKWARD}),
        ),
    ]
