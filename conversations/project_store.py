"""Writes of projects and their members, one transaction each, audited (conversations/projects.py)."""

import re
import secrets
from contextlib import contextmanager

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction

from . import projects
from .db import LockingQuerySet
from .errors import Conflict, InvalidInput, NotFound
from .models import Membership, Project
from .roles import ADMIN, ROLES, assign_role, remove_membership
from .store import clean_text, record_audit

SLUG = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
# Words a project's address would collide with.
RESERVED = {"api", "v1", "static", "admin", "p"}
RETENTION_MAX_DAYS = 36500


def _retention(days) -> int | None:
    if days is None or days == "":
        return None
    try:
        days = int(days)
    except (TypeError, ValueError):
        raise InvalidInput("retention_days must be a whole number of days", field="retention_days") from None
    if not 1 <= days <= RETENTION_MAX_DAYS:
        raise InvalidInput(f"retention_days must be between 1 and {RETENTION_MAX_DAYS}", field="retention_days")
    return days


def create_project(*, slug: str, name: str = "", retention_days=None, actor: str = "system") -> Project:
    """A new project; its slug is its address (`/p/<slug>/`), lower case, unique."""
    slug = clean_text(slug, field="slug", max_length=64, required=True)
    if not SLUG.fullmatch(slug) or slug in RESERVED:
        raise InvalidInput(f"a project's slug is 1 to 64 lower-case letters, digits, - and _, starting with a "
                           f"letter or digit, and not one of {', '.join(sorted(RESERVED))}; got {slug!r}",
                           field="slug")
    name = clean_text(name or slug, field="name", max_length=200, required=True)
    days = _retention(retention_days)
    try:
        with transaction.atomic():
            project = Project.objects.create(slug=slug, name=name, retention_days=days)
            record_audit(actor=actor, action="project.created", target_type="project", target_id=str(project.pk),
                         detail={"slug": slug, "retention_days": days}, project_id=None)
    except IntegrityError:
        raise Conflict(f"a project {slug!r} already exists", field="slug", code="project_exists") from None
    return project


def set_retention(*, project: Project, retention_days, actor: str) -> Project:
    """How long the project keeps a conversation after its last row (None: the server's default)."""
    days = _retention(retention_days)
    with transaction.atomic():
        Project.objects.filter(pk=project.pk).update(retention_days=days)
        record_audit(actor=actor, action="project.retention_set", target_type="project", target_id=str(project.pk),
                     detail={"retention_days": days}, project_id=project.pk)
    project.retention_days = days
    return project


def _check_role(role) -> str:
    if role not in ROLES:
        raise InvalidInput(f"unknown role {str(role)[:40]!r}; expected one of {', '.join(ROLES)}", field="role")
    return role


def _keep_an_admin(project: Project, user, *, field: str) -> None:
    """Refuse to demote or remove the project's last admin: nobody but a superuser could
    manage its members and keys after that. The admins' rows are read under the project's
    row lock, so two admins demoting each other at once cannot both succeed."""
    LockingQuerySet(Project).filter(pk=project.pk).for_update().first()
    admins = set(Membership.objects.filter(project=project, role=ADMIN).values_list("user_id", flat=True))
    if admins == {user.pk}:
        raise Conflict(f"{user.get_username()!r} is the last admin of {project.slug!r}: make another member "
                       "admin first", field=field, code="last_admin")


def set_member(*, project: Project, user, role: str, actor: str) -> Membership:
    """Give `user` `role` in `project` (adding them, or changing the role they hold there)."""
    role = _check_role(role)
    with transaction.atomic():
        if role != ADMIN:
            _keep_an_admin(project, user, field="role")
        membership = assign_role(user, role, project)
        record_audit(actor=actor, action="project.member_set", target_type="user", target_id=str(user.pk),
                     detail={"role": role}, project_id=project.pk)
    return membership


def remove_member(*, project: Project, user, actor: str) -> None:
    with transaction.atomic():
        _keep_an_admin(project, user, field="user")
        if not remove_membership(user, project):
            raise NotFound(f"{user.get_username()!r} is not a member of {project.slug!r}", field="user")
        record_audit(actor=actor, action="project.member_removed", target_type="user", target_id=str(user.pk),
                     detail={}, project_id=project.pk)


def _username(raw) -> str:
    username = clean_text(raw, field="username", max_length=150, required=True)
    validate = get_user_model().username_validator
    try:
        validate(username)
    except ValidationError:
        raise InvalidInput("a username is letters, digits and @ . + - _ only", field="username") from None
    return username


def user_by_username(raw):
    """The person with this username (any project's: usernames are the server's), or NotFound."""
    username = _username(raw)
    found = get_user_model().objects.filter(username=username, is_active=True).first()
    if found is None:
        raise NotFound(f"no user {username!r}: create them instead", field="username")
    return found


def create_member(*, project: Project, username, role: str, actor: str):
    """A new person with `role` in `project`, and the password they sign in with, generated
    and returned once (only its hash is kept), as `create_user` prints it."""
    username, role = _username(username), _check_role(role)
    password = secrets.token_urlsafe(12)
    User = get_user_model()
    try:
        with transaction.atomic():
            user = User.objects.create_user(username, password=password, is_staff=role == ADMIN)
            record_audit(actor=actor, action="user.created", target_type="user", target_id=str(user.pk),
                         detail={}, project_id=project.pk)
            membership = assign_role(user, role, project)
            record_audit(actor=actor, action="project.member_set", target_type="user", target_id=str(user.pk),
                         detail={"role": role}, project_id=project.pk)
    except IntegrityError:
        raise Conflict(f"a user {username!r} already exists: add them as a member instead", field="username",
                       code="user_exists") from None
    return membership, password


def default_project() -> Project:
    return Project.objects.get(pk=projects.DEFAULT_PROJECT_ID)


@contextmanager
def server_wide(*, reason: str, actor: str):
    """Every project, for a write about the whole server (a project created, an all-projects key
    made or revoked) from wherever it is asked: as it is where every project is already seen,
    else through `bypass`, audited."""
    if projects.current().every:
        yield
        return
    with bypass(reason=reason, actor=actor):
        yield


@contextmanager
def bypass(*, reason: str, actor: str):
    """Every project, from inside a request that may act on all of them (an all-projects
    deletion request, a server-wide prune): recorded in the audit log with its reason."""
    before = projects.current()
    record_audit(actor=actor, action="scope.bypass", target_type="project",
                 target_id="" if before.project_id is None else str(before.project_id), detail={"reason": reason})
    with projects.scoped(projects.EVERY):
        yield
