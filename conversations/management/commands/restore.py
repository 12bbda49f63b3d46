import time
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from conversations.backups import BackupError, restore


class Command(BaseCommand):
    help = ("Restore a backup made by `manage.py backup` into the EMPTY database DATABASE_URL names "
            "(a non-empty one is refused), verify it against the backup's manifest (integrity, "
            "migrations, every table's count and digest), then re-apply every erasure newer than the "
            "backup from the erasure journal (MEMORYUI_ERASURE_JOURNAL, and the copy beside the backup).")

    def add_arguments(self, parser):
        parser.add_argument("path", type=Path, help="the backup file (PATH.manifest.json beside it)")
        parser.add_argument("--erasure-journal", type=Path, default=None,
                            help="an erasure journal to re-apply from besides the configured one and the backup's "
                                 "copy (the servers' own, when this runs elsewhere)")
        parser.add_argument("--without-erasure-journal", action="store_true",
                            help="restore although the erasure journal is missing or does not verify: erasures "
                                 "newer than the backup may come back. Audited")

    def handle(self, *args, path, erasure_journal, without_erasure_journal, **options):
        started = time.monotonic()
        try:
            result = restore(path, erasure_journal=erasure_journal, without_erasure_journal=without_erasure_journal)
        except BackupError as exc:
            raise CommandError(str(exc)) from None
        width = max((len(t) for t in result.tables), default=10)
        for table, (expected, restored) in result.tables.items():
            mark = "   <-- differs" if table in result.mismatched_tables else ""
            self.stdout.write(f"  {table:<{width}}  {expected:>10,} → {restored:>10,}{mark}")
        for problem in result.problems:
            self.stdout.write(self.style.ERROR(f"  {problem}"))
        summary = f"{result.rows:,} rows in {len(result.tables)} tables in {time.monotonic() - started:.1f} s"
        if not result.verified:
            raise CommandError(f"restored, but verification FAILED: {summary}")
        for note in result.notes:
            self.stdout.write(f"  {note}")
        if result.unfinished:
            raise CommandError("restored and verified, but not every erasure newer than the backup was re-applied "
                               "(/readyz stays not ready; fix the cause, then `manage.py reapply_erasures`): "
                               + "; ".join(result.unfinished))
        self.stdout.write(self.style.SUCCESS(f"Restored and verified: {summary}."))
