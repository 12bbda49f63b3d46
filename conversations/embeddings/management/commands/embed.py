"""manage.py embed: give every queued text its vector, and every stale vector a new one, now;
with --follow, keep doing it until stopped (the embedding process gunicorn runs)."""

import signal

from django.core.management.base import BaseCommand

from conversations.embeddings import worker


class Command(BaseCommand):
    help = "Embed every text waiting for a vector and re-embed vectors of a former model (resumable)."

    def add_arguments(self, parser):
        parser.add_argument("--batch", type=int, default=worker.BATCH)
        parser.add_argument("--follow", action="store_true",
                            help="keep embedding what arrives until SIGTERM or SIGINT (ends after its batch)")

    def handle(self, *args, batch, follow=False, **options):
        if follow:
            for sig in (signal.SIGTERM, signal.SIGINT):
                signal.signal(sig, lambda *_: worker.ask_to_stop())
            worker.follow()
            return
        for row in worker.progress():
            self.stdout.write(f"{row['label']}: {row['current']} current, {row['stale']} stale, "
                              f"{row['waiting']} waiting")
        done = worker.run_until_done(batch, progress=lambda n: self.stdout.write(f"  {n} embedded"))
        self.stdout.write(f"{done} vector(s) written")
