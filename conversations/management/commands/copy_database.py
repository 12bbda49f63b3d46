import sys
import time

from django.core.management.base import BaseCommand, CommandError

from conversations.copying import CopyError, copy_database


class Command(BaseCommand):
    help = ("Copy everything from the embedded SQLite database to an empty PostgreSQL database "
            "(migrated first), then verify counts and every conversation's content. The source is only read.")

    def add_arguments(self, parser):
        parser.add_argument("--to", required=True, metavar="postgres:///NAME", help="the empty target database")
        parser.add_argument("--batch", type=int, default=2000, help="rows per INSERT batch")

    def handle(self, *args, to, batch, **options):
        bar = _Bar(self.stderr)
        started = time.monotonic()
        self.stdout.write(f"Copying into {to} (migrating it first) …")
        try:
            report = copy_database(to, progress=bar, batch=max(1, batch))
        except CopyError as exc:
            raise CommandError(str(exc)) from None
        bar.finish()
        width = max(len(t) for t in report.tables) if report.tables else 10
        for table, (source, target) in report.tables.items():
            mark = "" if source == target else "   <-- differs"
            self.stdout.write(f"  {table:<{width}}  {source:>10,} → {target:>10,}{mark}")
        for table in report.mismatched_tables:
            self.stdout.write(self.style.ERROR(f"  {table}: the rows differ"))
        for cid in report.mismatched_conversations[:20]:
            self.stdout.write(self.style.ERROR(f"  conversation {cid}: its content differs"))
        summary = (f"{report.rows:,} rows in {len(report.tables)} tables, {report.conversations_checked:,} "
                   f"conversations compared, in {time.monotonic() - started:.1f} s")
        if not report.verified:
            raise CommandError(f"copied, but verification FAILED: {summary}")
        self.stdout.write(self.style.SUCCESS(f"Copied and verified: {summary}."))
        self.stdout.write(f"Now serve from it: DATABASE_URL={to} make run")


class _Bar:
    """A one-line progress bar on stderr (redrawn in place on a terminal, every 10% otherwise)."""

    WIDTH = 30

    def __init__(self, stream):
        self.stream = stream
        self.tty = hasattr(sys.stderr, "isatty") and sys.stderr.isatty()
        self.last_tenth = -1

    def __call__(self, done: int, total: int, table: str):
        fraction = done / total if total else 1.0
        filled = int(fraction * self.WIDTH)
        line = f"[{'#' * filled}{'.' * (self.WIDTH - filled)}] {fraction:4.0%} {done:,}/{total:,} rows {table}"
        if self.tty:
            self.stream.write("\r" + line.ljust(100), ending="")
            self.stream.flush()
        elif int(fraction * 10) != self.last_tenth:
            self.last_tenth = int(fraction * 10)
            self.stream.write(line)

    def finish(self):
        if self.tty:
            self.stream.write("")
