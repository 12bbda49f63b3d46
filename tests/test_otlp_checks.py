"""POST /v1/traces against a live server: the checks every door makes, and telemetry that is
never dropped in silence (spans whose messages were not captured still become rows, and the
answer's partialSuccess says what was not kept)."""

import json

import httpx
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from conversations.imports.models import SourceEntry
from tests.api_support import make_key
from tests.test_otlp_traces import (
    URL,
    assert_provider_valid,
    attr,
    chat_span,
    exporter_to,
    otel_conversations,
    request_of,
    rows,
)

pytestmark = pytest.mark.django_db(transaction=True)

SPAN = "resourceSpans.0.scopeSpans.0.spans.0"


@pytest.fixture
def send(live_server):
    key = make_key(["write"])
    with httpx.Client(base_url=live_server.url, timeout=30,
                      headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"}) as http:
        yield lambda body: http.post(URL, content=body if isinstance(body, bytes) else body.encode())


def with_span(**changes) -> str:
    span = chat_span()
    span.update(changes)
    return request_of(span).decode()


def raw(text: str, old: str, new: str) -> str:
    """The request with one value spelled as JSON allows but Python's json.dumps would not write."""
    assert old in text
    return text.replace(old, new, 1)


START = '"startTimeUnixNano": "1767225600000000000"'


# ---- refused whole, with 400 naming the field: what other doors refuse with 422 -------------


@pytest.mark.parametrize("body, field", [
    (raw(with_span(), START, '"startTimeUnixNano": 1e400'), f"{SPAN}.startTimeUnixNano"),
    (raw(with_span(), START, '"startTimeUnixNano": "1e400"'), f"{SPAN}.startTimeUnixNano"),
    (raw(with_span(), START, '"startTimeUnixNano": NaN'), f"{SPAN}.startTimeUnixNano"),
    (with_span(startTimeUnixNano="-5"), f"{SPAN}.startTimeUnixNano"),
    (with_span(endTimeUnixNano=str(2**70)), f"{SPAN}.endTimeUnixNano"),
    (with_span(endTimeUnixNano="1767225599000000000"), f"{SPAN}.endTimeUnixNano"),  # before its start
    (with_span(traceId="zz" * 16), f"{SPAN}.traceId"),
    (with_span(traceId="ab" * 5000), f"{SPAN}.traceId"),
    (with_span(spanId="00f067aa0ba902b7ff"), f"{SPAN}.spanId"),
    (with_span(parentSpanId="not hex at all!!"), f"{SPAN}.parentSpanId"),
    (with_span(name="chat \u0000"), f"{SPAN}.name"),
    (request_of(chat_span(conversation="conv\u00001")).decode(), f"{SPAN}.attributes.gen_ai.conversation.id"),
    (raw(request_of(chat_span(conversation="conv-X")).decode(), "conv-X", "conv-\\ud800"),
     f"{SPAN}.attributes.gen_ai.conversation.id"),
    (request_of(chat_span(conversation="conv\u200b1")).decode(), f"{SPAN}.attributes.gen_ai.conversation.id"),
    (request_of(chat_span(conversation="c" * 4097)).decode(), f"{SPAN}.attributes.gen_ai.conversation.id"),
    (request_of(chat_span(inputs=[{"role": "user", "parts": [{"type": "text", "content": "nul \u0000"}]}])
                ).decode(), f"{SPAN}.attributes.gen_ai.input.messages.0.parts.0.content"),
    (raw(request_of(chat_span(outputs=[{"role": "assistant", "parts": [{"type": "text", "content": "half Q"}]}])
                    ).decode(), "half Q", "half \\\\ud800"),
     f"{SPAN}.attributes.gen_ai.output.messages.0.parts.0.content"),
    (raw(request_of(chat_span(extra=[attr("region", "eu-X")])).decode(), "eu-X", "eu-\\udc00"),
     f"{SPAN}.attributes.region"),
])
def test_it_refuses_what_every_other_door_refuses_naming_the_field_and_writes_nothing(send, body, field):
    # The same span beside a good one: the request is refused whole, as a batch is at the API.
    doc = json.loads(body)
    doc["resourceSpans"][0]["scopeSpans"][0]["spans"].append(chat_span("0000000000000fff", conversation="other"))
    answer = send(json.dumps(doc, allow_nan=True) if "NaN" not in body and "1e400" not in body else body)
    assert answer.status_code == 400, answer.content
    assert answer.json()["details"] == [{"field": field}], answer.json()
    assert not otel_conversations() and not SourceEntry.objects.exists()


def test_ids_are_taken_in_any_case_and_kept_in_lowercase(send):
    span = chat_span(conversation=None, trace_id="4BF92F3577B34DA6A3CE929D0E0E4736")
    assert send(request_of(span).decode()).status_code == 200
    [conversation] = otel_conversations()
    assert conversation.external_id == "4bf92f3577b34da6a3ce929d0e0e4736"


def test_two_long_conversation_ids_sharing_their_first_200_characters_are_two_conversations(send):
    shared = "tenant-7/" + "x" * 191
    first, second = shared + "-alice", shared + "-bob"
    assert send(request_of(chat_span("0000000000000001", conversation=first)).decode()).status_code == 200
    assert send(request_of(chat_span("0000000000000002", conversation=second)).decode()).status_code == 200
    conversations = otel_conversations()
    assert len(conversations) == 2
    kept = {c.meta["otel"]["conversation_id"]: c for c in conversations}
    assert set(kept) == {first, second}  # whole, never cut
    assert all(c.external_id.startswith("sha256:") and len(c.external_id) == 71 for c in conversations)
    # The same id again lands in its own conversation.
    assert send(request_of(chat_span("0000000000000003", conversation=first)).decode()).status_code == 200
    assert len(rows(kept[first])) == 3 and len(rows(kept[second])) == 2  # its input known, its reply added


def test_an_id_spelled_like_a_digest_key_does_not_take_a_long_ids_conversation(send):
    long_id = "y" * 300
    import hashlib

    lookalike = "sha256:" + hashlib.sha256(long_id.encode()).hexdigest()
    assert send(request_of(chat_span("0000000000000001", conversation=long_id)).decode()).status_code == 200
    assert send(request_of(chat_span("0000000000000002", conversation=lookalike)).decode()).status_code == 200
    assert len(otel_conversations()) == 2


# ---- telemetry without content is never dropped in silence ----------------------------------


def uncaptured_chat_span(span_id: str, **more):
    """What the OpenAI instrumentation sends by default (no content variables set): a chat span
    with its model, usage and finish reason, no message."""
    span = chat_span(span_id, conversation=None, **more)
    span["attributes"] = [a for a in span["attributes"] if not a["key"].endswith("messages")] + [
        {"key": "gen_ai.response.finish_reasons", "value": {"arrayValue": {"values": [{"stringValue": "stop"}]}}}]
    return span


def test_a_model_call_without_its_messages_is_a_did_row_with_model_usage_and_timing(send):
    answer = send(request_of(uncaptured_chat_span("00000000000000c1")).decode())
    assert answer.status_code == 200, answer.content
    partial = answer.json()["partialSuccess"]
    assert partial["rejectedSpans"] == "0"  # a warning: kept, but without its messages
    assert "1 model call(s) came without their messages" in partial["errorMessage"]
    assert "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=SPAN_ONLY" in partial["errorMessage"]
    [conversation] = otel_conversations()
    [row] = rows(conversation)
    assert row["kind"] == "did"
    assert row["text"] == ("called gpt-x-2026 (12 input and 3 output tokens), which finished with stop; "
                           "its messages were not captured")
    assert row["meta"]["model"] == "gpt-x-2026"
    assert row["meta"]["usage"] == {"input_tokens": 12, "output_tokens": 3}
    assert row["meta"]["otel"]["content"] == "not captured"
    assert row["meta"]["otel"]["duration_ms"] == 1500.0
    assert SourceEntry.objects.get().uuid == "00000000000000c1"  # the span kept as it came
    assert_provider_valid(conversation)
    # Sent again: nothing added, and still said.
    assert send(request_of(uncaptured_chat_span("00000000000000c1")).decode()).status_code == 200
    assert len(rows(conversation)) == 1


def test_spans_that_are_not_model_calls_are_named_in_the_answer(send):
    agent = {"traceId": "4bf92f3577b34da6a3ce929d0e0e4736", "spanId": "00000000000000a0", "name": "invoke_agent x",
             "attributes": [attr("gen_ai.operation.name", "invoke_agent")]}
    answer = send(request_of(agent, chat_span()).decode())
    assert answer.status_code == 200
    assert answer.json()["partialSuccess"] == {
        "rejectedSpans": "0", "errorMessage": "spans that are not model calls were left out (1 invoke_agent)"}


def test_pydantic_ai_without_content_becomes_a_conversation_of_did_rows_with_tool_names(live_server):
    from pydantic_ai import Agent, InstrumentationSettings
    from pydantic_ai.capabilities.instrumentation import Instrumentation
    from pydantic_ai.models.test import TestModel

    key = make_key(["write"])
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    settings = InstrumentationSettings(tracer_provider=provider, include_content=False)
    agent = Agent(TestModel(), instructions="Answer briefly.", capabilities=[Instrumentation(settings=settings)])

    @agent.tool_plain
    def weather(city: str) -> str:
        return f"sunny in {city}"

    agent.run_sync("What is the weather?")
    exporter = exporter_to(live_server, key)
    exporter.export(memory.get_finished_spans())
    exporter.shutdown()
    provider.shutdown()

    [conversation] = otel_conversations()
    stored = rows(conversation)
    assert [r["kind"] for r in stored] == ["did", "did", "did"]
    assert stored[0]["text"].startswith("called test (54 input and 5 output tokens), which asked for weather")
    assert stored[0]["meta"]["tools_asked"] == [{"id": "pyd_ai_tool_call_id__weather", "name": "weather"}]
    assert stored[1]["text"] == ("ran the tool weather (call pyd_ai_tool_call_id__weather); "
                                 "its arguments and result were not captured")
    assert all(r["meta"]["otel"]["content"] == "not captured" for r in stored)
    assert all(r["meta"]["model"] == "test" and r["meta"]["usage"] for r in (stored[0], stored[2]))
    assert "null" not in json.dumps([r["text"] for r in stored])
    assert_provider_valid(conversation)
