from django.core.management.base import BaseCommand

from conversations.demo import load_demo
from conversations.models import Conversation
from conversations.params import int_argument


class Command(BaseCommand):
    help = "Load the demonstration conversations (only into an empty database unless --force)."

    def add_arguments(self, parser):
        parser.add_argument("--force", action="store_true", help="load even when conversations exist")
        parser.add_argument("--coding-turns", type=int_argument(minimum=0, maximum=1_000_000), default=600,
                            help="size of the long coding session")

    def handle(self, *args, force=False, coding_turns=600, **options):
        if Conversation.objects.exists() and not force:
            self.stdout.write("Conversations already exist; demonstration data not loaded (use --force).")
            return
        conversations = load_demo(coding_turns=coding_turns)
        for c in conversations:
            c.refresh_from_db()
            self.stdout.write(f"  {c.pk}  {c.next_position:>6} messages  {c.title}")
        self.stdout.write(self.style.SUCCESS(f"Loaded {len(conversations)} demonstration conversations."))
