"""manage.py export CONVERSATION_ID [--output FILE]
    [--format memoryui|claude-code|openai-chat|anthropic|json|jsonl|markdown]

The third door of exports, beside the API's export endpoint and the conversation
page's buttons: the same stream (conversations.export.export_stream), written to
standard output or to a file, recorded in the audit log as the other doors record
theirs. A file appears only when the whole export is written (it is written beside
it first, then renamed).
"""

import os
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from conversations import store
from conversations.errors import StoreError
from conversations.export import FORMATS, export_stream
from conversations.models import Conversation


class Command(BaseCommand):
    help = "Export one conversation (memoryui, claude-code, openai-chat, anthropic, json, jsonl or markdown)."

    def add_arguments(self, parser):
        parser.add_argument("conversation_id", metavar="CONVERSATION_ID")
        parser.add_argument("--format", default="memoryui", choices=list(FORMATS),
                            help="memoryui and claude-code: the full record, imports back; openai-chat and "
                                 "anthropic: the active view as a request, handoff summary first (default: memoryui)")
        parser.add_argument("--output", "-o", default=None, metavar="FILE", help="a file instead of standard output")

    def handle(self, *args, conversation_id, format, output, **options):
        try:
            conversation = Conversation.objects.get_live(conversation_id)
            stream = export_stream(conversation.pk, format)
        except StoreError as exc:
            raise CommandError(exc.message) from None
        store.record_audit(actor="system:export", action="conversation.exported", target_type="conversation",
                           target_id=str(conversation.pk),
                           detail={"format": format, "messages": conversation.next_position, "via": "command"})
        if output is None:
            for chunk in stream.chunks:
                self.stdout.write(chunk, ending="")
            self.stdout.flush()
            return
        path = Path(output)
        partial = path.with_name(path.name + ".part")
        try:
            with partial.open("w", encoding="utf-8", newline="") as f:
                for chunk in stream.chunks:
                    f.write(chunk)
                f.flush()
                os.fsync(f.fileno())
            partial.replace(path)
        except OSError as exc:
            partial.unlink(missing_ok=True)
            raise CommandError(f"{path}: cannot write: {exc}") from None
        except BaseException:
            partial.unlink(missing_ok=True)
            raise
        self.stderr.write(f"{path}: {format}, conversation {conversation.pk}")
