"""PostgreSQL: the indexed words are stored with the row, and no search calls plpgsql;
both databases: an index on the time a row was written, for date filters.

`search_message_text` (migration 0001) is plpgsql with an EXCEPTION
block, so that a row that is not JSON is indexed as stored instead of failing
its insert; such a block starts a subtransaction on every call, which a parallel
worker may not do. It was declared PARALLEL SAFE all the same, so once the
message table was big enough for the planner to hand a search to parallel
workers, phrase searches with a filter failed with "cannot start subtransactions
during a parallel operation" (a 500). PostgreSQL 15 has no way to test text for
valid JSON without catching the error (`pg_input_is_valid` and `IS JSON` came in
16), so the block stays and both functions are now PARALLEL RESTRICTED: the
honest label.

The same searches were slow (4–5 s on 359,000 rows): a GIN index on tsvector
keeps no word positions, so a phrase is rechecked on every row that has all its
words, and the recheck computed the row's tsvector again through the functions,
~125 µs a row (measured: to_tsvector ~100 µs of it, the plpgsql call and its
subtransaction ~25 µs). The tsvector is now a stored generated column: computed
once, by the functions, when the row is inserted (never in a parallel worker:
inserts are not parallel), indexed by GIN, and read back by the recheck instead
of recomputed. A search no longer calls any function of ours, so its plans may
go parallel again. The price is bytes: ~490 B a row (the tsvector) on ~580 B of
stored JSON. A B-tree on `created_at` lets a date filter pick its rows first:
a day's rows, rechecked against their stored words, instead of every row with the
phrase's words.

SQLite keeps word positions in FTS5 (a phrase needs no recheck) and gets the
same B-tree on `created_at`: the index hands out hits newest first and a filter
it cannot see is checked hit by hit, so a phrase with 20,000 hits and a one-day
filter read 20,000 rows (0.1–0.35 s at 1,000,000 messages); a narrow date range
is now searched from its own rows (`conversations.search.reads`). It costs an
append one more B-tree entry (~60 bytes).

The backward migration restores migration 0002's state exactly, labels included.
"""

import importlib

from django.db import migrations

initial = importlib.import_module("conversations.search.migrations.0001_initial")

MSG = initial.MSG
COLUMN = "search_tsv"
INDEX = "search_message_tsv_idx"
CREATED_INDEX = "search_message_created_idx"

POSTGRES_FORWARD = [
    "ALTER FUNCTION search_message_text(text) PARALLEL RESTRICTED",
    "ALTER FUNCTION search_message_tsvector(text) PARALLEL RESTRICTED",
    f"DROP INDEX {INDEX}",
    f"ALTER TABLE {MSG} ADD COLUMN {COLUMN} tsvector GENERATED ALWAYS AS (search_message_tsvector(content)) STORED",
    f"CREATE INDEX {INDEX} ON {MSG} USING GIN ({COLUMN})",
    f"CREATE INDEX {CREATED_INDEX} ON {MSG} (created_at)",
    f"ANALYZE {MSG}",
]
POSTGRES_BACKWARD = [
    f"DROP INDEX IF EXISTS {CREATED_INDEX}",
    f"ALTER TABLE {MSG} DROP COLUMN IF EXISTS {COLUMN}",  # its index goes with it
    f"CREATE INDEX {INDEX} ON {MSG} USING GIN (search_message_tsvector(content))",
    "ALTER FUNCTION search_message_tsvector(text) PARALLEL SAFE",
    "ALTER FUNCTION search_message_text(text) PARALLEL SAFE",
]


SQLITE_FORWARD = [f"CREATE INDEX {CREATED_INDEX} ON {MSG} (created_at)"]
SQLITE_BACKWARD = [f"DROP INDEX IF EXISTS {CREATED_INDEX}"]


class Migration(migrations.Migration):
    dependencies = [
        ("search", "0002_pending_rows"),
    ]

    operations = [
        migrations.RunPython(
            initial._run({"sqlite": SQLITE_FORWARD, "postgresql": POSTGRES_FORWARD}),
            initial._run({"sqlite": SQLITE_BACKWARD, "postgresql": POSTGRES_BACKWARD}),
        ),
    ]
