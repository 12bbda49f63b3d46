"""Erasing everything the facts store holds about one subject (deletion requests).

The contract the retention app relies on:

- `preview_subject(subject)` → {"facts", "fact_events", "access_log", "fact_vectors",
  "sample_texts", "sample_vectors"}: what erasure would remove, and up to five fact
  texts and the first bytes of up to five fact vectors (derived personal data) the
  caller can look for in the database files afterwards to prove they are gone.
- `stored_subjects()`: every subject (in normal form, or as typed) the facts store holds, for a restore
  that must find which of them an erasure journal names (retention/reapply.py).
- `erase_subject(subject)` → {"facts", "fact_events", "access_log", "fact_vectors"}:
  deletes the subject's facts, their vectors, their events, the access-log rows naming
  the subject, and their full-text index entries. It opens no transaction of its own beyond a
  savepoint, so it runs inside the caller's `transaction.atomic()` and rolls back
  with it.

It gets past the append-only guards the one legitimate way: it first marks the
subject's facts `erasing` (a status change the guards allow), and the database
allows deleting a fact event only while its fact is so marked, and a fact only
while it is. The subject is compared in normal form (NFC, case-folded:
conversations/subjects.py), so `Cust:42` is erased with `cust:42`. The full-text
index entries go by trigger; merging the index so that no segment keeps them is
the retention app's job, after the deleting transaction, a few pages at a time.
"""

from django.db import connection, transaction

from conversations import projects
from conversations.subjects import normalize_subject

from . import meaning
from .models import ERASING, Fact, FactAccess, FactEvent, FactVector

SAMPLE_SIZE = 5


def preview_subject(subject: str) -> dict:
    norm = normalize_subject(subject)
    facts = Fact.objects.filter(subject_norm=norm)
    return {
        "facts": facts.count(),
        "fact_events": FactEvent.objects.filter(fact__in=facts).count(),
        "access_log": FactAccess.objects.filter(subject_norm=norm).count(),
        "fact_vectors": FactVector.objects.filter(fact__in=facts).count(),
        "sample_texts": list(facts.order_by("id").values_list("text", flat=True)[:SAMPLE_SIZE]),
        "sample_vectors": meaning.sample_vectors(norm, SAMPLE_SIZE),
    }


def stored_subjects(*, as_typed: bool = False) -> set[str]:
    """Normal forms, or (`as_typed`) the subjects as they were typed."""
    column = "subject" if as_typed else "subject_norm"
    found = set()
    for model in (Fact, FactAccess):
        found |= set(model.everywhere.exclude(**{column: ""}).values_list(column, flat=True).distinct())
    return found


def erase_subject(subject: str) -> dict:
    fact_table, event_table = Fact._meta.db_table, FactEvent._meta.db_table
    norm = normalize_subject(subject)
    with transaction.atomic():
        facts = Fact.objects.filter(subject_norm=norm)
        n_facts = facts.update(status=ERASING)
        # Facts of one subject supersede only facts of the same subject, so no
        # other subject's fact points at these.
        facts.update(superseded_by=None)
        # The request's project only (every project for one filed for all): another project's
        # facts and access log about the same subject are that project's to erase.
        fence, fenced = projects.sql_fence("project_id")
        n_vectors = meaning.erase_vectors(norm)
        with connection.cursor() as cursor:
            cursor.execute(
                f"DELETE FROM {event_table} WHERE fact_id IN "
                f"(SELECT id FROM {fact_table} WHERE subject_norm = %s AND status = %s{fence})",
                [norm, ERASING, *fenced],
            )
            n_events = cursor.rowcount
            cursor.execute(f"DELETE FROM {fact_table} WHERE subject_norm = %s AND status = %s{fence}",
                           [norm, ERASING, *fenced])
            cursor.execute(f"DELETE FROM {FactAccess._meta.db_table} WHERE subject_norm = %s{fence}", [norm, *fenced])
            n_access = cursor.rowcount
    return {"facts": n_facts, "fact_events": n_events, "access_log": n_access, "fact_vectors": n_vectors}
