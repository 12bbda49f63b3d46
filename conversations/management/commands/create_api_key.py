from django.core.management.base import BaseCommand, CommandError

from conversations import api_keys
from conversations.errors import StoreError
from conversations.models import ApiKey


class Command(BaseCommand):
    help = (
        "Create an API key for an agent and print its secret once (only a hash is kept). "
        "A key acts in one project (--project, default: default), optionally only in some of its "
        f"namespaces; --all-projects makes an operator's key for the whole server. Scopes: {', '.join(ApiKey.SCOPES)}."
    )

    def add_arguments(self, parser):
        parser.add_argument("name", help="who uses the key, e.g. support-agent")
        parser.add_argument("--scopes", default="read,write",
                            help="comma-separated, from: " + ", ".join(ApiKey.SCOPES) + " (default: read,write)")
        where = parser.add_mutually_exclusive_group()
        where.add_argument("--project", default=None, help="the project's slug (default: default)")
        where.add_argument("--all-projects", action="store_true",
                           help="an operator's key for every project on the server")
        parser.add_argument("--namespaces", default="",
                            help="comma-separated: the only namespaces the key may read and write (e.g. claude-code)")

    def handle(self, *args, name, scopes, project=None, all_projects=False, namespaces="", **options):
        try:
            key, secret = api_keys.create_api_key(name=name, scopes=scopes, created_by="command:create_api_key",
                                                  project=project, all_projects=all_projects, namespaces=namespaces)
        except StoreError as exc:
            raise CommandError(exc.message) from None
        where = "every project (an operator's key)" if key.all_projects else f"project {key.project.slug!r}"
        if key.namespaces:
            where += f", namespaces {', '.join(key.namespaces)} only"
        self.stdout.write(f"Created API key {key.name!r} (id {key.pk}, prefix {key.prefix}) "
                          f"with scopes {', '.join(key.scopes)}, for {where}.")
        self.stdout.write("Secret (shown once; store it now, it cannot be shown again):")
        self.stdout.write(secret)
