"""OTLP/HTTP trace requests read and checked: protobuf and OTLP/JSON into one shape, every
span's ids, times, names and attributes checked before anything is written (conversations/
imports/otlp.py maps the spans it returns to rows)."""

import base64
import json
import re
from dataclasses import dataclass

from conversations.errors import InvalidInput
from conversations.formats.base import dumps
from conversations.params import check_text, check_tree

IDS = {"traceId": 32, "spanId": 16, "parentSpanId": 16}
_HEX = re.compile(r"[0-9a-f]*")
NANOS_MAX = 2**64 - 1


class OtlpError(InvalidInput):
    """Data an OTLP client sent that cannot be taken (400), or too much of it (413)."""

    def __init__(self, message: str, *, field: str | None = None, status: int = 400):
        super().__init__(message, field=field)
        self.status = status


@dataclass
class Limits:
    spans: int = 1000
    attribute_bytes: int = 256 * 1024


def decode_protobuf(body: bytes) -> dict:
    """An ExportTraceServiceRequest in protobuf, as its OTLP/JSON form (hex ids)."""
    from google.protobuf.json_format import MessageToDict
    from google.protobuf.message import DecodeError
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    request = ExportTraceServiceRequest()
    try:
        request.ParseFromString(body)
    except (DecodeError, ValueError, RecursionError) as exc:
        raise OtlpError(f"the body is not an ExportTraceServiceRequest in protobuf: {exc}", field="body") from None
    doc = MessageToDict(request)
    for rs in doc.get("resourceSpans", []):
        for ss in rs.get("scopeSpans", []):
            for span in ss.get("spans", []):
                for name in ("traceId", "spanId", "parentSpanId"):
                    if span.get(name):
                        span[name] = base64.b64decode(span[name]).hex()
    return doc


def decode_json(body: bytes) -> dict:
    try:
        doc = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise OtlpError(f"the body is not OTLP/JSON: {exc}", field="body") from None
    if not isinstance(doc, dict):
        raise OtlpError("the body must be a JSON object with resourceSpans", field="resourceSpans")
    return doc


def _value(v, where: str):
    """An OTLP AnyValue as plain JSON."""
    if not isinstance(v, dict):
        raise OtlpError(f"{where} must be an AnyValue object", field=where)
    if "stringValue" in v:
        return v["stringValue"]
    if "intValue" in v:
        try:
            return int(v["intValue"])
        except (TypeError, ValueError):
            raise OtlpError(f"{where}.intValue must be an integer (a string in OTLP/JSON)", field=where) from None
    if "doubleValue" in v:
        return v["doubleValue"]
    if "boolValue" in v:
        return bool(v["boolValue"])
    if "arrayValue" in v:
        return [_value(x, where) for x in (v["arrayValue"] or {}).get("values", [])]
    if "kvlistValue" in v:
        return attributes((v["kvlistValue"] or {}).get("values", []), where)
    if "bytesValue" in v:
        return v["bytesValue"]
    return None


def checked(check, *args, **kwargs):
    """A text check of params (NUL, unpaired surrogates), as OTLP's 400 naming the field."""
    try:
        return check(*args, **kwargs)
    except InvalidInput as exc:
        raise OtlpError(exc.message, field=exc.field) from None


def attributes(items, where: str, limit: int | None = None) -> dict:
    if not isinstance(items, list):
        raise OtlpError(f"{where} must be a list of key/value pairs", field=where)
    out = {}
    for item in items:
        if not isinstance(item, dict) or not isinstance(item.get("key"), str):
            raise OtlpError(f"{where}: every attribute needs a string key", field=where)
        checked(check_text, item["key"], f"{where} (a key)")
        name = f"{where}.{item['key'][:80]}"
        value = _value(item.get("value", {}), name)
        checked(check_tree, value, where=name)
        if limit is not None and len(dumps(value).encode()) > limit:
            raise OtlpError(f"attribute {item['key'][:80]!r} is over the {limit}-byte attribute limit",
                            field=name, status=413)
        out[item["key"]] = value
    return out


def _check_span(span: dict, where: str) -> None:
    """The checks every door makes, on what a span names itself by and when: ids as OTLP
    has them (lowercase hex of their length), times as whole nanoseconds, no NUL or
    unpaired surrogate anywhere (what the attributes did not cover: names, events, links)."""
    for name, length in IDS.items():
        value = span.get(name)
        if value in (None, "") and name == "parentSpanId":
            continue
        if not isinstance(value, str) or len(value) != length or not _HEX.fullmatch(value.lower()):
            raise OtlpError(f"{where}.{name} must be {length} hexadecimal digits", field=f"{where}.{name}")
        span[name] = value.lower()
    times = {}
    for name in ("startTimeUnixNano", "endTimeUnixNano"):
        value = span.get(name, 0)
        if isinstance(value, str) and value.isascii() and value.isdigit():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= NANOS_MAX:
            raise OtlpError(f"{where}.{name} must be a whole number of nanoseconds from 0 to 2^64 - 1 "
                            "(a string of digits in OTLP/JSON)", field=f"{where}.{name}")
        times[name] = value
    if times["startTimeUnixNano"] and times["endTimeUnixNano"] < times["startTimeUnixNano"]:
        raise OtlpError(f"{where}.endTimeUnixNano is before its startTimeUnixNano", field=f"{where}.endTimeUnixNano")
    checked(check_tree, {k: v for k, v in span.items() if k != "attributes"}, where=where)


def spans_of(doc: dict, limits: Limits) -> list[tuple[dict, dict, str]]:
    """(span, its attributes decoded, where it is) for every span of the request, each
    checked (400 naming the field); over the limits: 413."""
    found = []
    resource_spans = doc.get("resourceSpans", [])
    if not isinstance(resource_spans, list):
        raise OtlpError("resourceSpans must be a list", field="resourceSpans")
    for i, rs in enumerate(resource_spans):
        scope_spans = rs.get("scopeSpans", []) if isinstance(rs, dict) else None
        if not isinstance(scope_spans, list):
            raise OtlpError("resourceSpans[].scopeSpans must be a list", field="scopeSpans")
        for j, ss in enumerate(scope_spans):
            spans = ss.get("spans", []) if isinstance(ss, dict) else None
            if not isinstance(spans, list):
                raise OtlpError("scopeSpans[].spans must be a list", field="spans")
            for span in spans:
                if not isinstance(span, dict):
                    raise OtlpError("every span must be an object", field="spans")
                found.append((span, f"resourceSpans.{i}.scopeSpans.{j}.spans.{len(found)}"))
                if len(found) > limits.spans:
                    raise OtlpError(f"more than {limits.spans} spans in one request; send smaller batches",
                                    field="spans", status=413)
    out = []
    for span, where in found:
        attrs = attributes(span.get("attributes", []), f"{where}.attributes", limits.attribute_bytes)
        _check_span(span, where)
        out.append((span, attrs, where))
    return out
