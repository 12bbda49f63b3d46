from django.core.management.base import BaseCommand, CommandError

from conversations.errors import StoreError
from conversations.retention import window


class Command(BaseCommand):
    help = ("Run the maintenance window of deletion requests: clean the database files and search them once "
            "for every request filed since the last window, and give each receipt its verdict. Run it from "
            "cron (hourly or daily); a request past its deadline is an alert on the admin pages and in /metrics.")

    def handle(self, *args, **options):
        try:
            result = window.run_window(actor="system:manage.py erasure_window")
        except StoreError as exc:
            raise CommandError(exc.message) from None
        if result.elsewhere:
            self.stderr.write(f"{result.elsewhere} deletion requests wait for pending files in another folder than "
                              "this server's MEMORYUI_ERASURE_PENDING_DIR: every server must share one folder, "
                              "or run the window where they were filed.")
        if not result.receipts:
            self.stdout.write("No deletion request is waiting for the window.")
            if result.unindexed:
                self.stdout.write(f"Removed the full-text index entries of {result.unindexed} deleted rows "
                                  "that no waiting request named (a request that failed, or whose pending "
                                  "file is gone).")
            return
        counts: dict[str, int] = {}
        for status in result.statuses.values():
            counts[status] = counts.get(status, 0) + 1
        said = ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))
        self.stdout.write(f"Window: {len(result.receipts)} deletion requests checked in {result.seconds:.1f} s "
                          f"({said}); {len(result.touched)} partitions rewritten.")
        if result.lost:
            self.stdout.write(f"{result.lost} of them had lost their pending file (what to search for): cleaned, "
                              "but their texts not searched for (not_possible).")
