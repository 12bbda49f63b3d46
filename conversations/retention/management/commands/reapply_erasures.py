"""manage.py reapply_erasures — re-apply the erasures this database shows no sign of.

`manage.py restore` does this itself. This is for a database brought back any other way
(a provider's snapshot, a point-in-time recovery from WAL archives, a restore that stopped
half-way): /readyz answers `"erasures": "not_reapplied"` until it has run
(conversations/retention/reapply.py).
"""

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from conversations.errors import StoreError
from conversations.retention import erasure_journal, journal, reapply

ACTOR = "system:manage.py reapply_erasures"


class Command(BaseCommand):
    help = ("Re-apply every erasure in the erasure journal whose receipt this database lacks (after a restore "
            "by other means than `manage.py restore`); --check only says what /readyz sees.")

    def add_arguments(self, parser):
        parser.add_argument("--check", action="store_true",
                            help="change nothing: verify the journal, compare it with the database, say what waits")
        parser.add_argument("--erasure-journal", type=Path, default=None, dest="journal_copy",
                            help="another copy of the journal (a backup's) to bring the configured one up to")
        parser.add_argument("--new-journal", action="store_true",
                            help="the configured journal is lost or damaged: keep it aside, start a new one holding "
                                 "every receipt of the database (audited)")

    def handle(self, *args, check, journal_copy: Path | None, new_journal, **options):
        if check:
            return self._check()
        if new_journal:
            return self._new_journal()
        gathered = reapply.gather(given=journal_copy)
        if gathered.chosen is None or gathered.problems:
            raise CommandError("; ".join(gathered.problems))
        current = reapply.adopt(gathered.chosen)
        mismatch = erasure_journal.anchor_problem(current)
        if mismatch:
            raise CommandError(mismatch)
        try:
            outcome = reapply.reapply(current, why={"after_restore_of": None, "reason": "the database showed no sign "
                                                    "of these erasures (restored by other means)"}, actor=ACTOR)
        except StoreError as exc:
            raise CommandError(str(exc)) from None
        for line in outcome.lines():
            self.stdout.write(line)
        if outcome.problems:
            raise CommandError("; ".join(outcome.problems))

    def _check(self):
        path = journal.configured_path()
        current = journal.read(path)
        if current is None:
            self.stdout.write(f"no erasure journal at {path}")
        else:
            verdict = "verifies" if current.ok else "does NOT verify: " + "; ".join(current.problems)
            self.stdout.write(f"erasure journal {current.journal_id} at {path}: {current.entries} entries, "
                              f"{len(current.erasures)} erasures, {len(current.intents)} unfinished, "
                              f"{current.torn} torn writes closed; {verdict}")
        problems = [] if current is None or current.ok else ["the journal does not verify"]
        mismatch = erasure_journal.anchor_problem(current)
        if mismatch:
            problems.append(mismatch)
        if current is not None and current.ok:
            lacking, unseen = reapply.pending(current)
            unfinished = sum(1 for r in lacking if r.unfinished)
            self.stdout.write(f"{len(lacking) - unfinished} receipts to bring back, {unfinished} requests that "
                              f"stopped before their receipt, {len(unseen)} erasures this database shows no sign of")
            if unseen:
                problems.append(f"{len(unseen)} erasures to re-apply")
        self.stdout.write(f"/readyz: {erasure_journal.readiness()}")
        if problems:
            raise CommandError("; ".join(problems))

    def _new_journal(self):
        path = journal.configured_path()
        current = journal.read(path)
        if current is not None and current.ok and not erasure_journal.anchor_problem(current):
            raise CommandError(f"the erasure journal {path} verifies and is the one this database wrote to: "
                               "nothing to replace")
        done = erasure_journal.replace(actor=ACTOR, reason="manage.py reapply_erasures --new-journal")
        self.stdout.write(f"started erasure journal {done['journal']['journal']} with {done['receipts_backfilled']} "
                          "receipts of this database" + (f"; the old one is kept as {done['set_aside']}"
                                                          if done["set_aside"] else ""))

