"""Over every demo conversation and every format fixture: no crash, and nothing dropped in silence.

Each demo conversation is exported in every format that imports back, and each export
parsed again: every text of the export is in a row, a checkpoint, a title or a reported
problem (tests/drop_support.py). Each fixture of every format (as the command takes it:
folders walked, OpenCode's storage put together, a Cline task with its panel) is imported:
nothing fails, and the plan's texts are all placed. The counts are what the import reports.
"""

import json
from pathlib import Path

import pytest

from conversations import formats
from conversations.demo import load_demo
from conversations.errors import NothingToSend
from conversations.export import export_stream
from conversations.imports import containers, importer
from conversations.models import Conversation
from tests.drop_support import texts_of, unplaced

pytestmark = pytest.mark.django_db
FIX = Path(__file__).parent / "fixtures" / "formats"
EXPORTS = ("memoryui", "claude-code", "openai-chat", "anthropic")


def objects_of(text: str) -> list:
    try:
        return [json.loads(text)]
    except ValueError:
        return [json.loads(line) for line in text.splitlines() if line.strip()]


def test_every_demo_conversation_exports_and_parses_back_with_nothing_dropped():
    load_demo(coding_turns=40)
    conversations = list(Conversation.objects.live())
    assert len(conversations) >= 5
    for conversation in conversations:
        for fmt in EXPORTS:
            try:
                text = "".join(export_stream(conversation.pk, fmt).chunks)
            except NothingToSend:  # an active view with nothing a model could be sent: no body at all
                assert fmt in ("openai-chat", "anthropic", "gemini"), (conversation.title, fmt)
                continue
            plan = formats.parse(text, format=fmt)
            assert not unplaced(plan, texts_of(objects_of(text))), (conversation.title, fmt)
            result = importer.import_text(text, format=fmt, namespace="back", dry_run=True)
            assert not result.failed, (conversation.title, fmt, result.failed)


PIECES = {str(Path(p.name).relative_to(FIX)): p for p in containers.pieces_of_folder(FIX) if not p.skipped}


@pytest.mark.parametrize("name", sorted(PIECES))
def test_every_fixture_imports_without_a_failure_or_a_silent_drop(name):
    piece = PIECES[name]
    data = piece.data if piece.data is not None else piece.path.read_bytes()
    result = importer.import_text(data, namespace="fixtures", path=piece.name, sidecar=piece.sidecar)
    assert not result.failed and (result.created or result.appended or result.empty)
    if name.endswith(".md"):
        return  # Markdown: its lines are checked by tests/test_format_aider.py
    text = data.decode() if isinstance(data, bytes) else data
    plan = formats.parse(text, format=result.format)
    assert not unplaced(plan, texts_of(objects_of(text))), name
