"""What the rendering tests share (tests/test_render_rules.py, tests/test_typescript_client.py):
views as agents' loops leave them, and each renderer's output for a view — the server's
(formats/requests.py), the Python client's and the TypeScript client's — in one shape:
{provider: {journal mode: body, or "nothing_to_send"}}."""

import json
import random
import subprocess

from conversations.errors import NothingToSend as ServerNothing
from conversations.formats import requests
from memoryui_client import NothingToSend, to_anthropic_messages, to_gemini_contents, to_openai_messages
from tests.typescript_support import TS, tools

NOTHING = "nothing_to_send"
JOURNAL_MODES = ("drop", "text")
PROVIDERS = ("openai", "anthropic", "gemini")

IDS = ("toolu_", "call_", "fc:", "call.", "x")
JOURNAL = ("note", "thought", "heard", "said", "did", "woke")
BLOCKS = ({"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}},
          {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}},
          {"type": "image_url", "image_url": {"url": "https://example.com/b.png"}},
          {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,/9j/4AAQ"}},
          {"type": "document", "source": {"type": "url", "url": "https://example.com/c.pdf"}},
          {"type": "file_ref", "url": "https://example.com/d.csv", "media_type": "text/csv"})


def generated_view(rng: random.Random) -> dict:
    """A view as an agent's loop leaves them: user turns, text replies, replies with parallel
    calls (one row, or one row per call as older imports kept them), their results in any
    order (some errors, some missing, some stray), journal rows anywhere, content blocks."""
    rows = []
    for _ in range(rng.randint(1, 9)):
        shape = rng.choice(["user", "user-blocks", "text", "calls", "calls", "journal", "system", "stray"])
        if shape == "user":
            rows.append({"kind": "user", "content": rng.choice(["Go on.", "Refund order 7", "Why?  "])})
        elif shape == "user-blocks":
            rows.append({"kind": "user", "content": [{"type": "text", "text": "See this:"}, rng.choice(BLOCKS)]})
        elif shape == "text":
            rows.append({"kind": "assistant", "content": rng.choice(["Done.", "Checking.\n", "Here it is.  "])})
        elif shape == "journal":
            rows.append({"kind": rng.choice(JOURNAL), "text": "an entry of the agent's own"})
        elif shape == "system":
            rows.append({"kind": "system", "content": rng.choice(
                ["Be brief.", [{"type": "text", "text": "Match this:"}, rng.choice(BLOCKS)], [rng.choice(BLOCKS)]])})
        elif shape == "stray":
            rows.append({"kind": "tool", "tool_call_id": "gone-1", "name": "lookup", "content": "late"})
        else:
            prefix = rng.choice(IDS)
            ids = [f"{prefix}{rng.randint(0, 10**6)}-{i}" for i in range(rng.randint(1, 3))]
            calls = [{"id": i, "name": "lookup", "arguments": rng.choice(
                [{"n": n, "q": "ä"}, '{"n": 1}', "not json", "NaN", '{"x": 1e999}', [1, 2]])}
                for n, i in enumerate(ids)]
            text = rng.choice([None, "Let me look.", [{"type": "text", "text": "Looking."}]])
            if rng.random() < 0.5:
                rows.append({"kind": "assistant", "tool_calls": calls, **({"content": text} if text else {})})
            else:
                rows += ([{"kind": "assistant", "content": text}] if text else []) + [
                    {"kind": "assistant", "tool_calls": [c]} for c in calls]
            answered = [i for i in ids if rng.random() < 0.85]
            rng.shuffle(answered)
            for i in answered:
                if rng.random() < 0.2:
                    rows.append({"kind": rng.choice(JOURNAL), "text": "between call and result"})
                content = rng.choice(["ok", [{"type": "text", "text": "ok"}, rng.choice(BLOCKS)]])
                rows.append({"kind": "tool", "tool_call_id": i, "content": content,
                             **({"is_error": True} if rng.random() < 0.2 else {})})
    earlier = {"kind": "system", "content": "Earlier: the customer asked about order 7."}
    handoff = earlier if rng.random() < 0.4 else None
    return {"handoff": handoff, "items": [{"position": p, "message": m} for p, m in enumerate(rows)]}


def degenerate_views() -> list[dict]:
    """Views with little or nothing to send: empty, journal rows only, a handoff only, system
    only (text, or an image alone, which is sent as `[image block]` system text)."""
    handoff = {"kind": "system", "content": "Earlier: the customer asked about order 7."}

    def view(rows, with_handoff=False):
        return {"handoff": handoff if with_handoff else None,
                "items": [{"position": p, "message": m} for p, m in enumerate(rows)]}

    journal = [{"kind": "note", "text": "an entry of the agent's own"}, {"kind": "thought", "text": "hmm"}]
    return [view([]), view(journal), view([], True), view(journal, True),
            view([{"kind": "system", "content": "Be brief."}]),
            view([{"kind": "system", "content": [BLOCKS[0]]}]),
            view([{"kind": "system", "content": [BLOCKS[1]]}] + journal),
            view([{"kind": "assistant", "content": "Hello."}]),
            view([{"kind": "tool", "tool_call_id": "gone", "content": "late"}])]


def _or_nothing(make, journal: str, *nothing):
    try:
        return make(journal)
    except nothing:
        return NOTHING


def python_renderings(view: dict) -> dict:
    makers = {"openai": lambda j: to_openai_messages(view, journal=j),
              "anthropic": lambda j: to_anthropic_messages(view, journal=j),
              "gemini": lambda j: to_gemini_contents(view, journal=j)}
    return {p: {j: _or_nothing(make, j, NothingToSend) for j in JOURNAL_MODES} for p, make in makers.items()}


def server_renderings(view: dict) -> dict:
    """What the server's exports render for the same view (their bodies without the model and
    max_tokens an Anthropic export adds)."""
    handoff = view["handoff"]["content"] if view.get("handoff") else None
    rows = [(item["message"]["kind"], item["message"]) for item in view["items"]]
    makers = {"openai": lambda j: list(requests.openai_body(rows, handoff, journal=j)),
              "anthropic": lambda j: requests.anthropic_body(rows, handoff, journal=j),
              "gemini": lambda j: requests.gemini_body(rows, handoff, journal=j)}
    return {p: {j: _or_nothing(make, j, ServerNothing) for j in JOURNAL_MODES} for p, make in makers.items()}


def typescript_renderings(views: list[dict]) -> list[dict]:
    """The TypeScript client's renderings (clients/typescript/test/render-views.mjs), built first."""
    path = TS / "build" / "views.json"
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(views))
    node, _ = tools()
    done = subprocess.run([node, "test/render-views.mjs", str(path)], cwd=TS, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)
