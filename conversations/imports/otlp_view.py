"""`POST /v1/traces`: the OTLP/HTTP trace receiver (conversations/imports/otlp.py maps the spans).

At the root, not under /api/v1/, because OTLP exporters post to `<endpoint>/v1/traces`.
It answers as the OTLP specification says rather than in the API's error shape, since
its callers are OTLP exporters: 200 with an `ExportTraceServiceResponse` (its
`partialSuccess` counting rejected spans), and on failure a `google.rpc.Status` body,
in the encoding of the request (protobuf or JSON): 400 bad data, 401 no or wrong
key, 403 a key without the `write` scope, 413 too large, 415 another content type.
"""

import json
import zlib

from django.conf import settings
from django.http import HttpResponse
from django.views.decorators.csrf import csrf_exempt

from conversations.apiauth import authenticate_bearer
from conversations.connections import close_after_answer
from conversations.errors import ImportInProgress, StoreError

from . import otlp, otlp_wire

PROTOBUF = "application/x-protobuf"
JSON = "application/json"
# google.rpc.Code values for the Status body.
_CODES = {400: 3, 401: 16, 403: 7, 405: 12, 409: 10, 413: 8, 415: 3, 503: 14}


def _max_bytes() -> int:
    return settings.MEMORYUI_OTLP_MAX_BYTES


def _limits() -> otlp_wire.Limits:
    return otlp_wire.Limits(spans=settings.MEMORYUI_OTLP_MAX_SPANS,
                       attribute_bytes=settings.MEMORYUI_OTLP_MAX_ATTRIBUTE_BYTES)


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _status(status: int, message: str, *, binary: bool, field: str | None = None) -> HttpResponse:
    code = _CODES.get(status, 2)
    if binary:
        # google.rpc.Status: 1 code (int32), 2 message (string); encoded by hand, it is two fields.
        text = message.encode("utf-8", "replace")
        body = b"\x08" + _varint(code) + b"\x12" + _varint(len(text)) + text
        response = HttpResponse(body, status=status, content_type=PROTOBUF)
    else:
        doc = {"code": code, "message": message, **({"details": [{"field": field}]} if field else {})}
        response = HttpResponse(json.dumps(doc), status=status, content_type=JSON)
    response["Cache-Control"] = "no-store"
    return response


def _read_body(request, limit: int) -> bytes | None:
    """The body, unzipped; None when it is over `limit` (before or after unzipping)."""
    declared = request.META.get("CONTENT_LENGTH") or "0"
    if declared.isdigit() and int(declared) > limit:
        return None
    body = request.read(limit + 1)
    if len(body) > limit:
        return None
    encoding = request.headers.get("Content-Encoding", "").strip().lower()
    if encoding in ("gzip", "deflate"):
        inflater = zlib.decompressobj(zlib.MAX_WBITS | (16 if encoding == "gzip" else 0))
        try:
            out = inflater.decompress(body, limit + 1)
        except zlib.error as exc:
            raise otlp_wire.OtlpError(f"the body is not valid {encoding}: {exc}", field="Content-Encoding") from None
        if len(out) > limit:
            return None
        return out
    if encoding not in ("", "identity"):
        raise otlp_wire.OtlpError(f"Content-Encoding {encoding[:40]!r} is not supported (gzip, deflate)",
                             field="Content-Encoding", status=415)
    return body


@csrf_exempt
def traces(request):
    content_type = request.content_type or ""
    binary = content_type != JSON
    if request.method != "POST":
        response = _status(405, "POST an ExportTraceServiceRequest here", binary=binary)
        response["Allow"] = "POST"
        return response
    header = request.headers.get("Authorization", "")
    scheme, _, token = header.partition(" ")
    key = authenticate_bearer(request, token.strip()) if scheme.lower() == "bearer" else None
    if key is None:
        response = _status(401, "send an API key as 'Authorization: Bearer <key>'", binary=binary)
        response["WWW-Authenticate"] = "Bearer"
        return response
    scopes = set(key.scopes)
    if not scopes & {"write", "admin"}:
        return _status(403, f"this API key needs the 'write' scope; it has: {', '.join(sorted(scopes)) or 'none'}",
                       binary=binary)
    if content_type not in (PROTOBUF, JSON):
        return _status(415, f"Content-Type must be {PROTOBUF} or {JSON}", binary=binary, field="Content-Type")
    try:
        body = _read_body(request, _max_bytes())
        if body is None:
            close_after_answer()  # what is left of the body is still on the connection
            return _status(413, f"the body is over {_max_bytes()} bytes; send smaller batches", binary=binary,
                           field="body")
        doc = otlp_wire.decode_protobuf(body) if binary else otlp_wire.decode_json(body)
        result = otlp.ingest(doc, actor=f"key:{key.name}", limits=_limits())
    except otlp_wire.OtlpError as exc:
        return _status(exc.status, exc.message, binary=binary, field=exc.field)
    except ImportInProgress as exc:
        return _status(503, exc.message, binary=binary, field=exc.field)
    except StoreError as exc:
        return _status(400, exc.message, binary=binary, field=getattr(exc, "field", None))
    return _answer(result, binary=binary)


def _answer(result: otlp.Result, *, binary: bool) -> HttpResponse:
    # The specification's partial success: rejected spans are counted; an errorMessage with no
    # span rejected is a warning, which says what was accepted but not kept.
    rejected = len(result.rejected)
    message = result.not_kept()
    if binary:
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

        answer = ExportTraceServiceResponse()
        if rejected or message:
            answer.partial_success.rejected_spans = rejected
            answer.partial_success.error_message = message
        response = HttpResponse(answer.SerializeToString(), content_type=PROTOBUF)
    else:
        doc = {"partialSuccess": {"rejectedSpans": str(rejected), "errorMessage": message}} if rejected or message \
            else {}
        response = HttpResponse(json.dumps(doc), content_type=JSON)
    response["Cache-Control"] = "no-store"
    return response
