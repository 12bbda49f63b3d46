"""Nothing crosses a project: every API operation and every page, called by project A on every
object of project B, answers 404 (or what it answers for an object that exists nowhere), shows
none of B's markers or ids, and leaves B's rows as they were.

The routes are not listed here: the API's operations come from its OpenAPI document, the
pages from the URL resolver, and each parameter is filled by its name from what B holds
(OBJECTS; NEUTRAL names no object). A parameter this file cannot fill fails the test, naming
it: an operation's undescribed body or query, a name in neither list, a request never accepted
as well-formed. So a new route is walked the day it is routed, and a route without a project
check fails without anyone writing a case for it. Each request is sent twice: with B's value
and with a ghost (the same shape, naming nothing anywhere); the two answers must agree in status
and, once the values sent are masked, in body — so neither existence nor a count of B's rows
shows. Writes are sent too (with
each dry run also for real), and B's rows, every model's, must be the same afterwards.
"""

import io
import json
import re
import zipfile
from dataclasses import dataclass, field
from urllib.parse import quote, urlencode

import pytest
from django.test import Client

from conversations import projects
from conversations.export import FORMATS
from conversations.models import Conversation
from conversations.roles import assign_role
from conversations.views_live import PARTS
from memoryui.api import api
from tests.helpers import make_user
from tests.project_matrix_support import (
    MARKERS,
    UUIDS,
    age_one_conversation,
    b_rows,
    build_world,
    claude_entry,
    langgraph_checkpoint,
    otlp_body,
    rows_changed,
)
from tests.route_support import names_read_by, routes, view_source

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

# What a parameter's name says it holds: the kind of B's object it is filled with.
OBJECTS = {
    "conversation_id": "conversation", "conversation": "conversation", "source_conversation_id": "conversation",
    "conversation_ids": "conversation", "fact_id": "fact", "request_id": "receipt", "key_id": "key",
    "run_id": "prune_run", "subject": "subject", "s": "subject", "about": "subject", "like": "subject",
    "namespace": "namespace", "external_id": "external_id", "key": "source_key", "prefix": "source_key",
    "session_id": "session", "thread_id": "thread", "source_thread_id": "thread",
    "thread_ids": "thread", "checkpoint_id": "langgraph_checkpoint", "run_ids": "langgraph_run",
    "idempotency_key": "business_key", "q": "search", "query": "search", "actor": "actor", "user_id": "user",
    "id": "framework_id",
}
# Names that hold no object: left out of a query (their default), kept as the example has them
# in a body, and given one of these values where a path needs them.
NEUTRAL = {
    # paging, order, filters by kind, time and status
    "limit", "cursor", "order", "after", "before", "until", "since", "from", "to", "as_of", "status", "kind",
    "reviewed", "older", "page", "at", "errors", "follow", "tool", "active_after", "active_until", "call",
    "expected_position", "sessions", "filter", "checkpoint_ns", "format", "action", "next",
    # what a write says
    "title", "meta", "content", "tool_calls", "text", "name", "tool_call_id", "is_error", "messages", "summary",
    "position", "importance", "category", "source_position", "valid_from", "expires_at", "retention_days",
    "reason", "invalid_at", "state", "expected_version", "arguments", "result", "repo", "ref", "commit", "base",
    "files_changed", "insertions", "deletions", "older_than_days", "dry_run", "batch_size", "allow_empty",
    "document", "entries", "expected_entries", "pin_older_than_retention", "pin_older", "checkpoint", "metadata",
    "metadata_json", "parent_checkpoint_id", "target_thread_id", "task_id", "task_path", "writes", "strategy",
    "scopes", "pinned", "confirm", "token", "all_projects", "namespaces", "fmt", "part", "rest", "sort",
    # accounts are the server's, not a project's; a role, a filter, a new project's address
    "username", "role", "active", "slug", "framework", "sidecar", "mode",
}
# B's framework ids (project_matrix_support: framework_id) are, in turn, of these frameworks.
PATH_VALUES = {"fmt": list(FORMATS), "part": list(PARTS), "position": ["0", "1", "4"],
               "framework": ["openai-agents", "langchain", "langgraph", "otel"]}
# Pages that are the server's, not a project's, or end the session the walk runs in.
NOT_PROJECT_PAGES = {
    "favicon.ico": "a redirect to a static file", "healthz": "liveness, no data", "readyz": "readiness, no data",
    "metrics": "the operators' scrape (server-wide by design)", "login/": "the sign-in form",
    "logout/": "ends the walk's session", "v1/traces": "OTLP: tested with keys below",
}
CLIENT_ERRORS = {400, 405, 413, 415, 422}


# ---- the answer and its checks ------------------------------------------------------------


def body_text(response) -> str:
    data = b"".join(response.streaming_content) if response.streaming else response.content
    if data[:4] == b"PK\x03\x04":
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            return "\n".join(f"== {n}\n" + archive.read(n).decode("utf-8", "replace") for n in archive.namelist())
    text = data.decode("utf-8", "replace")
    headers = " ".join(f"{k}: {v}" for k, v in response.items() if k in ("Location", "Content-Disposition", "ETag"))
    return headers + "\n" + text


def _forms(value: str) -> set[str]:
    return {value, quote(value, safe=""), quote(value), json.dumps(value)[1:-1], value.replace("/", "%2F"),
            value.casefold()}


_TIMES = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)?|\d{4}-\d\d-\d\d \d\d:\d\d(?::\d\d)?")
_VOLATILE = [
    (re.compile(r'name="csrfmiddlewaretoken" value="[^"]*"'), "csrf"),
    (re.compile(r'"X-CSRFToken": "[^"]*"'), "csrf"),
    (re.compile(r'nonce="[^"]*"'), "nonce"),
    (re.compile(r"\b\d{13}\b"), "<ms>"),
    # A redirect naming the row it made (an access-log row), a download named by a digest
    (re.compile(r"(Location: [^\n]*?=)\d+"), r"\1<n>"),
    (re.compile(r"subject-export-[0-9a-f]{12}"), "subject-export-<digest>"),
    (re.compile(r'filename="([a-z-]+)-\d{8}-\d{6}'), r'filename="\1-<time>'),  # a download named by the second
    # A LangGraph thread's conversation is keyed by its id's digest: A's own, made by a write above
    (re.compile(r"thread-[0-9a-f]{40}"), "thread-<digest>"),
    (re.compile(r'"(?:id|run_id|seconds|bytes_before|bytes_after|bytes_freed|receipt_id|request_id|position|'
                r'first_position|last_position|updated_ms|mtime|signed_at|signature|chain_hash|key_id|public_key|'
                r'generation|bytes)": ?("[^"]*"|[\d.e-]+)'), '"<volatile>"'),
    (re.compile(r"\b[0-9a-f]{64}\b"), "<sha256>"),
]
# Signatures and keys; not a path (a URL's segments follow a letter or a slash).
_BASE64 = re.compile(r"(?<![\w/:+])[A-Za-z0-9+/]{40,}={0,2}")


def placeholders(world) -> list[tuple[str, str]]:
    """Each of B's values and its ghost, as the same placeholder: B's value and the ghost read
    alike wherever A's own rows hold them (A sent them itself in an earlier write)."""
    pairs = {}
    for kind, values in world.b_values.items():
        for value, ghost in zip(values, world.ghosts[kind], strict=True):
            if len(value) > 3 and not value.isdigit():  # ids: masked where they stand (_VOLATILE)
                placeholder = f"<B:{hash(value) % 10**6}>"
                pairs.update({form: placeholder for one in (value, ghost) for form in _forms(one)})
    return sorted(pairs.items(), key=lambda pair: len(pair[0]), reverse=True)


# What differs between two answers whatever the project: ids, times, sizes, signatures, and a
# receipt's account of the file search (which strings it could search depends on what else A
# holds at that moment; that it never depends on B is tests/test_projects.py's to show).
VOLATILE_KEYS = {"id", "run_id", "seconds", "bytes_before", "bytes_after", "bytes_freed", "receipt_id", "request_id",
                 "position", "first_position", "last_position", "updated_ms", "mtime", "signed_at", "signature",
                 "chain_hash", "key_id", "public_key", "generation", "verification", "size", "sha256", "prefix",
                 "secret"}


def _scrubbed(value):
    if isinstance(value, dict):
        return {k: "<volatile>" if k in VOLATILE_KEYS else _scrubbed(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_scrubbed(v) for v in value]
    return value


def _json_scrubbed(line: str) -> str:
    try:
        value = json.loads(line)
    except ValueError:
        return line
    return json.dumps(_scrubbed(value), sort_keys=True, ensure_ascii=False)


def normal(text: str, masks: list[tuple[str, str]]) -> str:
    text = "\n".join(_json_scrubbed(line) for line in text.split("\n"))
    for pattern, replacement in _VOLATILE:
        text = pattern.sub(replacement, text)
    for value, placeholder in masks:
        text = text.replace(value, placeholder)
    text = UUIDS.sub("<uuid>", text)
    text = _BASE64.sub("<base64>", text)
    return _TIMES.sub("<time>", text)


def first_difference(one: str, two: str) -> str:
    at = next((i for i, (x, y) in enumerate(zip(one, two, strict=False)) if x != y), min(len(one), len(two)))
    return f"…{one[max(0, at - 80):at + 80]!r} vs …{two[max(0, at - 80):at + 80]!r}"


@dataclass
class Tally:
    tried: int = 0
    ghosts: int = 0  # the same requests with ghosts (not sent where B's object answered 404 already)
    operations: set = field(default_factory=set)
    leaks: list = field(default_factory=list)
    # B's markers A has sent itself (a subject, an external id): A's own rows may hold them since.
    known: set = field(default_factory=set)
    masks: list = field(default_factory=list)
    unfillable: list = field(default_factory=list)

    def leak(self, where: str, problem: str):
        self.leaks.append(f"{where}: {problem}")


def check_answer(tally: Tally, world, where: str, response, sent: list[str], *, expect_404: bool):
    """B's markers or ids that the caller did not send itself are a leak, whatever the status."""
    text = body_text(response)
    sent_text = " ".join(sent)
    tally.known |= set(MARKERS.findall(sent_text))
    shown = {mark for mark in MARKERS.findall(text) if mark not in tally.known}
    if shown:
        tally.leak(where, f"{response.status_code} shows B's {sorted(shown)[:4]}")
    ids = {u.replace("-", "") for u in UUIDS.findall(text)} & world.b_uuids
    ids -= {u.replace("-", "") for u in UUIDS.findall(sent_text)}
    if ids:
        tally.leak(where, f"{response.status_code} names B's id(s) {sorted(ids)[:3]}")
    if expect_404 and response.status_code not in (404, 405):
        tally.leak(where, f"answered {response.status_code} for B's object, not 404: {text[:200]!r}")
    return text


def compare_with_ghost(tally: Tally, where: str, b_response, b_text: str, ghost_response):
    """A value of B must read as a value that names nothing: same status, same body once the
    values sent are masked (a count, a total, a 'nothing stored' that differs is a leak)."""
    ghost_text = body_text(ghost_response)
    if b_response.status_code != ghost_response.status_code:
        tally.leak(where, f"answered {b_response.status_code} for B's value but {ghost_response.status_code} for "
                          f"one that names nothing: {b_text[:200]!r}")
        return
    one, two = normal(b_text, tally.masks), normal(ghost_text, tally.masks)
    if one != two:
        tally.leak(where, f"answers B's value and a ghost differently: {first_difference(one, two)}")


# ---- the API: every operation of the OpenAPI document -------------------------------------


@dataclass
class Operation:
    method: str
    path: str
    op_id: str
    parameters: list  # (in, name, required)
    body: dict | None  # {"examples": [...], "schema": {...}} or None

    @property
    def where(self) -> str:
        return f"{self.method.upper()} {self.path}"


def operations(client) -> list[Operation]:
    document = client.get("/api/v1/openapi.json").json()
    found = []
    for path, methods in document["paths"].items():
        for method, op in methods.items():
            params = [(p["in"], p["name"], bool(p.get("required"))) for p in op.get("parameters", [])
                      if p["in"] in ("path", "query")]
            content = op.get("requestBody", {}).get("content", {}).get("application/json")
            body = None
            if content is not None:
                body = {"examples": [e["value"] for e in (content.get("examples") or {}).values()
                                     if isinstance(e.get("value"), dict)],
                        "schema": _resolve(content.get("schema", {}), document)}
            found.append(Operation(method, path, op.get("operationId", path), params, body))
    return found


def undeclared_inputs(ops: list[Operation]) -> list[str]:
    """Operations whose handler reads a query or a body by hand that the document does not
    describe: the matrix could not fill what it cannot see."""
    handlers = {}
    for router in api._get_bound_routers():
        for path, view in router.path_operations.items():
            for operation in view.operations:
                for method in operation.methods:
                    handlers[("/api/v1" + re.sub(r"\{\w+:(\w+)\}", r"{\1}", path), method.lower())] = operation
    problems = []
    for op in ops:
        handler = handlers.get((op.path, op.method))
        if handler is None:
            problems.append(f"{op.where}: no handler found for it")
            continue
        source = view_source(handler.view_func)
        if re.search(r"request\.(GET|POST)\b", source) and not any(w == "query" for w, _, _ in op.parameters):
            problems.append(f"{op.where}: its handler reads the query itself; declare its parameters")
        if re.search(r"read_(json|body)\(request", source) and op.body is None:
            problems.append(f"{op.where}: its handler reads a body the document does not describe")
    return problems


def _resolve(schema: dict, document: dict) -> dict:
    if "$ref" in schema:
        return _resolve(document["components"]["schemas"][schema["$ref"].rsplit("/", 1)[-1]], document)
    return schema


def _properties(schema: dict) -> tuple[set, set]:
    """(every top-level property, the required ones) of a body schema, its variants included."""
    names, required = set(schema.get("properties", {})), set(schema.get("required", []))
    for key in ("oneOf", "anyOf", "allOf"):
        for member in schema.get(key, []):
            more, needed = _properties(member)
            names |= more
            required |= needed
    return names, required


@dataclass
class Attempt:
    path: str
    query: list
    body: dict | None
    sent: list  # the B values sent
    b_object_in_path: bool


def _value(world, kind: str, i: int, *, ghost: bool) -> str:
    values = (world.ghosts if ghost else world.b_values)[kind]
    return values[i % len(values)]


def _fill_body(example, world, i, *, ghost, sent):
    """The example with every field that names an object given B's value (or the ghost's)."""
    if isinstance(example, dict):
        out = {}
        for name, value in example.items():
            kind = OBJECTS.get(name)
            if kind and isinstance(value, list):
                out[name] = [_value(world, kind, i, ghost=ghost)]
                sent.append(out[name][0])
            elif kind and (isinstance(value, str) or value is None):
                out[name] = _value(world, kind, i, ghost=ghost)
                sent.append(out[name])
            else:
                out[name] = _fill_body(value, world, i, ghost=ghost, sent=sent)
        return out
    if isinstance(example, list):
        return [_fill_body(v, world, i, ghost=ghost, sent=sent) for v in example]
    return example


def _built_body(schema: dict, world, i, *, ghost, sent, problems, where) -> dict:
    """A body from the schema alone (an operation without an example): its required fields."""
    names, required = _properties(schema)
    props = schema.get("properties", {})
    out = {}
    for name in sorted(required):
        kind = OBJECTS.get(name)
        if kind:
            value = _value(world, kind, i, ghost=ghost)
            out[name] = [value] if props.get(name, {}).get("type") == "array" else value
            sent.append(value)
        elif name in NEUTRAL:
            out[name] = {"string": "x", "integer": 1, "boolean": False, "array": [], "object": {}}.get(
                props.get(name, {}).get("type"), "x")
        else:
            problems.append(f"{where}: required body field {name!r}")
    return out


def _names(op: Operation, where: str) -> list[tuple[str, bool]]:
    return [(name, required) for place, name, required in op.parameters if place == where]


def unclassified(op: Operation) -> list[str]:
    """A parameter or body field the matrix does not know how to fill: a new name needs a line
    in OBJECTS (it names an object of B) or NEUTRAL (it does not)."""
    problems = []
    for name, required in _names(op, "path") + _names(op, "query"):
        if name not in OBJECTS and name not in NEUTRAL:
            problems.append(f"{op.where}: parameter {name!r} is neither an object's name nor neutral")
        elif required and name not in OBJECTS and name not in PATH_VALUES:
            problems.append(f"{op.where}: required parameter {name!r} has no value to fill")
    if op.body is not None:
        names = _properties(op.body["schema"])[0].union(*(set(e) for e in op.body["examples"]))
        problems += [f"{op.where}: body field {name!r} is neither an object's name nor neutral"
                     for name in sorted(names) if name not in OBJECTS and name not in NEUTRAL]
    return problems


def bodies_of(op: Operation) -> list:
    """Each request example (`build`: one made from the schema when there is none); a dry run's
    example is also sent for real."""
    if op.body is None:
        return [{}] if op.method in ("post", "put", "patch") else [None]
    bodies = op.body["examples"] or ["build"]
    return bodies + [{**b, "dry_run": False} for b in bodies if isinstance(b, dict) and b.get("dry_run")]


def _api_attempt(op: Operation, world, i: int, body, extra, *, ghost: bool, problems: list) -> Attempt:
    """The request with B's i-th object of each kind (or its ghost); `extra`: optional query
    parameters as (name, index of B's value)."""
    sent, path, in_path = [], op.path, False
    for name, _ in _names(op, "path"):
        if name in OBJECTS:
            value, in_path = _value(world, OBJECTS[name], i, ghost=ghost), True
            sent.append(value)
        else:
            choices = PATH_VALUES.get(name, ["x"])
            value = choices[i % len(choices)]
        path = path.replace("{" + name + "}", quote(value, safe=""))
    wanted = [(name, OBJECTS[name], i) for name, required in _names(op, "query") if required and name in OBJECTS]
    # An external id is found within its own namespace (`external_namespace`, aligned with it).
    wanted += [("namespace" if name == "external_namespace" else name,
                "external_namespace" if name == "external_namespace" else OBJECTS[name], j) for name, j in extra]
    pairs = [(name, _value(world, kind, j, ghost=ghost)) for name, kind, j in wanted]
    # A required query parameter that names no object: the value that goes with B's i-th object.
    pairs += [(name, PATH_VALUES[name][i % len(PATH_VALUES[name])]) for name, required in _names(op, "query")
              if required and name not in OBJECTS and name in PATH_VALUES]
    sent += [value for _, value in pairs]
    data = None
    if body == "build":
        data = _built_body(op.body["schema"], world, i, ghost=ghost, sent=sent, problems=problems, where=op.where)
    elif body is not None:
        data = _fill_body(body, world, i, ghost=ghost, sent=sent)
    return Attempt(path, pairs, data, sent, in_path)


def api_attempts(op: Operation, world, problems: list) -> list[tuple[Attempt, Attempt]]:
    """(B's attempt, its ghost) pairs: each of B's objects in the path (and required query),
    each optional object-naming query parameter alone with each of B's values, each body."""
    problems += unclassified(op)
    # Path parameters are required (OpenAPI): each of B's objects in turn, with the required query's.
    kinds = [OBJECTS[n] for n, required in _names(op, "path") + _names(op, "query") if required and n in OBJECTS]
    count = max([len(world.b_values[k]) for k in kinds] or [1])
    query = [name for name, _ in _names(op, "query")]
    extras = []
    for name, required in _names(op, "query"):
        if not required and name in OBJECTS:
            extras += [[("external_namespace", j), (name, j)] if name == "external_id" and "namespace" in query
                       else [(name, j)] for j in range(len(world.b_values[OBJECTS[name]]))]
    out = []
    for body in bodies_of(op):
        for i, extra in [(i, []) for i in range(count)] + [(0, extra) for extra in extras]:
            out.append((_api_attempt(op, world, i, body, extra, ghost=False, problems=problems),
                        _api_attempt(op, world, i, body, extra, ghost=True, problems=problems)))
    return out


def send_api(client, key, method, attempt: Attempt):
    url = "/api/v1" + attempt.path.removeprefix("/api/v1")
    if attempt.query:
        url += "?" + urlencode(attempt.query)
    headers = {"Authorization": f"Bearer {key}"}
    kwargs = {}
    if attempt.body is not None or method in ("post", "put", "patch"):
        kwargs = {"data": json.dumps(attempt.body if attempt.body is not None else {}),
                  "content_type": "application/json"}
    return getattr(client, method)(url, headers=headers, **kwargs)


def run_api_matrix(world, client) -> Tally:
    """Reads, then writes, then the reads again (a write that crossed shows in them), then
    deletes (one that crossed would take B's rows from under the others)."""
    tally = Tally(masks=placeholders(world))
    ops = operations(client)
    tally.unfillable += undeclared_inputs(ops)
    reads = [op for op in ops if op.method == "get"]
    writes = [op for op in ops if op.method not in ("get", "delete")]
    deletes = [op for op in ops if op.method == "delete"]
    meaningful: dict[str, bool] = {}
    for op in reads + writes + reads + deletes:
        tally.operations.add(op.where)
        for b_attempt, ghost in api_attempts(op, world, tally.unfillable):
            tally.tried += 1
            where = f"{op.where} {b_attempt.path} {b_attempt.query} {json.dumps(b_attempt.body)[:120]}"
            response = send_api(client, world.a_key, op.method, b_attempt)
            text = check_answer(tally, world, where, response, b_attempt.sent, expect_404=b_attempt.b_object_in_path)
            if response.status_code == 404 and b_attempt.b_object_in_path:
                meaningful[op.where] = True
                continue
            twin = send_api(client, world.a_key, op.method, ghost)
            tally.ghosts += 1
            compare_with_ghost(tally, where, response, text, twin)
            if response.status_code not in CLIENT_ERRORS or twin.status_code not in CLIENT_ERRORS:
                meaningful[op.where] = True
    for op in ops:
        if not meaningful.get(op.where):
            tally.unfillable.append(f"{op.where}: every request the matrix could build was refused as malformed "
                                    f"(document its body or parameters so that a valid one can be built)")
    return tally


def assert_none_found(tally: Tally, changed: list[str]):
    problems = [f"cannot fill: {p}" for p in sorted(set(tally.unfillable))]
    problems += [f"leak: {p}" for p in tally.leaks]
    problems += [f"B's rows changed: {p}" for p in changed]
    assert not problems, f"{len(problems)} problems:\n" + "\n".join(problems[:150])


def report(tally: Tally, what: str, capsys, *, routes_are: str = "pages"):
    with capsys.disabled():
        print(f"\n{what}: {len(tally.operations)} {routes_are}, {tally.tried} requests with B's objects and "
              f"{tally.ghosts} with ghosts, {len(tally.leaks)} leaks, {len(tally.unfillable)} unfillable")


@pytest.fixture
def world(request):
    """B is `beta`, or (`indirect` parametrisation) `default`, the project at the root."""
    return build_world(getattr(request, "param", "beta"))


@pytest.mark.parametrize("world", ["beta", "default"], indirect=True)
def test_an_api_key_of_a_reaches_nothing_of_b_through_any_operation(world, client, capsys):
    age_one_conversation(world)
    before = b_rows(world)
    tally = run_api_matrix(world, client)
    report(tally, f"API matrix (B is {world.b.slug!r})", capsys, routes_are="operations")
    assert_none_found(tally, rows_changed(before, b_rows(world)))
    assert tally.tried >= len(tally.operations)


# ---- the pages: every route of the URL resolver, for a member of A in each role -------------


def page_routes():
    return [r for r in routes() if not r.is_api and r.route not in NOT_PROJECT_PAGES]


def page_attempts(route, world, problems, *, full: bool):
    get_names, post_names = names_read_by(view_source(route.callback))
    names = get_names | post_names
    for name in sorted(names):
        if name not in OBJECTS and name not in NEUTRAL:
            problems.append(f"page {route.route}: parameter {name!r} is neither an object's name nor neutral")
    path_kinds = []
    for name, _ in route.path_params:
        if name in OBJECTS:
            path_kinds.append(OBJECTS[name])
        elif name not in PATH_VALUES:
            problems.append(f"page {route.route}: path parameter {name!r} has no value to fill")
    count = max([len(world.b_values[k]) for k in path_kinds] or [1]) if full else 1
    object_names = sorted(n for n in names if n in OBJECTS)

    def one(i, extra, *, ghost):
        sent, path = [], route.route
        for name, _ in route.path_params:
            if name in OBJECTS:
                value = _value(world, OBJECTS[name], i, ghost=ghost)
                sent.append(value)
            else:
                choices = PATH_VALUES.get(name, ["x"])
                value = choices[i % len(choices)]
            path = re.sub(rf"<(?:\w+:)?{name}>", quote(value, safe=""), path, count=1)
        pairs = []
        for name, j in extra:
            pairs.append((name, _value(world, OBJECTS[name], j, ghost=ghost)))
            sent.append(pairs[-1][1])
        return Attempt("/" + path, pairs, None, sent, bool(path_kinds))

    out = [(one(i, [], ghost=False), one(i, [], ghost=True)) for i in range(count)]
    for name in object_names:
        for j in range(len(world.b_values[OBJECTS[name]]) if full else 1):
            out.append((one(0, [(name, j)], ghost=False), one(0, [(name, j)], ghost=True)))
    if len(object_names) > 1:
        every = [(n, 0) for n in object_names]
        out.append((one(0, every, ghost=False), one(0, every, ghost=True)))
    return out


def send_page(client, prefix: str, method: str, attempt: Attempt):
    url = prefix + attempt.path
    if method == "get":
        response = client.get(url + ("?" + urlencode(attempt.query) if attempt.query else ""))
        # A person outside the root's project is sent to the same page in theirs: followed.
        if response.status_code == 302 and response["Location"].startswith("/p/"):
            response = client.get(response["Location"])
        return response
    response = client.post(url, urlencode(attempt.query), content_type="application/x-www-form-urlencoded")
    # A write's page redirects and leaves a flash message for the next page: read it here, or
    # it shows on the next request's answer and not on its ghost's.
    if response.status_code == 302 and response["Location"].startswith("/"):
        client.get(response["Location"])
    return response


def run_page_matrix(world, client, persona: str, tally: Tally, *, full: bool):
    own = f"/p/{world.a.slug}" if world.a.pk != projects.DEFAULT_PROJECT_ID else ""
    theirs = f"/p/{world.b.slug}" if world.b.pk != projects.DEFAULT_PROJECT_ID else ""
    for route in page_routes():
        tally.operations.add(route.route)
        for n, (b_attempt, ghost) in enumerate(page_attempts(route, world, tally.unfillable, full=full)):
            # The project's own address, then (once per route) the root and B's address.
            forms = [own] + ([""] if n == 0 and own else []) + ([theirs] if n == 0 and persona != "both" else [])
            for prefix in forms:
                for method in ("get", "post"):
                    tally.tried += 1
                    where = f"{persona} {method.upper()} {prefix}{b_attempt.path} {b_attempt.query}"
                    response = send_page(client, prefix, method, b_attempt)
                    if prefix == theirs and prefix != own:
                        check_answer(tally, world, where, response, b_attempt.sent, expect_404=False)
                        if response.status_code not in (404, 405):
                            tally.leak(where, f"B's own address answered {response.status_code} to a person "
                                              f"outside B")
                        continue
                    text = check_answer(tally, world, where, response, b_attempt.sent,
                                        expect_404=b_attempt.b_object_in_path and response.status_code != 403)
                    if response.status_code in (404, 405) and b_attempt.b_object_in_path:
                        continue
                    twin = send_page(client, prefix, method, ghost)
                    tally.ghosts += 1
                    compare_with_ghost(tally, where, response, text, twin)


# `both` is an admin of A who is also an auditor of B: acting in A, B stays out of sight.
PERSONAS = ["auditor", "reviewer", "admin", "both"]


def test_a_person_of_a_in_any_role_reaches_nothing_of_b_on_any_page(world, capsys):
    """Every role walks every page on the same world (made once: it is the slow part); the
    admins walk it with every object of B, the others with the first of each kind."""
    age_one_conversation(world)
    people = {persona: make_user(None, f"matrix-{persona}") for persona in PERSONAS}
    for persona, person in people.items():
        assign_role(person, "admin" if persona == "both" else persona, world.a)
    assign_role(people["both"], "auditor", world.b)
    before = b_rows(world)
    tally = Tally(masks=placeholders(world))
    for persona, person in people.items():
        client = Client(raise_request_exception=False)
        client.force_login(person)
        tried, leaks = tally.tried, len(tally.leaks)
        if persona == "both":  # a member of B: B's name is in their project switcher, rightly
            tally.known.add(world.b.name)
        run_page_matrix(world, client, persona, tally, full=persona in ("admin", "both"))
        with capsys.disabled():
            print(f"\npage matrix ({persona}): {tally.tried - tried} requests with B's objects, "
                  f"{len(tally.leaks) - leaks} leaks")
    report(tally, "page matrix", capsys)
    assert_none_found(tally, rows_changed(before, b_rows(world)))


# ---- guessed ids: a door that names its conversation by the caller's id ---------------------


def _doors():
    """(door, address, body, what names B's conversation there)."""
    thread, session = "MARKER-B-thread", "MARKER-B-session"

    def api(path, body):
        return "/api/v1" + path, json.dumps(body).encode()

    return [
        ("otlp", "/v1/traces", otlp_body("MARKER-B-otel-conv", "alpha span", span_id="11f067aa0ba902b7"),
         dict(namespace="otel", external_id="MARKER-B-otel-conv")),
        ("langgraph", *api("/langgraph/checkpoints", langgraph_checkpoint(thread, "0002-a", "alpha words", "a-run")),
         dict(namespace="langgraph", meta__langgraph__thread_id=thread)),
        ("langchain", *api("/langchain/history/messages", {
            "namespace": "MARKER-B-lc", "session_id": "MARKER-B-lc-session",
            "messages": [{"type": "human", "content": "alpha words"}]}),
         dict(namespace="MARKER-B-lc")),
        ("claude-code session", *api("/imports", {"namespace": "MARKER-B-cc", "external_id": session,
                                                  "entries": [claude_entry(9, "alpha words")]}),
         dict(namespace="MARKER-B-cc", external_id=session)),
        ("openai session", *api("/imports", {"format": "openai-responses", "namespace": "MARKER-B-agents",
                                             "external_id": "MARKER-B-oai-session",
                                             "entries": [{"role": "user", "content": "alpha words"}]}),
         dict(namespace="MARKER-B-agents")),
        ("external id", *api("/conversations", {"namespace": "MARKER-B-ns", "external_id": "MARKER-B-ext-root"}),
         dict(namespace="MARKER-B-ns", external_id="MARKER-B-ext-root")),
    ]


def test_a_guessed_id_of_b_at_any_door_makes_a_new_conversation_in_a(world, client):
    """OTLP's gen_ai.conversation.id, a LangGraph thread, a LangChain or OpenAI session, a Claude
    Code session key, an external id: each names one of B's conversations, and sent with A's key
    makes A's own; the answer shows nothing of B's."""
    before = b_rows(world)
    for door, path, body, names in _doors():
        theirs = Conversation.everywhere.get(project=world.b, **names)
        answer = client.post(path, body, content_type="application/json",
                             headers={"Authorization": f"Bearer {world.a_key}"})
        assert answer.status_code in (200, 201), (door, answer.content[:300])
        text = answer.content.decode()
        assert set(MARKERS.findall(text)) <= set(MARKERS.findall(body.decode())), (door, text[:300])
        assert world.b_uuids.isdisjoint(u.replace("-", "") for u in UUIDS.findall(text)), door
        ours = Conversation.everywhere.filter(project=world.a, **names)
        assert ours.exists() and not ours.filter(pk=theirs.pk).exists(), door
    assert rows_changed(before, b_rows(world)) == []
