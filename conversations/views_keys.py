"""The admin page for agents' API keys: list, create (secret shown once), revoke.

The page lists and makes the current project's keys, each with its project and the
namespaces it is narrowed to. Keys for the whole server (all projects) are an operator's:
a superuser sees them on every project's page, marked as such, and may make one; to
anyone else they do not exist.

Revoking is confirmed once (conversations/confirm.py): the panel names the key, its
scopes and when it was last used, and says that agents using it are refused at once.

Admins only: anyone else logged in gets 403, anonymous visitors the login page.
The secret is rendered into the response to the create POST and nowhere else;
it is never stored, not even in the session.
"""

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.cache import add_never_cache_headers
from django.views.decorators.http import require_http_methods, require_POST, require_safe

from . import api_keys, params, project_store
from .confirm import Confirmation, confirmed, not_confirmed, render_confirmation
from .errors import StoreError
from .models import ApiKey
from .roles import actor_of, is_admin, role_required

SCOPE_HELP = {
    "read": "list and read conversations, the active view, checkpoints, exports",
    "write": "create conversations, append messages, checkpoint, fork",
    "admin": "everything above, and delete conversations",
    "facts:read": "recall approved long-term facts",
    "facts:write": "propose long-term facts (a reviewer approves them)",
}


def _keys(request):
    return api_keys.keys_seen(all_projects=request.user.is_superuser)


def _page(request, *, status=200, **context):
    context.setdefault("name", "")
    context.setdefault("namespaces", "")
    context.setdefault("chosen", {"read", "write"})
    context["keys"] = _keys(request).select_related("project").order_by("revoked_at", "-created_at", "-id")
    context["scopes"] = [(s, SCOPE_HELP.get(s, "")) for s in ApiKey.SCOPES]
    context["api_base"] = request.build_absolute_uri("/api/v1/")
    response = render(request, "conversations/keys.html", context, status=status)
    # no-store: the answer to a create holds the new secret, and no cache may keep it.
    add_never_cache_headers(response)
    return response


_admin_only = role_required(is_admin, "Only admins manage API keys.")


@require_safe
@_admin_only
def keys(request):
    return _page(request)


@require_POST
@_admin_only
def create_key(request):
    name = request.POST.get("name", "")
    namespaces = request.POST.get("namespaces", "")
    all_projects = request.POST.get("all_projects") == "yes"
    chosen = [s for s in request.POST.getlist("scopes") if s in ApiKey.SCOPES]
    unknown = [s for s in request.POST.getlist("scopes") if s not in ApiKey.SCOPES]
    actor = actor_of(request)
    try:
        if unknown:
            raise StoreError(f"unknown scope {', '.join(unknown)[:100]}", field="scopes")
        if all_projects and not request.user.is_superuser:
            raise PermissionDenied("Only a superuser makes a key for all projects.")
        if all_projects:
            with project_store.server_wide(reason="an all-projects API key made", actor=actor):
                key, secret = api_keys.create_api_key(name=name, scopes=chosen, created_by=actor,
                                                      all_projects=True, namespaces=namespaces)
        else:
            key, secret = api_keys.create_api_key(name=name, scopes=chosen, created_by=actor,
                                                  project=request.project, namespaces=namespaces)
    except StoreError as exc:
        return _page(request, status=400, error=exc, name=name[:200], namespaces=namespaces[:2000],
                     chosen=set(chosen), all_projects=all_projects)
    return _page(request, created=key, secret=secret)


def _revoke_confirmation(key: ApiKey) -> Confirmation:
    used = f"{key.last_used_at:%Y-%m-%d %H:%M} UTC" if key.last_used_at else "never"
    return Confirmation(
        title=f"Revoke the API key “{key.name}”?",
        action=reverse("key_revoke", args=[key.pk]), button=f"Revoke “{key.name}”", cancel=reverse("keys"),
        details=[("Name", key.name), ("Key", f"mui_{key.prefix}_…"),
                 ("Project", "all projects (the whole server)" if key.all_projects else key.project.slug),
                 ("Namespaces", ", ".join(key.namespaces) or "all of the project's"),
                 ("Scopes", ", ".join(key.scopes)),
                 ("Created", f"{key.created_at:%Y-%m-%d %H:%M} UTC"
                  + (f" by {key.created_by}" if key.created_by else "")),
                 ("Last used", used)],
        consequences=["Every agent using this key gets 401 on its next request, at once: appends, reads and "
                      "recalls with it stop working.",
                      "Conversations and facts it wrote stay."],
        undo="Nothing undoes this: to let an agent back in, create a new key and give it to the agent.",
        box="I understand that agents using this key stop working now.",
    )


@require_http_methods(["GET", "HEAD", "POST"])
@_admin_only
def revoke_key(request, key_id: int):
    """GET: the confirmation panel. POST with the box ticked: revoke. POST without: the panel again."""
    key = _keys(request).filter(pk=key_id).first() if key_id <= params.MAX_BIGINT else None
    if key is None:  # an id past bigint cannot exist, and must not reach the database driver
        return _page(request, status=404, error=StoreError(f"API key {key_id} not found", field="id"))
    if key.revoked_at is not None:
        messages.info(request, f"“{key.name}” ({key.prefix}) was already revoked.")
        return redirect("keys")
    if not confirmed(request):
        confirmation = _revoke_confirmation(key)
        if request.method == "POST":
            return not_confirmed(request, confirmation)
        response = render_confirmation(request, confirmation)
        add_never_cache_headers(response)
        return response
    try:
        if key.all_projects:
            with project_store.server_wide(reason="an all-projects API key revoked", actor=actor_of(request)):
                key = api_keys.revoke_api_key(key_id=key_id, revoked_by=actor_of(request), all_projects=True)
        else:
            key = api_keys.revoke_api_key(key_id=key_id, revoked_by=actor_of(request))
    except StoreError as exc:
        return _page(request, status=404, error=exc)
    messages.success(request, f"Revoked “{key.name}” ({key.prefix}). Requests with it now get 401.")
    return redirect("keys")
