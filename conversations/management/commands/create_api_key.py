from django.core.management.base import BaseCommand, CommandError

from conversations import api_keys
from conversations.errors import StoreError
from conversations.models import ApiKey


class Command(BaseCommand):
    help = (
        "Create an API key for an agent and print its secret once (only a hash is kept). "
        f"Scopes: {', '.join(ApiKey.SCOPES)}."
    )

    def add_arguments(self, parser):
        parser.add_argument("name", help="who uses the key, e.g. support-agent")
        parser.add_argument("--scopes", default="read,write",
                            help="comma-separated, from: " + ", ".join(ApiKey.SCOPES) + " (default: read,write)")

    def handle(self, *args, name, scopes, **options):
        try:
            key, secret = api_keys.create_api_key(name=name, scopes=scopes, created_by="command:create_api_key")
        except StoreError as exc:
            raise CommandError(exc.message) from None
        self.stdout.write(f"Created API key {key.name!r} (id {key.pk}, prefix {key.prefix}) "
                          f"with scopes {', '.join(key.scopes)}.")
        self.stdout.write("Secret (shown once; store it now, it cannot be shown again):")
        self.stdout.write(secret)
