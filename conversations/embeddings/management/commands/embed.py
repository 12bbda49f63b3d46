"""manage.py embed: give every queued text its vector, and every stale vector a new one, now."""

from django.core.management.base import BaseCommand

from conversations.embeddings import worker


class Command(BaseCommand):
    help = "Embed every text waiting for a vector and re-embed vectors of a former model (resumable)."

    def add_arguments(self, parser):
        parser.add_argument("--batch", type=int, default=worker.BATCH)

    def handle(self, *args, batch, **options):
        for row in worker.progress():
            self.stdout.write(f"{row['label']}: {row['current']} current, {row['stale']} stale, "
                              f"{row['waiting']} waiting")
        done = worker.run_until_done(batch, progress=lambda n: self.stdout.write(f"  {n} embedded"))
        self.stdout.write(f"{done} vector(s) written")
