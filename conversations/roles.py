"""The three roles of docs/DESIGN.md, held per project (`Membership`).

A person holds one role in each project they belong to; a superuser is an admin of every
project. `roles_of(user)` answers for the project the request is in (conversations/projects.py).
Permissions are checked in views and API handlers through these helpers, never
only in templates; pages declare theirs with one decorator, `role_required` (or one
of the three made from it).
"""

from collections.abc import Callable
from functools import wraps

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied

from . import projects
from .models import ApiKey, Membership, Project

AUDITOR, REVIEWER, ADMIN = "auditor", "reviewer", "admin"
ROLES = (AUDITOR, REVIEWER, ADMIN)


def roles_of(user, project_id: int | None = None) -> set[str]:
    """The person's role in `project_id` (by default the current scope's project, or
    `default` where the scope is every project), as a set of at most one name; every role
    for a superuser."""
    if not user or not user.is_authenticated or not user.is_active:
        return set()
    if user.is_superuser:
        return set(ROLES)
    if project_id is None:
        scope = projects.current()
        project_id = scope.project_id if scope.one else projects.DEFAULT_PROJECT_ID if scope.every else None
    if project_id is None:
        return set()
    held = getattr(user, "_memoryui_roles", None)
    if held is None:
        held = user._memoryui_roles = dict(Membership.objects.filter(user=user).values_list("project_id", "role"))
    role = held.get(project_id)
    return {role} if role else set()


def projects_of(user) -> list[Project]:
    """The projects a person may switch to: every one for a superuser, else their memberships'."""
    if not user or not user.is_authenticated or not user.is_active:
        return []
    if user.is_superuser:
        return list(Project.objects.order_by("id"))
    return list(Project.objects.filter(memberships__user=user).order_by("id"))


def actor_of(request) -> str:
    """Who did it, for audit and created_by fields, on a page or through the API:
    'key:<name>' for an API key, 'user:<username>' for a person."""
    auth = getattr(request, "auth", None)
    if isinstance(auth, ApiKey):
        return f"key:{auth.name}"
    user = getattr(request, "user", None)
    if user is not None and user.is_authenticated:
        return f"user:{user.get_username()}"
    return "anonymous"


def is_admin(user) -> bool:
    return ADMIN in roles_of(user)


def can_read_conversations(user) -> bool:
    return bool(roles_of(user))


def can_review_facts(user) -> bool:
    return bool(roles_of(user) & {REVIEWER, ADMIN})


def assign_role(user, role: str, project: Project | int | None = None) -> Membership:
    """Give the person `role` in `project` (`default` if none is named), replacing the role
    they held there; other projects are left as they are."""
    if role not in ROLES:
        raise ValueError(f"unknown role {role!r}; expected one of {', '.join(ROLES)}")
    project_id = getattr(project, "pk", project) or projects.DEFAULT_PROJECT_ID
    membership, _ = Membership.objects.update_or_create(user=user, project_id=project_id, defaults={"role": role})
    if hasattr(user, "_memoryui_roles"):
        del user._memoryui_roles
    return membership


def remove_membership(user, project: Project | int) -> bool:
    project_id = getattr(project, "pk", project)
    removed, _ = Membership.objects.filter(user=user, project_id=project_id).delete()
    if hasattr(user, "_memoryui_roles"):
        del user._memoryui_roles
    return bool(removed)


def role_required(allowed: Callable[[object], bool], refusal: str):
    """The one role decorator for pages: a visitor who is not signed in goes to the login
    page; one signed in without the role gets a 403 saying why (`refusal`)."""

    def decorate(view):
        @wraps(view)
        def wrapper(request, *args, **kwargs):
            if not allowed(request.user):
                raise PermissionDenied(refusal)
            return view(request, *args, **kwargs)

        # Read by the project switcher (conversations/switcher.py): whether the same page opens
        # for this person in another project. functools.wraps carries it to the outer decorators.
        wrapper.allowed = allowed
        return login_required(wrapper)

    return decorate


reader_required = role_required(
    can_read_conversations, "Your account has no role: ask an admin for auditor, reviewer or admin.")
reviewer_required = role_required(
    can_review_facts, "Facts are personal data: only reviewers and admins may see them.")
admin_required = role_required(is_admin, "admins only")
# What is the whole server's, not a project's (the projects, the embedding worker).
superuser_required = role_required(lambda user: user.is_superuser, "Only superusers manage the whole server.")
