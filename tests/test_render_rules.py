"""One set of rendering rules (conversations/formats/requests.py): the server's exports, the
Python client and the TypeScript client render every view alike — generated views, views with
nothing or little to send, every demo conversation and every conversation the importers make
of the fixtures — and every body they make is one its provider accepts, Gemini's judged by
google-genai's own types (tests/provider_oracle.py). Where there is nothing to send, all three
say so, and none ever makes `messages: []`."""

import json
import random
from pathlib import Path

import pytest

from conversations.demo import load_demo
from conversations.export import export_stream
from conversations.formats.requests import CONTINUED
from conversations.imports import containers, importer
from conversations.imports.models import ImportSource
from conversations.models import Conversation
from conversations.reads import list_active
from tests.provider_oracle import anthropic_body, anthropic_problems, gemini_problems, openai_body, openai_problems
from tests.render_support import (
    JOURNAL_MODES,
    NOTHING,
    PROVIDERS,
    degenerate_views,
    generated_view,
    python_renderings,
    server_renderings,
    typescript_renderings,
)
from tests.typescript_support import build

FIX = Path(__file__).parent / "fixtures" / "formats"
JUDGES = {"openai": lambda b: openai_problems(openai_body(b)),
          "anthropic": lambda b: anthropic_problems(anthropic_body(b)), "gemini": gemini_problems}


def differences(views: list[dict]) -> tuple[list, dict]:
    """Every (view, provider, journal) where the three renderers disagree, and counts."""
    typescript = typescript_renderings(views)
    found, counts = [], {"views": len(views), "bodies": 0, "nothing_to_send": 0}
    for index, (view, ts) in enumerate(zip(views, typescript, strict=True)):
        assert "error" not in ts, (view, ts)
        py, server = python_renderings(view), server_renderings(view)
        for provider in PROVIDERS:
            for journal in JOURNAL_MODES:
                bodies = {"server": server[provider][journal], "python": py[provider][journal],
                          "typescript": ts[provider][journal]}
                # Equal as JSON values (a stored 149.0 is JavaScript's 149 once parsed).
                if not bodies["server"] == bodies["python"] == bodies["typescript"]:
                    found.append((index, provider, journal, bodies))
                    continue
                body = bodies["server"]
                if body == NOTHING:
                    counts["nothing_to_send"] += 1
                    continue
                # Never a body with no message: `messages: []` is what every API refuses.
                assert (body.get("messages") or body.get("contents")) if isinstance(body, dict) else body, view
                problems = JUDGES[provider](body)
                assert not problems, (provider, journal, problems[:3], view)
                counts["bodies"] += 1
    return found, counts


@pytest.mark.database_independent
def test_the_three_renderers_agree_on_generated_and_degenerate_views(capsys):
    build()
    rng = random.Random(43)
    views = [generated_view(rng) for _ in range(300)] + degenerate_views()
    found, counts = differences(views)
    assert found == [], found[:3]
    assert counts["bodies"] > 1500 and counts["nothing_to_send"] >= 6, counts
    with capsys.disabled():
        print(f"\nrender rules, generated views: {counts}")


@pytest.mark.database_independent
def test_a_system_rows_image_is_named_in_anthropics_system_and_geminis_instruction_by_all_three():
    build()
    image = {"type": "image", "source": {"type": "url", "url": "https://example.com/logo.png"}}
    logo = {"kind": "system", "content": [{"type": "text", "text": "Match this logo."}, image]}
    with_text = {"handoff": None, "items": [{"position": 0, "message": logo},
                                            {"position": 1, "message": {"kind": "user", "content": "Draw it."}}]}
    image_only = {"handoff": None, "items": [{"position": 0, "message": {"kind": "system", "content": [image]}}]}
    views = [with_text, image_only]
    renderings = {"server": [server_renderings(v) for v in views], "python": [python_renderings(v) for v in views],
                  "typescript": typescript_renderings(views)}
    continued = [{"role": "user", "content": [{"type": "text", "text": CONTINUED}]}]
    for name, (both, alone) in renderings.items():
        for journal in JOURNAL_MODES:
            # The same text OpenAI's system message carries: the image is named, not dropped.
            text = "Match this logo.\n\n[image block]"
            assert both["openai"][journal][0] == {"role": "system", "content": text}, name
            assert both["anthropic"][journal]["system"] == text, name
            assert both["gemini"][journal]["systemInstruction"] == {"parts": [{"text": text}]}, name
            # An image alone is system text, sent with the `(continued)` turn a system-only view gets.
            assert alone["anthropic"][journal] == {"system": "[image block]", "messages": continued}, name
            assert alone["gemini"][journal] == {"systemInstruction": {"parts": [{"text": "[image block]"}]},
                                                "contents": [{"role": "user", "parts": [{"text": CONTINUED}]}]}, name


def view_of(conversation) -> dict:
    """The active view as the API answers it (GET /conversations/{id}/active)."""
    view = list_active(conversation.pk)
    handoff = {"kind": "system", "content": view.checkpoint.summary} if view.checkpoint else None
    return {"handoff": handoff, "items": [{"position": i.position, "message": i.as_json()} for i in view.page.items]}


@pytest.mark.django_db
def test_every_real_conversation_renders_alike_through_the_export_and_both_clients(capsys):
    build()
    load_demo(coding_turns=40)
    # Every fixture file, and every session inside the folders (Gemini CLI, Aider, OpenCode, Cline).
    for piece in containers.pieces_of_folder(FIX):
        if not piece.skipped:
            data = piece.data if piece.data is not None else piece.path.read_bytes()
            importer.import_text(data, namespace=f"fixture-{piece.name}"[:200], path=piece.name,
                                 sidecar=piece.sidecar)
    conversations = list(Conversation.objects.live().order_by("created_at", "id"))
    assert len(conversations) >= 15
    views = [view_of(c) for c in conversations]
    found, counts = differences(views)
    assert found == [], found[:3]
    # The export door itself (what a person downloads): the same body, but where the conversation
    # is exactly a document imported in that format, which comes back as it was.
    compared = 0
    for conversation, view in zip(conversations, views, strict=True):
        expected = python_renderings(view)
        for fmt, provider in (("openai-chat", "openai"), ("anthropic", "anthropic"), ("gemini", "gemini")):
            if ImportSource.objects.filter(conversation_id=conversation.pk, format=fmt).exists():
                continue  # a document imported in that format comes back as it was
            want = expected[provider]["drop"]
            try:
                got = json.loads("".join(export_stream(conversation.pk, fmt).chunks))
            except Exception as exc:  # NothingToSend before anything streams
                assert want == NOTHING and getattr(exc, "code", "") == "nothing_to_send", (conversation.title, fmt)
                continue
            if fmt == "anthropic":
                got = {k: v for k, v in got.items() if k not in ("model", "max_tokens")}
            assert got == want, (conversation.title, fmt)
            compared += 1
    assert compared >= 2 * len(conversations)
    with capsys.disabled():
        print(f"\nrender rules, real conversations: {counts}; {compared} exports compared")
