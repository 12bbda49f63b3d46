import time
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from conversations.backups import BackupError, restore


class Command(BaseCommand):
    help = ("Restore a backup made by `manage.py backup` into the EMPTY database DATABASE_URL names "
            "(a non-empty one is refused), then verify it against the backup's manifest: integrity, "
            "migrations, every table's count and digest.")

    def add_arguments(self, parser):
        parser.add_argument("path", type=Path, help="the backup file (PATH.manifest.json beside it)")

    def handle(self, *args, path, **options):
        started = time.monotonic()
        try:
            result = restore(path)
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
        self.stdout.write(self.style.SUCCESS(f"Restored and verified: {summary}."))
