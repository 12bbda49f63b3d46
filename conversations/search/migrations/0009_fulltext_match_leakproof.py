"""Full-text search under row-level security: `tsvector @@ tsquery` declared leak-proof.

PostgreSQL evaluates a row-level security policy before any condition whose function is not
LEAKPROOF, so under the policies a search cannot use the GIN index on the words: it reads
every row of the project instead (bench/NOTES.md, workload 20: a rare word 1.52x and growing,
2.6 ms instead of 204 ms with the declaration). `ts_match_vq` tells nothing of a row it
rejects: its only errors concern the query, which is parsed before any row is read, and it
returns a boolean. Declaring it needs a superuser; a migration run by the database's owner
alone leaves it as it is, and `manage.py check --deploy` says so (memoryui.W002,
conversations/deploy_checks.py) with the statement to run.
"""

from django.db import migrations

STATEMENT = "ALTER FUNCTION pg_catalog.ts_match_vq(tsvector, tsquery) LEAKPROOF"


def declare(apps, schema_editor):
    db = schema_editor.connection
    if db.vendor != "postgresql":
        return
    with db.cursor() as cursor:
        cursor.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user")
        row = cursor.fetchone()
        if row and row[0]:
            cursor.execute(STATEMENT)


class Migration(migrations.Migration):
    dependencies = [("search", "0008_message_vectors")]

    operations = [migrations.RunPython(declare, migrations.RunPython.noop)]
