"""The project switcher in every page's header: the current project, and where the same
person would land in each other project they belong to.

A page that lists or searches a project (the conversations, search, the review queue, the
admin pages) has a counterpart in every project: the switcher links to it, with the search
words kept. A page about one object (a conversation, a subject, a receipt) has none, since
the object belongs to one project: the switcher links to the other project's home. So does
it where the person's role there does not open the page (an auditor in the other project
gets its home, not a 403 for its review queue).
"""

from dataclasses import dataclass
from urllib.parse import urlencode

from django.urls import Resolver404, resolve

from . import projects
from .models import Project
from .project_http import page_address
from .roles import projects_of, roles_of

# Query parameters that mean the same in every project (cursors and positions do not).
KEPT_PARAMETERS = ("q",)


@dataclass(frozen=True)
class Choice:
    project: Project
    url: str
    current: bool


def choices(request) -> list[Choice]:
    """Every project the person may switch to, the current one marked (empty for one project)."""
    current = getattr(request, "project", None)
    user = getattr(request, "user", None)
    if current is None or user is None:
        return []
    mine = projects_of(user)
    if len(mine) < 2:
        return []
    base = getattr(request, "project_base", "/")
    same_page = _same_page(request)
    return [Choice(project=p, current=p.pk == current.pk,
                   url=page_address(p, _path_in(p, request, user, same_page), base))
            for p in mine]


def _same_page(request):
    """The view of this page when it has a counterpart in other projects, else None."""
    if request.method not in ("GET", "HEAD"):
        return None
    try:
        match = resolve(request.path_info)
    except Resolver404:
        return None
    return None if match.args or match.kwargs else match.func


def _path_in(project: Project, request, user, view) -> str:
    if view is None:
        return "/"
    allowed = getattr(view, "allowed", None)
    with projects.scoped(projects.one(project.pk)):
        opens = allowed(user) if allowed is not None else bool(roles_of(user))
    if not opens:
        return "/"
    kept = [(k, v) for k in KEPT_PARAMETERS for v in request.GET.getlist(k)]
    return request.path_info + (f"?{urlencode(kept)}" if kept else "")
