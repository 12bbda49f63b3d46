"""Sign the head of every conversation that changed since the last run. For cron:

    */15 * * * *  cd /srv/memoryui && .venv/bin/python manage.py sign_heads --quiet

Each run signs what received a row (message, checkpoint, ledger entry) since the previous
run started, and every conversation never signed; a conversation whose newest head still
names its chain is left alone. Exit status 0 on success.
"""

import json

from django.core.management.base import BaseCommand, CommandError

from conversations.proofs import heads


class Command(BaseCommand):
    help = "Sign the chain head of every conversation changed since the last run (run it from cron)."

    def add_arguments(self, parser):
        parser.add_argument("--json", action="store_true", help="print the result as one JSON object")
        parser.add_argument("--quiet", action="store_true", help="print nothing on success")

    def handle(self, *args, **options):
        try:
            result = heads.sign_changed()
        except heads.keys.SigningUnavailable as exc:
            raise CommandError(exc.message) from None
        key = heads.keys.load_active().key_id
        if options["json"]:
            self.stdout.write(json.dumps({"signed": result.signed, "unchanged": result.unchanged, "key_id": key,
                                          "since": result.since.isoformat() if result.since else None}))
        elif not options["quiet"]:
            since = f"since {result.since.isoformat()}" if result.since else "(first run)"
            self.stdout.write(f"Signed {result.signed} heads with key {key} {since}; "
                              f"{result.unchanged} changed conversations already had their head signed.")
