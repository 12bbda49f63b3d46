"""The LangGraph checkpointer kept in memoryui (clients/python, `[langgraph]` extra),
against a live server: LangGraph's own conformance suite, unmodified, on the sync-free
async surface; then a real tool-calling `StateGraph` on LangChain's fake chat model
(no network) run, interrupted, resumed and replayed from an earlier checkpoint, read
back as the conversation and the fork a person sees."""

import pytest
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import Capability

from memoryui_client import Retries
from memoryui_client.integrations.langgraph import MemoryuiSaver
from tests.api_support import make_key
from tests.claude_sdk_support import run_async

pytestmark = pytest.mark.django_db(transaction=True)

FAST = Retries(attempts=4, backoff=0.01, max_backoff=0.05)


@pytest.fixture
def key():
    return make_key(["read", "write"], name="langgraph")


def test_it_passes_the_langgraph_checkpoint_conformance_suite_with_every_capability(live_server, key):
    @checkpointer_test(name="MemoryuiSaver")
    async def memoryui_saver():
        saver = MemoryuiSaver(url=live_server.url, api_key=key, retries=FAST)
        yield saver
        await saver.aclose()

    report = run_async(validate(memoryui_saver))
    failures = {name: result.failures for name, result in report.results.items() if not result.passed}
    assert report.passed_all_base(), failures
    # Every extended capability is implemented, so each must have run and passed too.
    for capability in Capability:
        result = report.results[capability.value]
        assert result.passed is True and result.tests_passed > 0 and not result.tests_failed, (capability, failures)
    print({name: (r.tests_passed, r.tests_failed) for name, r in report.results.items()})
