"""manage.py prune — age-based pruning (conversations.retention.pruning).

Every project by its own retention (a project's `retention_days`, else
MEMORYUI_RETENTION_DAYS), one run each; `--project` prunes one, `--older-than-days`
gives one period for all. Meant for cron: quiet on success apart from a summary line
per project, a progress bar on stderr when stderr is a terminal (or with --progress),
non-zero exit on failure. Running it again after an interruption finishes the job.
"""

import json
import sys
import time

from django.core.management.base import BaseCommand, CommandError

from conversations import projects
from conversations.api_keys import project_by_slug
from conversations.errors import StoreError
from conversations.params import int_argument
from conversations.retention.pruning import MAX_BATCH, MAX_DAYS, default_retention_days, prune_by_retention


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
                            help="days since memoryui received their last row (default: each project's retention, "
                                 f"else MEMORYUI_RETENTION_DAYS, now {default_retention_days()})")
        parser.add_argument("--project", metavar="SLUG", help="prune this project only (default: every project)")
        parser.add_argument("--dry-run", action="store_true", help="show what would go; change nothing")
        parser.add_argument("--batch-size", type=int_argument(minimum=1, maximum=MAX_BATCH), default=5000,
                            help="rows deleted per transaction (default 5000)")
        parser.add_argument("--progress", action="store_true",
                            help="draw the progress bar even when stderr is not a terminal")
        parser.add_argument("--json", action="store_true", help="print the result as JSON")
        parser.add_argument("--list", action="store_true", help="with --dry-run: list the conversation ids")

    def handle(self, *args, **options):
        show_bar = options["progress"] or sys.stderr.isatty()
        try:
            with self._acting_in(options["project"]):
                result = prune_by_retention(
                    days=options["older_than_days"], dry_run=options["dry_run"], batch_size=options["batch_size"],
                    progress=ProgressBar(self.stderr._out) if show_bar and not options["dry_run"] else None,
                    actor="system:manage.py prune", all_projects=not options["project"],
                )
        except StoreError as exc:
            raise CommandError(exc.message) from None
        if options["json"]:
            self.stdout.write(json.dumps(result.as_dict(), indent=2))
            return
        for part in result.projects:
            self._summary(result, part)
        if result.dry_run:
            if options["list"]:
                for cid in result.conversation_ids:
                    self.stdout.write(cid)
            return
        self.stdout.write(
            f"in {result.seconds:.1f}s; on disk {human_bytes(result.bytes_before)} -> "
            f"{human_bytes(result.bytes_after)}; removed {result.uploads_removed} expired uploads"
        )
        for note in result.notes:
            self.stderr.write(f"note: {note}")

    @staticmethod
    def _acting_in(slug: str | None):
        if not slug:
            return projects.scoped(projects.EVERY)
        try:
            return projects.scoped(projects.one(project_by_slug(slug).pk))
        except StoreError as exc:
            raise CommandError(exc.message) from None

    def _summary(self, result, part: dict) -> None:
        counts = (f"{part['conversations']} conversations ({part['messages']} messages, {part['checkpoints']} "
                  "checkpoints)")
        kept = f"kept {part['older_than_days']} days"
        if result.dry_run:
            self.stdout.write(
                f"{part['project']} ({kept}): dry run: would prune {counts} inactive since before "
                f"{part['cutoff']:%Y-%m-%d %H:%M} UTC, roughly {human_bytes(part['estimated_bytes'])}")
            if part["resumed"]:
                self.stdout.write(f"{part['resumed']} of them were left by an interrupted prune")
            return
        self.stdout.write(f"{part['project']} ({kept}): pruned {counts} (run {part['run_id']})")
