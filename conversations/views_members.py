"""The admin pages for people: the members of the current project, and (for superusers)
every project on the server.

Members: an admin of the project lists its members with their roles, adds a person who
already has an account or creates one (the password generated and shown once, as
`create_user` prints it), changes a member's role and removes a member. A person who is
not a member of this project answers 404 here, whatever other project they are in.
Projects: a superuser sees every project and creates one (slug, name, retention days).
Every change is one `project_store` call, audited in its transaction.
"""

from django.contrib import messages
from django.db.models import Count
from django.http import Http404
from django.shortcuts import redirect, render
from django.utils.cache import add_never_cache_headers
from django.views.decorators.http import require_POST, require_safe

from . import params, project_store
from .errors import StoreError
from .models import Membership, Project
from .project_http import page_address
from .roles import ROLES, actor_of, is_admin, role_required

_admin_only = role_required(is_admin, "Only the project's admins manage its members.")
_superuser_only = role_required(lambda user: user.is_superuser, "Only superusers manage projects.")


def _members_page(request, *, status=200, **context):
    context.setdefault("username", "")
    context.setdefault("role", "auditor")
    context["members"] = (Membership.objects.filter(project=request.project).select_related("user")
                          .order_by("user__username"))
    context["roles"] = ROLES
    response = render(request, "conversations/members.html", context, status=status)
    # no-store: the answer to a create holds the new person's password.
    add_never_cache_headers(response)
    return response


def _member(request, user_id: int) -> Membership:
    """This project's membership of `user_id`; a person outside the project is not found."""
    found = (Membership.objects.filter(project=request.project, user_id=user_id).select_related("user").first()
             if user_id <= params.MAX_BIGINT else None)
    if found is None:
        raise Http404("no such member of this project")
    return found


@require_safe
@_admin_only
def members(request):
    return _members_page(request)


@require_POST
@_admin_only
def add_member(request):
    """Add a person who already has an account (or give a member another role)."""
    username, role = request.POST.get("username", ""), request.POST.get("role", "")
    try:
        person = project_store.user_by_username(username)
        project_store.set_member(project=request.project, user=person, role=role, actor=actor_of(request))
    except StoreError as exc:
        return _members_page(request, status=exc.status, error=exc, username=username[:150], role=role)
    messages.success(request, f"{person.get_username()} is now {role} in {request.project.name}.")
    return redirect("members")


@require_POST
@_admin_only
def create_member(request):
    """Create an account and make it a member; its password is shown once, in this answer."""
    username, role = request.POST.get("username", ""), request.POST.get("role", "")
    try:
        membership, password = project_store.create_member(project=request.project, username=username, role=role,
                                                           actor=actor_of(request))
    except StoreError as exc:
        return _members_page(request, status=exc.status, error=exc, new_username=username[:150], new_role=role)
    return _members_page(request, created=membership, password=password)


@require_POST
@_admin_only
def change_role(request, user_id: int):
    membership = _member(request, user_id)
    role = request.POST.get("role", "")
    try:
        project_store.set_member(project=request.project, user=membership.user, role=role, actor=actor_of(request))
    except StoreError as exc:
        return _members_page(request, status=exc.status, error=exc)
    messages.success(request, f"{membership.user.get_username()} is now {role} in {request.project.name}.")
    return redirect("members")


@require_POST
@_admin_only
def remove_member(request, user_id: int):
    membership = _member(request, user_id)
    try:
        project_store.remove_member(project=request.project, user=membership.user, actor=actor_of(request))
    except StoreError as exc:
        return _members_page(request, status=exc.status, error=exc)
    messages.success(request, f"Removed {membership.user.get_username()} from {request.project.name}: "
                              "they no longer see it. Add them again to undo.")
    return redirect("members")


def _projects_page(request, *, status=200, **context):
    context.setdefault("form", {})
    base = getattr(request, "project_base", "/")
    rows = Project.objects.annotate(member_count=Count("memberships")).order_by("id")
    context["projects"] = [(p, page_address(p, "/", base)) for p in rows]
    return render(request, "conversations/projects.html", context, status=status)


@require_safe
@_superuser_only
def project_list(request):
    return _projects_page(request)


@require_POST
@_superuser_only
def create_project(request):
    form = {name: request.POST.get(name, "")[:200] for name in ("slug", "name", "retention_days")}
    actor = actor_of(request)
    try:
        with project_store.server_wide(reason="a project created", actor=actor):
            project = project_store.create_project(slug=form["slug"], name=form["name"],
                                                   retention_days=form["retention_days"].strip(), actor=actor)
    except StoreError as exc:
        return _projects_page(request, status=exc.status, error=exc, form=form)
    messages.success(request, f"Created the project {project.name} ({project.slug}). Add its members from its "
                              "Members page; its keys from its API keys page.")
    return redirect("projects")
