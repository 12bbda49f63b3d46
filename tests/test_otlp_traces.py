"""POST /v1/traces: OpenTelemetry GenAI spans from real exporters become conversations."""

import json
import zlib

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from conversations import reads
from conversations.imports.models import SourceEntry
from conversations.models import Conversation
from tests.api_support import make_key
from tests.provider_oracle import invalid_renderings

URL = "/v1/traces"


def rows(conversation) -> list[dict]:
    return [json.loads(item.raw) for item in reads.list_messages(conversation.pk).items]


def assert_provider_valid(conversation):
    view = reads.list_active(conversation.pk)
    messages = [json.loads(item.raw) for item in view.page.items]
    handoff = view.checkpoint.summary if view.checkpoint else None
    assert invalid_renderings(handoff, messages) == {}


def otel_conversations():
    return list(Conversation.objects.filter(namespace="otel").order_by("created_at"))


# ---- a hand-built span, for the JSON encoding and the hostile cases ----------------------------

def attr(key, value):
    if isinstance(value, bool):
        return {"key": key, "value": {"boolValue": value}}
    if isinstance(value, int):
        return {"key": key, "value": {"intValue": str(value)}}
    return {"key": key, "value": {"stringValue": value}}


def chat_span(span_id="00f067aa0ba902b7", *, trace_id="4bf92f3577b34da6a3ce929d0e0e4736", conversation="conv-1",
              inputs=None, outputs=None, extra=()):
    inputs = inputs if inputs is not None else [{"role": "user", "parts": [{"type": "text", "content": "Hi?"}]}]
    outputs = outputs if outputs is not None else [
        {"role": "assistant", "parts": [{"type": "text", "content": "Hello."}]}]
    attributes = [attr("gen_ai.operation.name", "chat"), attr("gen_ai.request.model", "gpt-x"),
                  attr("gen_ai.response.model", "gpt-x-2026"), attr("gen_ai.usage.input_tokens", 12),
                  attr("gen_ai.usage.output_tokens", 3), attr("gen_ai.input.messages", json.dumps(inputs)),
                  attr("gen_ai.output.messages", json.dumps(outputs)), attr("server.address", "models.example"),
                  *extra]
    if conversation:
        attributes.append(attr("gen_ai.conversation.id", conversation))
    return {"traceId": trace_id, "spanId": span_id, "name": "chat gpt-x", "kind": 3,
            "startTimeUnixNano": "1767225600000000000", "endTimeUnixNano": "1767225601500000000",
            "attributes": attributes}


def request_of(*spans) -> bytes:
    return json.dumps({"resourceSpans": [{"resource": {"attributes": [attr("service.name", "bot")]},
                                          "scopeSpans": [{"scope": {"name": "t"}, "spans": list(spans)}]}]}).encode()


@pytest.fixture
def key(db):
    return make_key(["write"])


def post(client, body, key, content_type="application/json", **headers):
    return client.post(URL, data=body, content_type=content_type,
                       headers={"Authorization": f"Bearer {key}", **headers})


# ---- the real exporter and the real framework ------------------------------------------------

def exporter_to(live_server, key):
    return OTLPSpanExporter(endpoint=live_server.url + URL, headers={"Authorization": f"Bearer {key}"}, timeout=30)


@pytest.mark.django_db(transaction=True)
def test_it_takes_the_sdk_exporters_spans_and_a_resent_batch_adds_nothing(live_server):
    key = make_key(["write"])
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("agent")
    with tracer.start_as_current_span("invoke_agent support"):
        with tracer.start_as_current_span("chat gpt-x") as span:
            span.set_attribute("gen_ai.operation.name", "chat")
            span.set_attribute("gen_ai.request.model", "gpt-x")
            span.set_attribute("gen_ai.usage.input_tokens", 40)
            span.set_attribute("gen_ai.usage.output_tokens", 7)
            span.set_attribute("gen_ai.input.messages", json.dumps(
                [{"role": "user", "parts": [{"type": "text", "content": "Where is order 7?"}]}]))
            span.set_attribute("gen_ai.output.messages", json.dumps(
                [{"role": "assistant", "parts": [{"type": "tool_call", "id": "call_1", "name": "track",
                                                  "arguments": {"order": 7}}]}]))
            span.set_attribute("deployment.region", "eu")
    spans = memory.get_finished_spans()
    exporter = exporter_to(live_server, key)
    assert exporter.export(spans) == SpanExportResult.SUCCESS
    assert exporter.export(spans) == SpanExportResult.SUCCESS  # sent again: nothing new
    exporter.shutdown()

    [conversation] = otel_conversations()
    assert conversation.external_id == format(spans[0].context.trace_id, "032x")  # no conversation id: the trace
    assert conversation.title == "Where is order 7?"
    stored = rows(conversation)
    assert [r["kind"] for r in stored] == ["user", "assistant"]
    reply = stored[1]
    assert reply["tool_calls"] == [{"id": "call_1", "name": "track", "arguments": {"order": 7}}]
    assert reply["meta"]["model"] == "gpt-x"
    assert reply["meta"]["usage"] == {"input_tokens": 40, "output_tokens": 7}
    assert reply["meta"]["otel"]["attributes"]["deployment.region"] == "eu"
    assert reply["meta"]["otel"]["duration_ms"] >= 0
    assert SourceEntry.objects.count() == 1  # the model call, kept as it came; the agent span is left out


@pytest.mark.django_db(transaction=True)
def test_it_turns_pydantic_ais_own_instrumentation_into_a_conversation(live_server):
    from pydantic_ai import Agent, InstrumentationSettings
    from pydantic_ai.capabilities.instrumentation import Instrumentation
    from pydantic_ai.models.test import TestModel

    key = make_key(["write"])
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter_to(live_server, key)))
    agent = Agent(TestModel(), instructions="Answer briefly.",
                  capabilities=[Instrumentation(settings=InstrumentationSettings(tracer_provider=provider))])

    @agent.tool_plain
    def weather(city: str) -> str:
        return f"sunny in {city}"

    first = agent.run_sync("What is the weather?")
    agent.run_sync("And tomorrow?", message_history=first.all_messages())
    # Closes the exporter's kept-alive connection, and with it the server thread holding a database connection.
    provider.shutdown()

    [conversation] = otel_conversations()
    stored = rows(conversation)
    assert [r["kind"] for r in stored] == ["system", "user", "assistant", "tool", "assistant", "user", "assistant"]
    assert stored[0]["content"] == "Answer briefly."
    assert stored[1]["content"] == "What is the weather?"
    assert stored[2]["tool_calls"][0]["name"] == "weather"
    assert stored[3]["tool_call_id"] == stored[2]["tool_calls"][0]["id"]
    assert stored[3]["content"] == "sunny in a"
    assert stored[5]["content"] == "And tomorrow?"
    assert all(r["meta"]["model"] == "test" for r in stored if r["kind"] == "assistant")
    assert all(r["meta"]["usage"]["output_tokens"] > 0 for r in stored if r["kind"] == "assistant")
    assert conversation.external_id  # gen_ai.conversation.id, kept across the two runs
    assert_provider_valid(conversation)


# ---- the JSON encoding ---------------------------------------------------------------------


def test_it_takes_otlp_json_keyed_by_the_conversation_id(client, key):
    first = chat_span("0000000000000001")
    second = chat_span("0000000000000002", inputs=[
        {"role": "user", "parts": [{"type": "text", "content": "Hi?"}]},
        {"role": "assistant", "parts": [{"type": "text", "content": "Hello."}]},
        {"role": "user", "parts": [{"type": "text", "content": "Bye?"}]}],
        outputs=[{"role": "assistant", "parts": [{"type": "text", "content": "Bye."}]}])
    response = post(client, request_of(first, second), key)
    assert response.status_code == 200, response.content
    assert response.json() == {}
    assert response["Cache-Control"] == "no-store"
    [conversation] = otel_conversations()
    assert conversation.external_id == "conv-1"
    assert [(r["kind"], r["content"]) for r in rows(conversation)] == [
        ("user", "Hi?"), ("assistant", "Hello."), ("user", "Bye?"), ("assistant", "Bye.")]
    assert rows(conversation)[1]["meta"]["model"] == "gpt-x-2026"
    assert rows(conversation)[1]["meta"]["otel"]["attributes"] == {"gen_ai.operation.name": "chat",
                                                                   "server.address": "models.example"}
    # The same batch again, and again gzipped: nothing added.
    assert post(client, request_of(first, second), key).status_code == 200
    assert post(client, zlib.compress(request_of(second), wbits=31), key, **{"Content-Encoding": "gzip"}
                ).status_code == 200
    assert len(rows(conversation)) == 4
    assert_provider_valid(conversation)


def test_it_takes_the_older_per_event_form(client, key):
    span = chat_span("0000000000000003", inputs=[], outputs=[])
    span["attributes"] = [a for a in span["attributes"] if not a["key"].endswith("messages")]
    span["events"] = [
        {"name": "gen_ai.user.message", "attributes": [attr("content", "Refund my order")]},
        {"name": "gen_ai.choice", "attributes": [attr("message", json.dumps(
            {"content": "", "tool_calls": [{"id": "c1", "function": {"name": "refund", "arguments": "{\"o\":1}"}}]}))]},
    ]
    assert post(client, request_of(span), key).status_code == 200
    [conversation] = otel_conversations()
    stored = rows(conversation)
    assert [r["kind"] for r in stored] == ["user", "assistant"]
    assert stored[1]["tool_calls"] == [{"id": "c1", "name": "refund", "arguments": {"o": 1}}]


def test_it_counts_a_span_whose_messages_do_not_decode_as_rejected_and_writes_the_rest(client, key):
    bad = chat_span("0000000000000009")
    bad["attributes"] = [attr("gen_ai.input.messages", "not json"), attr("gen_ai.conversation.id", "conv-1")]
    response = post(client, request_of(bad, chat_span("000000000000000a")), key)
    assert response.status_code == 200
    assert response.json()["partialSuccess"]["rejectedSpans"] == "1"
    assert "gen_ai.input.messages" in response.json()["partialSuccess"]["errorMessage"]
    assert len(rows(otel_conversations()[0])) == 2


def test_it_answers_protobuf_with_an_export_response(client, key):
    from google.protobuf.json_format import Parse
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    doc = json.loads(request_of(chat_span()))
    span = doc["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    span["traceId"] = "S/kvNXezTaajzpKdDg5HNg=="  # proto3 JSON's bytes are base64
    span["spanId"] = "APBnqgupArc="
    body = Parse(json.dumps(doc), ExportTraceServiceRequest()).SerializeToString()
    response = post(client, body, key, content_type="application/x-protobuf")
    assert response.status_code == 200
    assert response["Content-Type"] == "application/x-protobuf"
    ExportTraceServiceResponse().ParseFromString(response.content)
    assert SourceEntry.objects.get().uuid == "00f067aa0ba902b7"  # hex, as in OTLP/JSON


# ---- refusals: clear 4xx, never a 500, nothing half-written ---------------------------------


@pytest.mark.parametrize("body, content_type, status", [
    (b"\xff\x00garbage", "application/x-protobuf", 400),
    (b"{not json", "application/json", 400),
    (b"[1, 2]", "application/json", 400),
    (json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [{"spanId": "01", "attributes": [{"key": 5}]}]}]}]}
                ).encode(), "application/json", 400),
    (json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [
        {"spanId": "01", "attributes": [{"key": "n", "value": {"intValue": "many"}}]}]}]}]}).encode(),
     "application/json", 400),
    (b"hello", "text/plain", 415),
])
def test_it_refuses_bad_bodies_with_a_status(client, key, body, content_type, status):
    response = post(client, body, key, content_type=content_type)
    assert response.status_code == status, response.content
    assert response["Cache-Control"] == "no-store"
    assert not otel_conversations()


def test_it_refuses_a_huge_attribute_naming_it(client, key, settings):
    settings.MEMORYUI_OTLP_MAX_ATTRIBUTE_BYTES = 1000
    response = post(client, request_of(chat_span(extra=[attr("blob", "x" * 2000)])), key)
    assert response.status_code == 413
    assert "blob" in response.json()["message"]
    assert not otel_conversations()


def test_it_refuses_too_many_spans_and_too_large_a_body(client, key, settings):
    settings.MEMORYUI_OTLP_MAX_SPANS = 2
    spans = [chat_span(f"{i:016x}") for i in range(3)]
    assert post(client, request_of(*spans), key).status_code == 413
    settings.MEMORYUI_OTLP_MAX_BYTES = 100
    response = post(client, request_of(chat_span()), key)
    assert response.status_code == 413
    assert response.json()["details"] == [{"field": "body"}]
    assert post(client, zlib.compress(b"{" * 10_000, wbits=31), key, **{"Content-Encoding": "gzip"}
                ).status_code == 413  # a small zip that unpacks large
    assert not otel_conversations()


def test_it_asks_for_a_key_with_the_write_scope(client, db):
    body = request_of(chat_span())
    assert client.post(URL, data=body, content_type="application/json").status_code == 401
    assert post(client, body, "mui_wrong").status_code == 401
    assert post(client, body, make_key(["read"], name="reader")).status_code == 403
    response = post(client, body, "k", content_type="application/x-protobuf")
    assert response.status_code == 401 and response["Content-Type"] == "application/x-protobuf"
    assert client.get(URL).status_code == 405
    assert not otel_conversations()


def _deep(levels: int) -> dict:
    value = {"stringValue": "x"}
    for _ in range(levels):
        value = {"arrayValue": {"values": [value]}}
    return value


@pytest.mark.parametrize("span", [
    {"spanId": 7, "attributes": []},
    {"spanId": "01", "traceId": ["x"], "attributes": [attr("gen_ai.input.messages", "[" * 5000 + "]" * 5000)]},
    {"spanId": "02", "attributes": [{"key": "deep", "value": _deep(300)}, attr("gen_ai.output.messages", "[]")]},
    {"spanId": "03", "events": "nope", "startTimeUnixNano": "99999999999999999999999", "attributes": [
        attr("gen_ai.output.messages", json.dumps([{"role": "assistant", "parts": "x"}]))]},
    {"spanId": "04", "attributes": [attr("gen_ai.output.messages", json.dumps([[1], {"role": "user", "parts": [
        {"type": "tool_call_response", "id": None, "response": {"a": [1]}}]}]))]},
    {"spanId": "05", "traceId": "ab", "attributes": [attr("gen_ai.input.messages", json.dumps(
        [{"role": "user", "parts": [{"type": "text", "content": "nul \u0000 here"}]}]))]},
])
def test_hostile_spans_get_an_answer_and_never_a_500(client, key, span):
    response = post(client, request_of(span), key)
    assert response.status_code in (200, 400, 413), response.content
    assert response["Cache-Control"] == "no-store"


def test_an_auditor_reads_the_traced_conversation_with_its_model_and_usage(client, key):
    from django.urls import reverse

    from tests.api_support import login_as

    assert post(client, request_of(chat_span()), key).status_code == 200
    [conversation] = otel_conversations()
    login_as(client, "auditor")
    page = client.get(reverse("conversation", args=[conversation.pk]))
    assert page.status_code == 200
    assert "Hello." in page.content.decode() and "gpt-x-2026" in page.content.decode()


@pytest.mark.django_db(transaction=True)
def test_the_same_batch_sent_by_four_exporters_at_once_is_written_once(live_server):
    import threading
    import time

    import httpx

    key = make_key(["write"])
    body = request_of(chat_span("00000000000000aa"), chat_span("00000000000000bb", inputs=[
        {"role": "user", "parts": [{"type": "text", "content": "Hi?"}]},
        {"role": "assistant", "parts": [{"type": "text", "content": "Hello."}]},
        {"role": "user", "parts": [{"type": "text", "content": "More?"}]}]))
    statuses, start = [], threading.Barrier(4)

    def send():
        start.wait()
        deadline = time.monotonic() + 60
        with httpx.Client(timeout=30) as http:
            while True:  # as an OTLP exporter does: 503 is retryable
                response = http.post(live_server.url + URL, content=body, headers={
                    "Authorization": f"Bearer {key}", "Content-Type": "application/json"})
                if response.status_code != 503 or time.monotonic() > deadline:
                    statuses.append(response.status_code)
                    return
                time.sleep(0.05)

    threads = [threading.Thread(target=send) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert statuses == [200] * 4
    [conversation] = otel_conversations()
    assert [r["content"] for r in rows(conversation)] == ["Hi?", "Hello.", "More?", "Hello."]
    assert SourceEntry.objects.count() == 2
