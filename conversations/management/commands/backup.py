import time
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from conversations.backups import BackupError, backup, manifest_path


class Command(BaseCommand):
    help = ("Back up the database to PATH while the server keeps serving (SQLite: the online backup API; "
            "PostgreSQL: pg_dump -Fc), with PATH.manifest.json holding every table's count and digest "
            "for `manage.py restore` to verify against.")

    def add_arguments(self, parser):
        parser.add_argument("path", type=Path, help="the backup file to create (never overwritten)")

    def handle(self, *args, path, **options):
        started = time.monotonic()
        try:
            manifest = backup(path)
        except BackupError as exc:
            raise CommandError(str(exc)) from None
        rows = sum(t["rows"] for t in manifest["tables"].values())
        self.stdout.write(self.style.SUCCESS(
            f"Backed up {rows:,} rows in {len(manifest['tables'])} tables ({manifest['vendor']}) to {path} "
            f"in {time.monotonic() - started:.1f} s; manifest {manifest_path(path.resolve())}"))
