from django.core.management.base import BaseCommand, CommandError

from conversations import project_store
from conversations.errors import StoreError


class Command(BaseCommand):
    help = ("Create a project: a fence around conversations, facts, keys and people. "
            "Keys (create_api_key --project) and people (create_user --project) then act inside it.")

    def add_arguments(self, parser):
        parser.add_argument("slug", help="the project's address name: letters, digits, - and _ (e.g. support)")
        parser.add_argument("--name", default="", help="a readable name (default: the slug)")
        parser.add_argument("--retention-days", type=int, default=None,
                            help="days a conversation is kept after its last row (default: the server's)")

    def handle(self, *args, slug, name="", retention_days=None, **options):
        try:
            project = project_store.create_project(slug=slug, name=name, retention_days=retention_days,
                                                   actor="command:create_project")
        except StoreError as exc:
            raise CommandError(exc.message) from None
        self.stdout.write(f"Created project {project.slug!r} ({project.name}), id {project.pk}.")
