"""manage.py prune — age-based pruning (conversations.retention.pruning).

Meant for cron: quiet on success apart from the one-line summary, a progress
bar on stderr when stderr is a terminal (or with --progress), non-zero exit on
failure. Running it again after an interruption finishes the job.
"""

import json
import sys
import time

from django.core.management.base import BaseCommand, CommandError

from conversations.errors import StoreError
from conversations.params import int_argument
from conversations.retention.pruning import MAX_BATCH, MAX_DAYS, default_retention_days, prune_older_than


def human_bytes(n: int) -> str:
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} B"


class ProgressBar:
    def __init__(self, stream, width: int = 40):
        self.stream = stream
        self.width = width
        self.last_draw = 0.0

    def __call__(self, done: int, total: int) -> None:
        now = time.monotonic()
        if done < total and now - self.last_draw < 0.1:
            return
        self.last_draw = now
        fraction = done / total if total else 1.0
        filled = int(self.width * fraction)
        self.stream.write(f"\rpruning [{'#' * filled}{'.' * (self.width - filled)}] "
                          f"{fraction * 100:5.1f}% {done}/{total} rows")
        if done >= total:
            self.stream.write("\n")
        self.stream.flush()


class Command(BaseCommand):
    help = "Delete conversations received longer ago than the retention period, then give the disk back."

    def add_arguments(self, parser):
        parser.add_argument("--older-than-days", type=int_argument(minimum=1, maximum=MAX_DAYS), default=None,
                            help="days since memoryui received their last row "
                                 f"(default: MEMORYUI_RETENTION_DAYS, now {default_retention_days()})")
        parser.add_argument("--dry-run", action="store_true", help="show what would go; change nothing")
        parser.add_argument("--batch-size", type=int_argument(minimum=1, maximum=MAX_BATCH), default=5000,
                            help="rows deleted per transaction (default 5000)")
        parser.add_argument("--progress", action="store_true",
                            help="draw the progress bar even when stderr is not a terminal")
        parser.add_argument("--json", action="store_true", help="print the result as JSON")
        parser.add_argument("--list", action="store_true", help="with --dry-run: list the conversation ids")

    def handle(self, *args, **options):
        days = options["older_than_days"]
        if days is None:
            days = default_retention_days()
        show_bar = options["progress"] or sys.stderr.isatty()
        try:
            result = prune_older_than(
                days=days, dry_run=options["dry_run"], batch_size=options["batch_size"],
                progress=ProgressBar(self.stderr._out) if show_bar and not options["dry_run"] else None,
                actor="system:manage.py prune",
            )
        except StoreError as exc:
            raise CommandError(exc.message) from None
        if options["json"]:
            self.stdout.write(json.dumps(result.as_dict(), indent=2))
            return
        if result.dry_run:
            self.stdout.write(
                f"dry run: would prune {result.conversations} conversations ({result.messages} messages, "
                f"{result.checkpoints} checkpoints) inactive since before {result.cutoff:%Y-%m-%d %H:%M} UTC, "
                f"roughly {human_bytes(result.estimated_bytes)}; database now {human_bytes(result.bytes_before)}"
            )
            if result.resumed:
                self.stdout.write(f"{result.resumed} of them were left by an interrupted prune")
            if options["list"]:
                for cid in result.conversation_ids:
                    self.stdout.write(cid)
            return
        self.stdout.write(
            f"pruned {result.conversations} conversations ({result.messages} messages, {result.checkpoints} "
            f"checkpoints) in {result.seconds:.1f}s; on disk {human_bytes(result.bytes_before)} -> "
            f"{human_bytes(result.bytes_after)}; removed {result.uploads_removed} expired uploads "
            f"(run {result.run_id})"
        )
        for note in result.notes:
            self.stderr.write(f"note: {note}")
