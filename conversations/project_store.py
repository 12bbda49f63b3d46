"""Writes of projects and their members, one transaction each, audited (conversations/projects.py)."""

import re
from contextlib import contextmanager

from django.db import IntegrityError, transaction

from . import projects
from .errors import Conflict, InvalidInput, NotFound
from .models import Membership, Project
from .roles import ROLES, assign_role, remove_membership
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


def set_member(*, project: Project, user, role: str, actor: str) -> Membership:
    if role not in ROLES:
        raise InvalidInput(f"unknown role {role!r}; expected one of {', '.join(ROLES)}", field="role")
    with transaction.atomic():
        membership = assign_role(user, role, project)
        record_audit(actor=actor, action="project.member_set", target_type="user", target_id=str(user.pk),
                     detail={"role": role}, project_id=project.pk)
    return membership


def remove_member(*, project: Project, user, actor: str) -> None:
    with transaction.atomic():
        if not remove_membership(user, project):
            raise NotFound(f"{user.get_username()!r} is not a member of {project.slug!r}", field="user")
        record_audit(actor=actor, action="project.member_removed", target_type="user", target_id=str(user.pk),
                     detail={}, project_id=project.pk)


def default_project() -> Project:
    return Project.objects.get(pk=projects.DEFAULT_PROJECT_ID)


@contextmanager
def bypass(*, reason: str, actor: str):
    """Every project, from inside a request that may act on all of them (an all-projects
    deletion request, a server-wide prune): recorded in the audit log with its reason."""
    before = projects.current()
    record_audit(actor=actor, action="scope.bypass", target_type="project",
                 target_id="" if before.project_id is None else str(before.project_id), detail={"reason": reason})
    with projects.scoped(projects.EVERY):
        yield
