from django.core.management.base import BaseCommand, CommandError

from conversations import api_keys
from conversations.models import ApiKey
from conversations.params import parse_int


class Command(BaseCommand):
    help = "Revoke an API key by its prefix (shown in the key list and in the key itself: mui_<prefix>_…) or id."

    def add_arguments(self, parser):
        parser.add_argument("key", help="the key's prefix, its id, or the whole secret")

    def handle(self, *args, key, **options):
        given = key.strip()
        # A pasted secret carries its prefix: mui_<prefix>_<random>.
        if given.startswith("mui_") and given.count("_") >= 2:
            given = given.split("_", 2)[1]
        found = ApiKey.objects.filter(prefix=given).first()
        if found is None:
            try:
                key_id = parse_int(given, minimum=1)
            except ValueError:
                key_id = None
            if key_id is not None:
                found = ApiKey.objects.filter(pk=key_id).first()
        if found is None:
            raise CommandError(f"no API key with prefix or id {given!r}")
        if found.revoked_at is not None:
            self.stdout.write(f"API key {found.name!r} ({found.prefix}) was already revoked "
                              f"at {found.revoked_at:%Y-%m-%d %H:%M} UTC.")
            return
        api_keys.revoke_api_key(key_id=found.pk, revoked_by="command:revoke_api_key")
        self.stdout.write(f"Revoked API key {found.name!r} ({found.prefix}); requests with it now get 401.")
