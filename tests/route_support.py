"""What is routed, found from the URL resolver, and the names a view's parsing code reads: shared
by the crawler (tests/test_crawler.py) and the cross-project matrix (tests/test_project_matrix.py),
so that a new page or endpoint is walked by both as soon as it is routed."""

import inspect
import re
from dataclasses import dataclass

from django.urls import URLPattern, URLResolver, get_resolver


@dataclass
class Route:
    route: str  # Django's pattern, e.g. conversations/<str:conversation_id>/
    name: str | None
    callback: object
    path_params: list[tuple[str, str]]  # (name, converter kind: int or str)

    @property
    def is_api(self) -> bool:
        return self.route.startswith("api/")

    @property
    def openapi_path(self) -> str:
        return "/" + re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", self.route)


def routes() -> list[Route]:
    found, seen = [], set()

    def walk(patterns, prefix):
        for p in patterns:
            if isinstance(p, URLResolver):
                walk(p.url_patterns, prefix + str(p.pattern))
            elif isinstance(p, URLPattern):
                route = prefix + str(p.pattern)
                if route in seen:
                    continue
                seen.add(route)
                params = [(name, kind or "str") for kind, name in re.findall(r"<(?:(\w+):)?(\w+)>", route)]
                found.append(Route(route, p.name, p.callback, params))

    walk(get_resolver().url_patterns, "")
    return found


def view_source(callback) -> str:
    """The view's own source and that of the module's functions it calls (one level)."""
    func = callback
    while hasattr(func, "__wrapped__"):
        func = func.__wrapped__
    try:
        own = inspect.getsource(func)
    except (OSError, TypeError):
        return ""
    module = inspect.getmodule(func)
    helpers = []
    for name in set(re.findall(r"\b(\w+)\(", own)):
        helper = getattr(module, name, None)
        if inspect.isfunction(helper) and helper is not func and inspect.getmodule(helper) is module:
            helpers.append(inspect.getsource(helper))
    return "\n".join([own, *helpers])


_GET_NAMES = [r'GET\.get(?:list)?\(\s*"([\w-]+)"', r'_param\(\s*request\.GET,\s*"([\w-]+)"',
              r'_int_param\(\s*request,\s*"([\w-]+)"', r'\b(?:data|query|params|values)\.get\(\s*"([\w-]+)"']
_POST_NAMES = [r'POST\.get(?:list)?\(\s*"([\w-]+)"', r'_field\(\s*request\.POST\.get\(\s*"([\w-]+)"']


def names_read_by(source: str) -> tuple[set[str], set[str]]:
    """(query names, form names) a view module's parsing code reads."""
    get = {n for rx in _GET_NAMES for n in re.findall(rx, source)}
    post = {n for rx in _POST_NAMES for n in re.findall(rx, source)}
    for names in re.findall(r"for k in \(([^)]*)\)", source):
        both = set(re.findall(r'"([\w-]+)"', names))
        get |= both
        post |= both
    return get, post


