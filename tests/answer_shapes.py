"""Each 2xx answer has exactly the fields its OpenAPI schema declares, checked on what the handler returns.

Ninja serializes a handler's data through the operation's `*Out` schema: a key the
schema lacks is dropped without a word, and a field the data lacks is filled with its
default (or fails the answer). Both change what clients get, and neither shows in the
answer itself, so the check looks at the handler's own return value, before ninja sees
it, against the served OpenAPI document (the one clients/typescript is generated from).
An answer a handler renders itself (an `HttpResponse` with a JSON body) is checked as sent.
And the schema must not change the answer: it is compared with the handler's data rendered
without it (the same keys and values, every number and moment spelled the same; only the
order of keys may follow the schema).
"""

import json
import re

from django.http import HttpResponse, HttpResponseBase
from ninja import Status
from ninja.operation import Operation
from ninja.responses import NinjaJSONEncoder

from conversations.rawjson import JsonRenderer, RawJson
from memoryui.api import api

_documents: dict[str, dict] = {}


def openapi_document() -> dict:
    """The document /api/v1/openapi.json serves, as its JSON."""
    if "served" not in _documents:
        _documents["served"] = json.loads(json.dumps(api.get_openapi_schema(), cls=NinjaJSONEncoder))
    return _documents["served"]


def _resolve(schema: dict, doc: dict) -> dict:
    while "$ref" in schema:
        schema = doc["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]]
    return schema


def mismatches(value, schema: dict, doc: dict, where: str = "$") -> list[str]:
    """Where `value`'s keys differ from the schema's properties, at any depth."""
    schema = _resolve(schema, doc)
    if isinstance(value, RawJson):
        return []  # stored bytes: their shape is the store's
    for union in ("anyOf", "oneOf"):
        if union in schema:
            branches = [_resolve(b, doc) for b in schema[union]]
            if value is None:
                return []
            found = [mismatches(value, b, doc, where) for b in branches if b.get("type") != "null"]
            return [] if not found or any(not f for f in found) else found[0]
    if isinstance(value, dict):
        properties = schema.get("properties")
        if properties is None:
            extra = schema.get("additionalProperties")
            if isinstance(extra, dict):
                return [m for k, v in value.items() for m in mismatches(v, extra, doc, f"{where}.{k}")]
            return []
        out = []
        # A field the schema does not require may be left out (a change's `old` when it adds).
        if lacking := sorted(set(schema.get("required", ())) - set(value)):
            out.append(f"{where}: the answer lacks {lacking}")
        if undeclared := sorted(set(value) - set(properties)):
            out.append(f"{where}: the schema lacks {undeclared}")
        for key in sorted(set(properties) & set(value)):
            out += mismatches(value[key], properties[key], doc, f"{where}.{key}")
        return out
    if isinstance(value, list | tuple) and isinstance(schema.get("items"), dict):
        return [m for i, item in enumerate(value) for m in mismatches(item, schema["items"], doc, f"{where}[{i}]")]
    return []


def _operation_of(doc: dict, method: str, path: str) -> dict | None:
    for template, operations in doc["paths"].items():
        pattern = re.sub(r"\\\{[^/]+?\\\}", "[^/]+", re.escape(template))
        if re.fullmatch(pattern, path) and method.lower() in operations:
            return operations[method.lower()]
    return None


def answer_schema(doc: dict, method: str, path: str, status: int) -> dict | None:
    operation = _operation_of(doc, method, path)
    if operation is None:
        return None
    answer = operation.get("responses", {}).get(str(status), {})
    return answer.get("content", {}).get("application/json", {}).get("schema")


class Recorder:
    """Keeps (method, path, status, data) of every answer ninja is handed while installed."""

    def __init__(self):
        self.answers: list[tuple[str, str, int, object]] = []
        self.changed: list[str] = []

    def install(self, monkeypatch) -> None:
        original = Operation._result_to_response
        answers = self.answers

        renderer = JsonRenderer()
        changed = self.changed

        def recorded(operation, request, result, temporal_response):
            status, data = _status_and_data(operation, result)
            answers.append((request.method, request.path, status, data))
            response = original(operation, request, result, temporal_response)
            if not isinstance(result, HttpResponseBase) and isinstance(data, dict | list):
                # Through the schema or not, the same answer: nothing added, dropped or spelled otherwise.
                plain = renderer.render(request, data, response_status=status)
                if _spelled(response.content) != _spelled(plain):
                    changed.append(f"{request.method} {request.path} {status}:\n  data:   {plain[:600]}"
                                   f"\n  answer: {response.content[:600]!r}")
            return response

        monkeypatch.setattr(Operation, "_result_to_response", recorded)

    def problems(self) -> list[str]:
        doc, out = openapi_document(), list(self.changed)
        for method, path, status, data in self.answers:
            if not 200 <= status < 300 or data is _NOT_JSON:
                continue
            schema = answer_schema(doc, method, path, status)
            if schema is not None:
                out += [f"{method} {path} {status}: {m}" for m in mismatches(data, schema, doc)]
        return out


_NOT_JSON = object()


def _spelled(text):
    """The JSON value with every number as it is written (1 and 1.0 differ); key order aside."""
    return json.loads(text, parse_float=lambda s: ("float", s), parse_int=lambda s: ("int", s))


def _status_and_data(operation, result) -> tuple[int, object]:
    if isinstance(result, Status):
        return result.status_code, result.value
    if isinstance(result, HttpResponse) and result.get("Content-Type", "").startswith("application/json"):
        return result.status_code, json.loads(result.content)
    if isinstance(result, HttpResponseBase):
        return result.status_code, _NOT_JSON  # a file, a stream
    statuses = [s for s in operation.response_models if isinstance(s, int)]
    return (statuses[0] if len(statuses) == 1 else 200), result
