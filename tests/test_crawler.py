"""No input reaches a 5xx: a crawler over every URL pattern of the pages and the API.

The patterns come from the URL resolver, so a new page or endpoint is walked as
soon as it is routed. Path parameters are filled with real ids from demo data
(and fuzzed themselves). The parameters fuzzed for each pattern are discovered,
not listed by hand:

- pages: the names their module's parsing code reads (`request.GET.get("x")`,
  `_param(request.GET, "x")`, `for k in ("a", "b")`, …) and the fields of every
  form the rendered pages hold that submits to the pattern;
- the API: the query parameters and the request-body properties of the
  OpenAPI schema, each sent in a valid example body with one field replaced.

Every parameter gets every hostile value: dates and offsets that overflow in UTC,
NUL, lone surrogates (percent-encoded as their UTF-8 bytes, escaped in JSON),
Unicode digits, huge and negative integers, very long strings, forged cursors,
and the parameter repeated. The admin is logged in, and the API is called with an
admin key holding every scope. Nothing may answer 5xx; under /api/ every refusal
must be in the one error shape; every answer, page or API, success or refusal,
carries `Cache-Control: no-store`. The number of cases tried is printed.
"""

import base64
import json
import re
import time
from dataclasses import dataclass, field
from html.parser import HTMLParser
from urllib.parse import quote, urlsplit

import pytest
from django.test import Client
from django.urls import resolve
from django.urls.exceptions import Resolver404

from conversations import store
from tests.route_support import Route, names_read_by, routes, view_source

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

SURROGATE = "\ud800"


def _cursor(*items) -> str:
    return base64.urlsafe_b64encode(json.dumps(list(items)).encode()).decode().rstrip("=")


# Every value is sent for every parameter, in query strings and form bodies: one or
# two of each kind a hostile client tries.
HOSTILE = [
    # dates and offsets that overflow, or are not dates
    "9999-12-31", "10000-01-01", "9999-12-31T23:59:59-23:59", "0001-01-01T00:00:00+23:59",
    # text no database stores
    "a\x00b", "x" + SURROGATE + "y",
    # identifiers that look alike: decomposed, invisible, direction overrides (refused or normalised)
    "Zo\u0308e", "Zo\u200be", "\u202eeoZ", "\ufeffZoe", "Zo\u00ade",
    # digits that are not 0-9, numbers that do not fit or are negative
    "²", "٣", "-1", "-99999999999999999999", "99999999999999999999999999", "1e400",
    # empty, very long, markup, forged cursors
    "", "x" * 3000, "<script>alert(1)</script>", "!!!",
    _cursor("recent", "9999-12-31T23:59:59-23:59", "0" * 32),
    _cursor("conversations", "0001-01-01T00:00:00+23:59", "0" * 32),
    _cursor("audit", "9999-12-31T23:59:59-23:59", "1"),
    _cursor("search", "٣", "1"),
    "[" * 50,
]
# A parameter no view reads only shows the page copes with what it ignores.
IGNORED = ["a\x00b", "x" + SURROGATE + "y", "x" * 3000]
# Values a JSON body field gets (besides every string above).
JSON_HOSTILE = [None, True, -1, 0, 10**30, -(10**30), 1.5, 1e308, [], {}, [None], {"\x00": 1},
                {"k": SURROGATE}, ["x"] * 2000, "5"]
# Whole bodies, sent to every endpoint that takes one.
RAW_BODIES = [
    ("application/json", b"{"), ("application/json", b"[]"), ("application/json", b"null"),
    ("application/json", b'{"a": 1e999}'), ("application/json", b"[" * 5000 + b"]" * 5000),
    ("application/json", b'{"x": "\\ud800"}'), ("application/json", b"\xff\xfe"),
    ("application/json", b'{"x": "a\\u0000b"}'),
    ("text/plain", b"{}"), ("application/x-www-form-urlencoded", b"a=1"),
]
# Path segments tried in place of each path parameter.
PATH_HOSTILE_STR = ["\x00", SURROGATE, "²", "x" * 300, "' OR 1=1", "9" * 40, "..", "%"]
PATH_HOSTILE_INT = ["0", "99999999999999999999999"]


def encode(value: str) -> str:
    """Percent-encoded UTF-8, lone surrogates included (as a hostile client sends them)."""
    return quote(value.encode("utf-8", "surrogatepass"), safe="")


def query(pairs) -> str:
    return "&".join(f"{encode(k)}={encode(v)}" for k, v in pairs)


class FormParser(HTMLParser):
    """Every <form>: its method, action and the names of its fields."""

    def __init__(self):
        super().__init__()
        self.forms: list[dict] = []
        self._open = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "form":
            self._open = {"method": (attrs.get("method") or "get").lower(),
                          "action": attrs.get("action") or attrs.get("hx-post") or attrs.get("hx-get") or "",
                          "fields": set()}
            self.forms.append(self._open)
        elif tag in ("input", "select", "textarea", "button") and self._open is not None and attrs.get("name"):
            if attrs.get("type") != "file":
                self._open["fields"].add(attrs["name"])

    def handle_endtag(self, tag):
        if tag == "form":
            self._open = None


# ---- the crawl -------------------------------------------------------------------------


@dataclass
class Crawl:
    client: Client
    api_headers: dict
    login: object
    cases: int = 0
    failures: list = field(default_factory=list)
    per_route: dict = field(default_factory=dict)
    seconds: dict = field(default_factory=dict)
    sent: dict = field(default_factory=dict)  # requests per method and pattern, beside their seconds

    def send(self, route: Route, method: str, path: str, *, body: bytes | None = None, content_type=None, what=""):
        self.cases += 1
        self.per_route[route.route] = self.per_route.get(route.route, 0) + 1
        headers = self.api_headers if route.is_api else {}
        kwargs = {"headers": headers}
        if body is not None:
            kwargs.update(data=body, content_type=content_type)
        began = time.monotonic()
        response = getattr(self.client, method)(path, **kwargs)
        key = f"{method.upper()} {route.route}"
        self.seconds[key] = self.seconds.get(key, 0.0) + time.monotonic() - began
        self.sent[key] = self.sent.get(key, 0) + 1
        problem = None
        if response.status_code >= 500:
            problem = f"{response.status_code}"
        elif route.is_api and response.status_code >= 400:
            problem = _not_error_shape(response)
        if not problem and "no-store" not in response.get("Cache-Control", ""):
            # Every answer may hold conversations, facts, subjects or logs: no cache keeps one.
            problem = f"{response.status_code} without Cache-Control: no-store ({response.get('Cache-Control')!r})"
        if problem:
            self.failures.append(f"{method.upper()} {path[:160]!r} [{what[:120]}] -> {problem}")
        if route.name == "logout":
            self.login()
        return response


def _not_error_shape(response) -> str | None:
    try:
        body = json.loads(response.content)
        error = body["error"]
        if set(body) == {"error"} and error.get("code") and error.get("message"):
            return None
    except (ValueError, KeyError, TypeError):
        pass
    return f"{response.status_code} not in the API's error shape: {response.content[:120]!r}"


def fill(route: Route, values: dict, unknown: set, **override) -> str:
    path = route.route
    for name, kind in route.path_params:
        value = override.get(name, values.get(name))
        if value is None:
            unknown.add(f"{route.route}:{name}")
            value = "1" if kind == "int" else "x"
        path = re.sub(rf"<(?:\w+:)?{name}>", encode(value).replace("%2F", "/"), path, count=1)
    return "/" + path


def _throwaway_conversation() -> str:
    c = store.create_conversation(title="crawl throwaway")
    store.append_message(conversation_id=c.pk, message={"kind": "user", "content": "x"})
    return str(c.pk)


def _schema_properties(schema: dict, components: dict, depth: int = 0) -> set[str]:
    if depth > 4 or not isinstance(schema, dict):
        return set()
    if "$ref" in schema:
        return _schema_properties(components.get(schema["$ref"].rsplit("/", 1)[-1], {}), components, depth + 1)
    names = set(schema.get("properties", {}))
    for key in ("oneOf", "anyOf", "allOf"):
        for member in schema.get(key, []):
            names |= _schema_properties(member, components, depth + 1)
    return names


def api_operations() -> dict:
    from memoryui.api import api

    schema = api.get_openapi_schema()
    components = schema.get("components", {}).get("schemas", {})
    ops = {}
    for path, methods in schema["paths"].items():
        for method, op in methods.items():
            query_names = [p["name"] for p in op.get("parameters", []) if p.get("in") == "query"]
            body = None
            content = op.get("requestBody", {}).get("content", {}).get("application/json")
            if content is not None:
                examples = [e.get("value") for e in (content.get("examples") or {}).values()]
                example = next((e for e in examples if isinstance(e, dict)), {})
                body = {"example": example,
                        "properties": _schema_properties(content.get("schema", {}), components) | set(example)}
            elif method in ("post", "put", "patch"):
                body = {"example": {}, "properties": set()}
            ops[(path, method)] = {"query": query_names, "body": body}
    return ops


def test_no_url_and_no_parameter_answers_5xx(world, client, capsys):
    started = time.monotonic()
    client.raise_request_exception = False
    admin = world["admin"]

    def login():
        client.force_login(admin)

    login()
    crawl = Crawl(client, {"Authorization": f"Bearer {world['secret']}"}, login)
    values, unknown = world["values"], set()
    all_routes = routes()
    operations = api_operations()
    covered_ops = set()

    # Forms, read from every page that renders (with real ids in its path).
    forms: dict[str, dict[str, set]] = {}
    for route in all_routes:
        if route.is_api or route.name == "logout":
            continue
        response = client.get(fill(route, values, unknown))
        if response.status_code != 200 or "html" not in response.get("Content-Type", "") or response.streaming:
            continue
        parser = FormParser()
        parser.feed(response.content.decode("utf-8", "replace"))
        here = fill(route, values, unknown)
        for form in parser.forms:
            target = urlsplit(form["action"]).path or here
            try:
                match = resolve(target)
            except Resolver404:
                continue
            forms.setdefault(match.route, {}).setdefault(form["method"], set()).update(form["fields"])

    # The pages first, on the world as the fixture made it: the API's fuzz appends rows, actions,
    # forks and proposals to the same conversation and facts, and a page drawing hundreds of them
    # would only make each of its cases slower (a conversation page 6x), not test more input.
    for route in sorted(all_routes, key=lambda r: r.is_api):
        # Path parameters themselves.
        for name, kind in route.path_params:
            for bad in (PATH_HOSTILE_INT if kind == "int" else PATH_HOSTILE_STR):
                if kind == "int" or name != "rest":
                    crawl.send(route, "get", fill(route, values, unknown, **{name: bad}), what=f"path {name}={bad!r}")

        if route.is_api:
            fuzz_api_route(crawl, route, operations, covered_ops, values, unknown)
        else:
            fuzz_page_route(crawl, route, forms, values, unknown)

    elapsed = time.monotonic() - started
    missed = {op for op in operations if op not in covered_ops}
    summary = (f"crawler: {crawl.cases} URL x parameter cases over {len(all_routes)} URL patterns "
               f"({len(covered_ops)} API operations) in {elapsed:.1f} s; "
               f"path parameters filled by default: {sorted(unknown) or 'none'}")
    slowest = sorted(crawl.seconds.items(), key=lambda kv: -kv[1])[:12]
    with capsys.disabled():
        print("\n" + summary)
        print("slowest: " + "; ".join(f"{k} {v:.1f}s ({crawl.sent[k]} requests)" for k, v in slowest))
    assert not missed, f"API operations the crawler did not reach: {sorted(missed)}"
    assert not crawl.failures, f"{len(crawl.failures)} of {crawl.cases} cases failed:\n" + "\n".join(
        crawl.failures[:60])


def fuzz_page_route(crawl: Crawl, route: Route, forms, values, unknown):
    source = view_source(route.callback)
    get_names, post_names = names_read_by(source)
    get_names |= forms.get(route.route, {}).get("get", set())
    post_names |= forms.get(route.route, {}).get("post", set())
    # Never confirm a destructive form with a valid value; every other field gets every value.
    post_names.discard("csrfmiddlewaretoken")

    def path():
        return fill(route, values, unknown, **({"conversation_id": _throwaway_conversation()}
                                               if route.name == "delete_conversation" else {}))

    base = path()
    if crawl.send(route, "get", base, what="plain").status_code != 405:
        for name in sorted(get_names):
            for value in HOSTILE:
                crawl.send(route, "get", f"{base}?{query([(name, value)])}", what=f"{name}={value!r}")
            crawl.send(route, "get", f"{base}?{query([(name, '1'), (name, '²'), (name, SURROGATE)])}",
                       what=f"{name} repeated")
        crawl.send(route, "get", f"{base}?{query([(n, HOSTILE[3]) for n in sorted(get_names)])}",
                   what="all query names at once")
        for value in IGNORED:
            crawl.send(route, "get", f"{base}?{query([('unknown_parameter', value)])}", what="unknown parameter")
    if not post_names or route.name in ("delete_conversation",):
        return
    form_type = "application/x-www-form-urlencoded"
    if crawl.send(route, "post", base, body=b"", content_type=form_type, what="empty form").status_code == 405:
        return
    for name in sorted(post_names):
        for value in HOSTILE:
            crawl.send(route, "post", path(), body=query([(name, value)]).encode(), content_type=form_type,
                       what=f"form {name}={value!r}")
        crawl.send(route, "post", path(), body=query([(name, "٣"), (name, SURROGATE)]).encode(),
                   content_type=form_type, what=f"form {name} repeated")


def fuzz_api_route(crawl: Crawl, route: Route, operations, covered_ops, values, unknown):
    methods = {method: op for (path, method), op in operations.items() if path == route.openapi_path}
    if not methods:  # the schema, the docs, the catch-all
        methods = {"get": {"query": [], "body": None}}
    for method, op in methods.items():
        covered_ops.add((route.openapi_path, method))

        def path(method=method):
            if method == "delete":
                return fill(route, values, unknown, conversation_id=_throwaway_conversation())
            return fill(route, values, unknown)

        # A DELETE really deletes (through the erasure path): one call, and the path fuzz above.
        names = [] if method == "delete" else list(op["query"])
        if method == "delete":
            crawl.send(route, method, path(), what="delete a throwaway conversation")
        else:
            for value in IGNORED:
                crawl.send(route, method, f"{path()}?{query([('unknown_parameter', value)])}",
                           what="unknown parameter")
        for name in names:
            for value in HOSTILE:
                crawl.send(route, method, f"{path()}?{query([(name, value)])}", what=f"{name}={value!r}")
            crawl.send(route, method, f"{path()}?{query([(name, '1'), (name, '٣')])}", what=f"{name} repeated")
        body = op["body"]
        if body is None:
            continue
        example = body["example"]
        for prop in sorted(body["properties"] | {"unknown_field"}):
            for value in HOSTILE + JSON_HOSTILE:
                data = json.dumps({**example, prop: value}).encode()
                crawl.send(route, method, path(), body=data, content_type="application/json",
                           what=f"body {prop}={value!r}"[:120])
        for content_type, raw in RAW_BODIES:
            crawl.send(route, method, path(), body=raw, content_type=content_type, what=f"raw {raw[:20]!r}")
