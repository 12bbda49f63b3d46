"""Gemini's generateContent request body (its REST form) from the active view: the `gemini`
export. The rules are the other providers' (formats/requests.py): the handoff and system text
as `systemInstruction`, `user` and `model` turns, a reply's calls as `functionCall` parts
answered by `functionResponse` parts matched by name and id, thoughts and the rest of the
journal left out unless asked for. The model is named in the request's address, not its body."""

import json

from . import requests


def render(active_rows, handoff: str | None, *, journal: str = "drop"):
    rows = list(active_rows)
    yield json.dumps(requests.gemini_body(rows, handoff, journal=journal), ensure_ascii=False, indent=1) + "\n"
