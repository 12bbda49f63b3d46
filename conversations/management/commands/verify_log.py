import json as jsonlib
import sys
import time

from django.core.management.base import BaseCommand, CommandError

from conversations.chain_verify import ERASED, TAMPERED, verify_all
from conversations.errors import NotFound
from conversations.models import parse_conversation_id


class Command(BaseCommand):
    help = ("Check every hash chain in the database (conversations/chain.py): each conversation's messages "
            "and checkpoints, the commitments kept of erased conversations, and the audit log. Reports in "
            "words, or with --json as one JSON document; exits 1 when anything is tampered with.")

    def add_arguments(self, parser):
        parser.add_argument("--json", action="store_true", help="print the report as JSON")
        parser.add_argument("--conversation", action="append", default=None, metavar="ID",
                            help="check only this conversation (repeatable); the audit log is always checked")

    def handle(self, *args, json: bool = False, conversation=None, **options):
        ids = None
        if conversation:
            try:
                ids = [parse_conversation_id(c) for c in conversation]
            except NotFound as exc:
                raise CommandError(exc.message) from None
        started = time.monotonic()
        report = verify_all(conversation_ids=ids)
        seconds = time.monotonic() - started
        if json:
            document = report.as_dict()
            document["seconds"] = round(seconds, 3)
            self.stdout.write(_dumps(document))
        else:
            self._words(report, seconds)
        if not report.ok:
            sys.exit(1)

    def _words(self, report, seconds: float) -> None:
        rows = sum(s.messages + s.checkpoints for s in report.conversations)
        for state in report.conversations + report.erased:
            if state.state == TAMPERED:
                self.stdout.write(self.style.ERROR(f"TAMPERED  {state.conversation_id}  {state.describe()}"))
            elif state.state == ERASED:
                self.stdout.write(f"erased    {state.conversation_id}  {state.describe()}")
        audit = report.audit
        if audit.ok:
            self.stdout.write(f"audit log verified: {audit.rows} events")
        else:
            self.stdout.write(self.style.ERROR(f"TAMPERED  audit log at event #{audit.broken_at}: {audit.reason}"))
        counts = report.as_dict()["counts"]
        line = (f"{len(report.conversations)} conversations ({counts['verified']} verified, {counts['erased']} with "
                f"erased rows, {counts['tampered']} tampered), {rows:,} rows, {len(report.erased)} erased "
                f"conversations, in {seconds:.1f} s")
        self.stdout.write(self.style.SUCCESS(line) if report.ok else self.style.ERROR(line))


def _dumps(document) -> str:
    return jsonlib.dumps(document, indent=2, ensure_ascii=False)
