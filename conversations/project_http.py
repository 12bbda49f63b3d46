"""Which project a request acts in, set once for the whole request (conversations/projects.py).

- An **API key** acts in its own project (narrowed to its namespaces, if it was). An
  all-projects key acts in every project, or in the one its request names in the
  `X-Memoryui-Project` header (the clients' `project` argument).
- A **person** acts in the project of the page's address, so links and bookmarks keep
  their project: the `default` project's pages are at the root (`/conversations/…`),
  every other project's under `/p/<slug>/`. A project the person does not belong to
  answers 404, as if it did not exist; a person outside `default` who opens a root page
  is sent to the same page in their first project. The API called from a signed-in
  browser acts in the project named by the `X-Memoryui-Project` header, else in the one
  whose pages the person opened last.
- Anyone else acts in no project at all: every project table reads empty.

An answer to a request that acted in every project (an all-projects key naming none) says
so, `X-Memoryui-Project: *`, so that a client which must stay inside one project (the MCP
server) can tell such a key from a project's before it writes anything.

Page addresses are built by Django's `reverse()` and `{% url %}` under the request's
script prefix, which this middleware sets to the project's prefix for the request, so no
template or view names the project to stay in it.
"""

import re
from contextlib import contextmanager

from django.http import Http404, HttpResponseRedirect
from django.urls import get_script_prefix, set_script_prefix

from . import project_store, projects
from .apiauth import authenticate_bearer
from .errors import Forbidden
from .models import ApiKey, Project
from .roles import actor_of

HEADER = "X-Memoryui-Project"
EVERY_PROJECT = "*"
SESSION_KEY = "memoryui_project"
_PREFIX = re.compile(r"^/p/(?P<slug>[-a-zA-Z0-9_]{1,64})(?P<rest>/.*)$")
# Not pages: what lives here answers the same in every project, or takes its project elsewhere.
_UNPREFIXED = ("/api/", "/v1/", "/static/", "/healthz", "/readyz", "/metrics", "/favicon.ico")


class ProjectMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        match = _PREFIX.match(request.path_info)
        slug = None
        if match:
            slug, rest = match["slug"], match["rest"]
            if rest.startswith(_UNPREFIXED):
                raise Http404("pages only live under a project's address")
            request.path_info = rest
        elif request.path_info == "/p" or request.path_info.startswith("/p/"):
            raise Http404("no such project")
        scope, project = _scope_of(request, slug)
        before = get_script_prefix()
        if isinstance(project, HttpResponseRedirect):
            return project
        request.project = project
        request.project_scope = scope
        prefix = before
        # The server's own prefix, under which every project's pages live (`page_address`).
        request.project_base = before
        if project is not None and project.pk != projects.DEFAULT_PROJECT_ID:
            prefix = f"{before.rstrip('/')}/p/{project.slug}/"
        with _in_project(scope, prefix, before):
            response = self.get_response(request)
        if scope.every:
            response[HEADER] = EVERY_PROJECT
        if response.streaming:
            # A streamed answer (an export, a ZIP) is read after this returns: in the same scope.
            response.streaming_content = _streamed_in(response.streaming_content, scope, prefix, before)
        return response


@contextmanager
def _in_project(scope, prefix: str, before: str):
    set_script_prefix(prefix)
    try:
        with projects.scoped(scope):
            yield
    finally:
        set_script_prefix(before)


_END = object()


def _streamed_in(chunks, scope, prefix: str, before: str):
    """The chunks of a streamed answer, each made inside the request's project scope."""
    chunks = iter(chunks)
    while True:
        with _in_project(scope, prefix, before):
            chunk = next(chunks, _END)
        if chunk is _END:
            return
        yield chunk


def acts_for_every_project(request) -> bool:
    """Whether the caller may act for every project: an all-projects API key, or a superuser
    (an admin of every project) on the pages or the API from their browser."""
    key = getattr(request, "api_key", None)
    if key is not None:
        return key.project_id is None
    user = getattr(request, "user", None)
    return bool(user is not None and user.is_authenticated and user.is_active and user.is_superuser)


@contextmanager
def every_project(request, *, reason: str):
    """The block acts for every project, recorded in the audit log with `reason`
    (project_store.bypass), when the caller may (`acts_for_every_project`); 403 otherwise."""
    if not acts_for_every_project(request):
        raise Forbidden("only a superuser or an all-projects API key may act for every project", field="all_projects")
    with project_store.bypass(reason=reason, actor=actor_of(request)):
        yield


def page_address(project: Project, path: str = "/", base: str = "/") -> str:
    """The address of the page at `path` (as a project's own URLs read it: "/search/") in
    `project`, under the server's prefix `base`: at the root for `default`, else under /p/<slug>/."""
    root = base.rstrip("/")
    if project.pk == projects.DEFAULT_PROJECT_ID:
        return f"{root}{path}"
    return f"{root}/p/{project.slug}{path}"


def page_url(request, path: str) -> str:
    """`path` (a page, as in `page_address`) as an absolute address in the project the request
    acts in: an API answer's link to a page (a search hit's) keeps the key's project. Where the
    request sees every project (an all-projects key naming none), the root's."""
    scope = projects.current()
    # A page of hits asks once per hit: the project's part of the address is worked out once.
    known = getattr(request, "_page_roots", None)
    if known is None:
        known = request._page_roots = {}
    root = known.get(scope.project_id)
    if root is None:
        project = getattr(request, "project", None)
        if project is None and scope.one:
            project = _keys_project(request, scope.project_id) or Project.objects.filter(pk=scope.project_id).first()
        base = getattr(request, "project_base", "/")
        root = known[scope.project_id] = page_address(project, "", base) if project is not None else ""
    return request.build_absolute_uri(root + path)


def _keys_project(request, project_id: int) -> Project | None:
    """The project of the request's key, as far as an address needs it (its id and slug, read
    with the key: api_keys.ACTIVE_KEY), when the scope is that project; else None."""
    key = getattr(request, "api_key", None)
    slug = getattr(key, "project_slug", None)
    if key is None or not slug or key.project_id != project_id:
        return None
    return Project(pk=project_id, slug=slug)


def _bearer(request) -> ApiKey | None | bool:
    header = request.headers.get("Authorization", "")
    if header[:7].lower() != "bearer ":
        return False
    return authenticate_bearer(request, header[7:].strip())


def _scope_of(request, slug: str | None):
    key = _bearer(request)
    if key:
        return _key_scope(request, key)
    # No key, or a bad one: the API then admits a signed-in person by their session, if any.
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated or not user.is_active:
        # A bookmark opened while signed out goes to the login page, whatever its project.
        return projects.NOTHING, None
    mine = Project.objects.all() if user.is_superuser else Project.objects.filter(memberships__user=user)
    if slug is not None:
        project = mine.filter(slug=slug).first()
        if project is None:
            raise Http404("no such project")
        if request.session.get(SESSION_KEY) != project.slug:
            request.session[SESSION_KEY] = project.slug
    elif request.path_info.startswith(_UNPREFIXED):
        project = _api_project(request, mine)
    else:
        project = mine.filter(pk=projects.DEFAULT_PROJECT_ID).first()
        if project is None:
            first = mine.order_by("id").first()
            if first is not None and request.method in ("GET", "HEAD"):
                return projects.NOTHING, HttpResponseRedirect(f"/p/{first.slug}{request.get_full_path()}")
        elif request.session.get(SESSION_KEY, project.slug) != project.slug:
            request.session[SESSION_KEY] = project.slug
    if project is None:
        return projects.NOTHING, None
    return projects.one(project.pk), project


def _api_project(request, mine) -> Project | None:
    named = request.headers.get(HEADER, "").strip()
    if named:
        project = mine.filter(slug=named).first() if len(named) <= 64 else None
        if project is None:
            raise Http404(f"no project {named[:64]!r}")
        return project
    remembered = request.session.get(SESSION_KEY)
    found = mine.filter(slug=remembered).first() if remembered else None
    return found or mine.filter(pk=projects.DEFAULT_PROJECT_ID).first() or mine.order_by("id").first()


def _key_scope(request, key: ApiKey) -> tuple[projects.Scope, Project | None]:
    named = request.headers.get(HEADER, "").strip()
    if key.project_id is not None:
        if named and not Project.objects.filter(pk=key.project_id, slug=named).exists():
            raise Http404(f"no project {named[:64]!r} for this key")
        return projects.one(key.project_id, key.namespaces or None), None
    if not named:
        return projects.EVERY, None
    project = Project.objects.filter(slug=named).first() if len(named) <= 64 else None
    if project is None:
        raise Http404(f"no project {named[:64]!r}")
    return projects.one(project.pk), project
