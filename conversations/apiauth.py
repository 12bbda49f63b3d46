"""How the API knows who is calling, and what they may do.

Agents send `Authorization: Bearer <key>`; the key's scopes decide. A person
logged in to the pages may use the API from the same browser session (with
CSRF protection on writes, as ninja does) with the scopes of their role.
"""

import functools

from ninja.security import HttpBearer, SessionAuth

from . import api_keys
from .models import ApiKey
from .roles import ADMIN, REVIEWER, roles_of
from .roles import actor_of as actor_of  # re-exported: the API's handlers name who acted through apiauth


class ScopeError(Exception):
    """A known caller without the scope an operation needs (403)."""


def authenticate_bearer(request, token: str) -> ApiKey | None:
    """The active key for a bearer token, looked up once per request (the
    idempotency middleware needs the caller before the API does)."""
    cached = getattr(request, "_bearer_checked", None)
    if cached is not None and cached[0] == token:
        return cached[1]
    key = None
    # Real keys are short and printable; anything else cannot match, and a NUL
    # must not reach a database query.
    if token and len(token) <= 256 and token.isprintable():
        key = api_keys.authenticate_api_key(token)
    request._bearer_checked = (token, key)
    if key is not None:
        request.api_key = key
    return key


class ApiKeyAuth(HttpBearer):
    def authenticate(self, request, token):
        return authenticate_bearer(request, token)


class SessionReadAuth(SessionAuth):
    """Session auth that only admits users holding one of the three roles."""

    def _get_key(self, request):
        # Only a logged-in person with a role is checked for CSRF: a caller
        # without a session (an agent with a missing or bad key) must get the
        # 401 that tells it to send a key, not a CSRF 403.
        user = getattr(request, "user", None)
        if user is None or not roles_of(user):
            return None
        return super()._get_key(request)

    def authenticate(self, request, key):
        user = super().authenticate(request, key)
        if user and roles_of(user):
            return user
        return None


def scopes_of(request) -> set[str]:
    auth = getattr(request, "auth", None)
    if isinstance(auth, ApiKey):
        scopes = set(auth.scopes)
        if "admin" in scopes:
            scopes |= {"read", "write"}
        return scopes
    roles = roles_of(auth)
    scopes = {"read"} if roles else set()
    if roles & {REVIEWER, ADMIN}:
        scopes.add("facts:read")
    if ADMIN in roles:
        scopes |= {"write", "admin", "facts:write"}
    return scopes


def require_scope(request, scope: str) -> None:
    scopes = scopes_of(request)
    if scope == ANY and scopes:
        return
    if scope not in scopes:
        has = ", ".join(sorted(scopes)) or "none"
        who = "this API key" if isinstance(getattr(request, "auth", None), ApiKey) else "your role"
        raise ScopeError(f"this operation needs the '{scope}' scope; {who} has: {has}")


PUBLIC = "public"
# Any caller who may use the API at all, whatever its scopes (`@scope(ANY)`): a key, or a
# person with a role, asking about itself (the project it acts in).
ANY = "any"


def scope(name: str):
    """Declare the scope an API operation needs, under its route decorator:

        @router.get("/things")
        @scope("read")
        def list_things(request): ...

    The check runs before the handler (after ninja has parsed the parameters, so a
    malformed one is still its 422), and the operation carries it as `required_scope`:
    tests/test_api_scopes.py fails for any operation that declares none."""

    def declare(handler):
        @functools.wraps(handler)
        def checked(request, *args, **kwargs):
            require_scope(request, name)
            return handler(request, *args, **kwargs)

        checked.required_scope = name
        return checked

    return declare


def public(handler):
    """Declare an operation open to anyone (it also sets `auth=None` on its route)."""
    handler.required_scope = PUBLIC
    return handler
