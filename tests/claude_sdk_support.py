"""What the Claude Agent SDK tests share: a session laid out on disk as Claude Code keeps
it (~/.claude/projects/<project>/<session>.jsonl, its subagents beside it), and stores
against the live server that are closed afterwards."""

import asyncio
import json
import threading
import uuid
from pathlib import Path

from conversations.frameworks.samples import ClaudeSession
from memoryui_client import Retries
from memoryui_client.integrations.claude import MemoryuiSessionStore

FAST = Retries(attempts=4, backoff=0.01, max_backoff=0.05)


def run_async(coroutine, timeout: float = 300):
    """asyncio.run in a thread of its own (Playwright's sync API may hold an event loop in
    the test's thread); returns the result or raises what the coroutine raised."""
    out: dict = {}

    def target():
        try:
            out["result"] = asyncio.run(coroutine)
        except BaseException as exc:  # handed to the test's thread
            out["error"] = exc

    thread = threading.Thread(target=target)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        raise TimeoutError(f"the coroutine ran over {timeout} s")
    if "error" in out:
        raise out["error"]
    return out["result"]


def write_session_files(config_dir: Path, session: ClaudeSession) -> Path:
    """The session under `config_dir`/projects as Claude Code writes it; returns the main file."""
    project = config_dir / "projects" / session.project_key
    project.mkdir(parents=True, exist_ok=True)
    main = project / f"{session.session_id}.jsonl"
    main.write_text("".join(json.dumps(e, ensure_ascii=False) + "\n" for e in session.entries))
    for subpath, entries in session.subagents.items():
        path = project / session.session_id / f"{subpath}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(json.dumps(e, ensure_ascii=False) + "\n" for e in entries))
        meta = session.subagent_meta.get(subpath)
        if meta is not None:
            path.with_name(path.name[: -len(".jsonl")] + ".meta.json").write_text(json.dumps(meta))
    return main


class Stores:
    """Makes stores on one server, each in its own namespace unless told otherwise; closes them all."""

    def __init__(self, url: str, key: str):
        self.url, self.key = url, key
        self.made: list[MemoryuiSessionStore] = []

    def __call__(self, *, prefix: str | None = None, **kw) -> MemoryuiSessionStore:
        prefix = f"t-{uuid.uuid4().hex[:10]}/" if prefix is None else prefix
        store = MemoryuiSessionStore(self.url, api_key=self.key, namespace_prefix=prefix,
                                     retries=kw.pop("retries", FAST), **kw)
        self.made.append(store)
        return store

    async def close(self):
        """Close the stores used in this event loop (call it at the end of each test's run)."""
        for store in self.made:
            await store.aclose()
        self.made = []
