"""Erasing everything the facts store holds about one subject (deletion requests).

The contract the retention app relies on:

- `preview_subject(subject)` → {"facts", "fact_events", "access_log", "sample_texts"}:
  what erasure would remove, and up to five fact texts the caller can look for in
  the database files afterwards to prove they are gone.
- `erase_subject(subject)` → {"facts", "fact_events", "access_log"}: deletes the
  subject's facts, their events, the access-log rows naming the subject, and
  their full-text index entries. It opens no transaction of its own beyond a
  savepoint, so it runs inside the caller's `transaction.atomic()` and rolls back
  with it.

It gets past the append-only guards the one legitimate way: it first marks the
subject's facts `erasing` (a status change the guards allow), and the database
allows deleting a fact event only while its fact is so marked, and a fact only
while it is. On SQLite the FTS5 index is then merged ('optimize'), which rewrites
its segments without the deleted terms; on PostgreSQL the GIN entries go with
the rows and VACUUM (the retention app's job) reclaims the pages.
"""

from django.db import connection, transaction

from .models import ERASING, Fact, FactAccess, FactEvent

SAMPLE_SIZE = 5


def preview_subject(subject: str) -> dict:
    facts = Fact.objects.about(subject)
    return {
        "facts": facts.count(),
        "fact_events": FactEvent.objects.of_subject(subject).count(),
        "access_log": FactAccess.objects.filter(subject=subject).count(),
        "sample_texts": list(facts.order_by("id").values_list("text", flat=True)[:SAMPLE_SIZE]),
    }


def erase_subject(subject: str) -> dict:
    fact_table, event_table = Fact._meta.db_table, FactEvent._meta.db_table
    with transaction.atomic():
        facts = Fact.objects.about(subject)
        n_facts = facts.update(status=ERASING)
        # Facts of one subject supersede only facts of the same subject, so no
        # other subject's fact points at these.
        facts.update(superseded_by=None)
        with connection.cursor() as cursor:
            cursor.execute(
                f"DELETE FROM {event_table} WHERE fact_id IN "
                f"(SELECT id FROM {fact_table} WHERE subject = %s AND status = %s)",
                [subject, ERASING],
            )
            n_events = cursor.rowcount
            cursor.execute(f"DELETE FROM {fact_table} WHERE subject = %s AND status = %s", [subject, ERASING])
            cursor.execute(f"DELETE FROM {FactAccess._meta.db_table} WHERE subject = %s", [subject])
            n_access = cursor.rowcount
            if n_facts and connection.vendor == "sqlite":
                cursor.execute("INSERT INTO facts_fact_fts(facts_fact_fts) VALUES ('optimize')")
    return {"facts": n_facts, "fact_events": n_events, "access_log": n_access}
