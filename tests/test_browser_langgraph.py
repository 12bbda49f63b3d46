"""A person reads a LangGraph thread kept by MemoryuiSaver: the tool-calling run as rows,
and the replay from an earlier checkpoint as a fork in the lineage.

Saves docs/screenshots/langgraph-thread.png and langgraph-fork.png, which the closing
note of the LangGraph issue shows.
"""

from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from conversations.models import Conversation
from conversations.roles import AUDITOR
from memoryui_client.integrations.langgraph import MemoryuiSaver
from tests.api_support import make_key
from tests.helpers import unfold
from tests.test_langgraph_saver import FAST, weather_agent

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SHOTS = Path(__file__).resolve().parent.parent / "docs" / "screenshots"


def test_an_auditor_reads_a_langgraph_thread_and_its_time_travel_fork(live_server, logged_in_page):
    saver = MemoryuiSaver(url=live_server.url, api_key=make_key(["read", "write"], name="langgraph"), retries=FAST)
    call = {"id": "call_paris", "name": "get_weather", "args": {"city": "Paris"}, "type": "tool_call"}
    graph = weather_agent(saver, [
        AIMessage(content="Let me check the weather service.", tool_calls=[call], id="ai-1"),
        AIMessage(content="It is 14 °C in Paris, with light rain.", id="ai-2"),
        AIMessage(content="Paris: 14 °C and light rain. Take an umbrella.", id="ai-3"),
    ])
    config = {"configurable": {"thread_id": "weather-42"}}
    graph.invoke({"messages": [HumanMessage("What is the weather in Paris?", id="h-1")]}, config)
    graph.invoke(None, config)  # resume past the interrupt before the tool
    before_answer = next(s for s in graph.get_state_history(config)
                         if s.next == ("agent",) and len(s.values["messages"]) == 3)
    graph.invoke(None, before_answer.config)  # time travel: the model answers again from there
    saver.close()
    thread = Conversation.objects.get(namespace="langgraph", meta__langgraph__thread_id="weather-42", parent_id=None)
    fork = Conversation.objects.get(parent_id=thread.pk)

    page = logged_in_page(AUDITOR, f"/conversations/{thread.pk}/", username="iris")
    page.set_viewport_size({"width": 1400, "height": 1300})
    page.evaluate("() => new Promise(done => requestAnimationFrame(() => requestAnimationFrame(done)))")

    record = page.locator("#record").inner_text()
    for seen in ("What is the weather in Paris?", "get_weather", "Paris: 14 °C, light rain",
                 "It is 14 °C in Paris, with light rain."):
        assert seen in record
    unfold(page, "#conv-panels")
    tree = page.locator(".fork-tree").inner_text()
    assert "at #2" in tree and "replayed from" in tree
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / "langgraph-thread.png"), full_page=True)

    page.goto(f"{live_server.url}/conversations/{fork.pk}/")
    assert "at #2" in page.locator("nav.crumbs").inner_text()
    page.evaluate("() => new Promise(done => requestAnimationFrame(() => requestAnimationFrame(done)))")
    assert "Take an umbrella." in page.locator("#record").inner_text()
    page.screenshot(path=str(SHOTS / "langgraph-fork.png"), full_page=True)
