"""Replace the server's signing key. The old public key stays on record (retired) so that
heads signed with it still verify; the old private key is destroyed."""

from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import BaseCommand, CommandError

from conversations.proofs import keys


class Command(BaseCommand):
    help = "Rotate the Ed25519 signing key in the data folder; old heads stay verifiable with the old public key."

    def handle(self, *args, **options):
        try:
            old, new = keys.rotate()
        except ImproperlyConfigured as exc:
            raise CommandError(str(exc)) from None
        except keys.SigningUnavailable as exc:
            raise CommandError(exc.message) from None
        self.stdout.write(f"Retired signing key {old}; new signing key {new} "
                          f"(public key: {keys.load_active().public_b64}).")
