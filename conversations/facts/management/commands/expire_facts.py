"""Write the `expired` event for every fact past its expires_at (run it daily).

Recall never depends on this: it filters on expires_at itself, so an expired
fact is not recalled even before the event exists. The facts pages also run the
same step lazily for what they show. Idempotent.
"""

from django.core.management.base import BaseCommand

from conversations.facts.store import expire_due


class Command(BaseCommand):
    help = "Record the expired event for facts past their expiry (never deletes anything)."

    def handle(self, *args, **options):
        count = expire_due(actor="system:expire_facts")
        self.stdout.write(f"{count} fact(s) marked expired")
