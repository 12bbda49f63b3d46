"""A session adapter's conditional append that other writers keep beating is retried
with jittered, growing waits until `conflict_deadline`, then raises the client's typed
`Conflict` (`entries_conflict`); nothing of the batch is stored twice or half."""

import pytest

from conversations.imports import sessions
from memoryui_client import Conflict, Retries
from memoryui_client.integrations import _loop
from memoryui_client.integrations.openai_agents import MemoryuiSession
from tests.api_support import make_key
from tests.claude_sdk_support import run_async

pytestmark = pytest.mark.django_db(transaction=True)

FAST = Retries(attempts=4, backoff=0.01, max_backoff=0.05)


def test_it_retries_with_growing_jittered_waits_then_raises_the_conflict_at_the_deadline(live_server, monkeypatch):
    key = make_key(["read", "write"], name="deadline")
    waits = []

    async def stale(self):  # a writer that always continues from a count another writer changed
        self._stream = {"key": None, "entries": 99}
        return 99

    monkeypatch.setattr(MemoryuiSession, "_held", stale)
    session = MemoryuiSession("beaten", url=live_server.url, api_key=key, retries=FAST, conflict_deadline=0.5)
    original_wait = _loop.ConflictBackoff.wait

    def spy(self):
        wait = original_wait(self)
        waits.append(wait)
        return wait

    monkeypatch.setattr(_loop.ConflictBackoff, "wait", spy)

    async def run():
        try:
            with pytest.raises(Conflict) as beaten:
                await session.add_items([{"role": "user", "content": "never stored"}])
        finally:
            await session.close()
        return beaten.value

    error = run_async(run())
    assert error.code == "entries_conflict" and error.field == "expected_entries"
    assert len(waits) >= 3 and waits[-1] is None and all(0 <= w <= 2.0 for w in waits[:-1])
    items, _ = sessions.active_items(namespace="openai-agents", session_id="beaten")
    assert items == []


def test_the_waits_grow_are_jittered_and_stop_at_the_deadline():
    now = [0.0]
    backoff = _loop.ConflictBackoff(3.0, clock=lambda: now[0])
    caps, seen = [0.05 * 2 ** i for i in range(6)], []
    for cap in caps:
        wait = backoff.wait()
        if wait is None:
            break
        assert 0 <= wait <= min(cap, 2.0)
        seen.append(wait)
        now[0] += wait
    assert len(set(seen)) == len(seen)  # jittered: no two the same
    now[0] = 3.0
    assert backoff.wait() is None  # past the deadline: the caller raises
    assert _loop.CONFLICT_DEADLINE == 30.0
