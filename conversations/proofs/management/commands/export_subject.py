"""Write everything held about a subject to one ZIP (GDPR Art. 15 and 20):

    manage.py export_subject "customer:42" -o customer-42.zip          # in every project
    manage.py export_subject "customer:42" --project support -o s.zip   # in one

The subject is matched as a deletion request matches it (NFC, case-folded). The run is
recorded in the audit log (the subject by its SHA-256 only) and in the access logs.
Check the file offline: memoryui-verify customer-42.zip
"""

import os
import sys

from django.core.management.base import BaseCommand, CommandError

from conversations import projects
from conversations.api_keys import project_by_slug
from conversations.errors import StoreError
from conversations.proofs import bundle


class Command(BaseCommand):
    help = "Export everything held about a subject as one ZIP, checkable offline with memoryui-verify."

    def add_arguments(self, parser):
        parser.add_argument("subject", help="whom the export is about")
        parser.add_argument("-o", "--output", help="the ZIP to write ('-' for standard output); "
                                                   "default: subject-export-<hash>.zip here")
        parser.add_argument("--actor", default="system:manage.py", help="who asked, for the audit log")
        parser.add_argument("--project", metavar="SLUG", help="what one project holds (default: every project)")

    def handle(self, *args, subject, output, actor, project=None, **options):
        try:
            scope = projects.one(project_by_slug(project).pk) if project else projects.EVERY
            with projects.scoped(scope):
                export = bundle.prepare(subject, all_projects=not project)
        except StoreError as exc:  # a blank or overlong subject; a signing key that cannot sign; no such project
            raise CommandError(exc.message) from None
        path = output or export.filename
        if path != "-" and os.path.exists(path):
            raise CommandError(f"{path} exists; choose another --output")
        bundle.record_download(export, actor=actor, via="command")
        if path == "-":
            for chunk in export.chunks():
                sys.stdout.buffer.write(chunk)
            sys.stdout.buffer.flush()
            return
        tmp = f"{path}.partial"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as out:
            for chunk in export.chunks():
                out.write(chunk)
        os.replace(tmp, path)  # nothing half-written under the final name
        held = f"the project {export.project}" if export.project else "every project"
        self.stderr.write(f"Wrote {path}: {len(export.conversation_ids)} conversations, {export.messages} messages, "
                          f"{export.facts} facts, in {held}.")
