"""The admin page for agents' API keys: list, create (secret shown once), revoke.

Admins only: anyone else logged in gets 403, anonymous visitors the login page.
The secret is rendered into the response to the create POST and nowhere else;
it is never stored, not even in the session.
"""

from functools import wraps

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.shortcuts import redirect, render
from django.utils.cache import add_never_cache_headers
from django.views.decorators.http import require_safe, require_POST

from . import store
from .errors import StoreError
from .models import ApiKey
from .roles import is_admin

SCOPE_HELP = {
    "read": "list and read conversations, the active view, checkpoints, exports",
    "write": "create conversations, append messages, checkpoint, fork",
    "admin": "everything above, and delete conversations",
    "facts:read": "recall approved long-term facts",
    "facts:write": "propose long-term facts (a reviewer approves them)",
}


def _admin_only(view):
    @wraps(view)
    def wrapper(request, *args, **kwargs):
        if not is_admin(request.user):
            raise PermissionDenied("Only admins manage API keys.")
        return view(request, *args, **kwargs)

    return login_required(wrapper)


def _actor(request) -> str:
    return f"user:{request.user.get_username()}"


def _page(request, *, status=200, **context):
    context.setdefault("name", "")
    context.setdefault("chosen", {"read", "write"})
    context["keys"] = ApiKey.objects.order_by("revoked_at", "-created_at", "-id")
    context["scopes"] = [(s, SCOPE_HELP.get(s, "")) for s in ApiKey.SCOPES]
    context["api_base"] = request.build_absolute_uri("/api/v1/")
    response = render(request, "conversations/keys.html", context, status=status)
    # no-store: the answer to a create holds the new secret, and no cache may keep it.
    add_never_cache_headers(response)
    return response


@require_safe
@_admin_only
def keys(request):
    return _page(request)


@require_POST
@_admin_only
def create_key(request):
    name = request.POST.get("name", "")
    chosen = [s for s in request.POST.getlist("scopes") if s in ApiKey.SCOPES]
    unknown = [s for s in request.POST.getlist("scopes") if s not in ApiKey.SCOPES]
    try:
        if unknown:
            raise StoreError(f"unknown scope {', '.join(unknown)[:100]}", field="scopes")
        key, secret = store.create_api_key(name=name, scopes=chosen, created_by=_actor(request))
    except StoreError as exc:
        return _page(request, status=400, error=exc, name=name[:200], chosen=set(chosen))
    return _page(request, created=key, secret=secret)


@require_POST
@_admin_only
def revoke_key(request, key_id: int):
    try:
        if key_id > 2**63 - 1:  # cannot exist, and must not reach the database driver
            raise StoreError(f"API key {key_id} not found", field="id")
        key = store.revoke_api_key(key_id=key_id, revoked_by=_actor(request))
    except StoreError as exc:
        return _page(request, status=404, error=exc)
    messages.success(request, f"Revoked “{key.name}” ({key.prefix}). Requests with it now get 401.")
    return redirect("keys")
