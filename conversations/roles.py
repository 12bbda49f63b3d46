"""The three roles of docs/DESIGN.md, as Django groups.

Permissions are checked in views and API handlers through these helpers, never
only in templates; pages declare theirs with one decorator, `role_required` (or one
of the three made from it).
"""

from collections.abc import Callable
from functools import wraps

from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import Group
from django.core.exceptions import PermissionDenied

from .models import ApiKey

AUDITOR, REVIEWER, ADMIN = "auditor", "reviewer", "admin"
ROLES = (AUDITOR, REVIEWER, ADMIN)


def roles_of(user) -> set[str]:
    if not user or not user.is_authenticated or not user.is_active:
        return set()
    if user.is_superuser:
        return set(ROLES)
    names = getattr(user, "_memoryui_roles", None)
    if names is None:
        names = set(user.groups.filter(name__in=ROLES).values_list("name", flat=True))
        user._memoryui_roles = names
    return names


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


def assign_role(user, role: str) -> None:
    if role not in ROLES:
        raise ValueError(f"unknown role {role!r}; expected one of {', '.join(ROLES)}")
    group, _ = Group.objects.get_or_create(name=role)
    user.groups.remove(*Group.objects.filter(name__in=ROLES).exclude(pk=group.pk))
    user.groups.add(group)
    if hasattr(user, "_memoryui_roles"):
        del user._memoryui_roles


def role_required(allowed: Callable[[object], bool], refusal: str):
    """The one role decorator for pages: a visitor who is not signed in goes to the login
    page; one signed in without the role gets a 403 saying why (`refusal`)."""

    def decorate(view):
        @wraps(view)
        def wrapper(request, *args, **kwargs):
            if not allowed(request.user):
                raise PermissionDenied(refusal)
            return view(request, *args, **kwargs)

        return login_required(wrapper)

    return decorate


reader_required = role_required(
    can_read_conversations, "Your account has no role: ask an admin for auditor, reviewer or admin.")
reviewer_required = role_required(
    can_review_facts, "Facts are personal data: only reviewers and admins may see them.")
admin_required = role_required(is_admin, "admins only")
