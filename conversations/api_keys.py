"""API keys: created with their project and scopes (the secret shown once, only its hash
stored), revoked, and found again by the secret a request presents. Each change is audited
in its own transaction.

A key belongs to one project (and may be narrowed to some of its namespaces); a key for the
whole server (`all_projects`) is an operator's, and says so wherever keys are shown."""

import hashlib
import hmac
import json
import secrets
from datetime import UTC, datetime

from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone

from . import params, projects, rows
from .errors import InvalidInput, NotFound
from .models import ApiKey, Project
from .store import NAMESPACE_MAX, clean_text, record_audit

NAMESPACES_MAX = 50


def project_by_slug(slug) -> Project:
    """The project named by `slug` (as typed: surrounding space ignored), or NotFound."""
    if isinstance(slug, Project):
        return slug
    text = str(slug or "").strip()
    found = Project.objects.filter(slug=text).first() if text and len(text) <= 64 else None
    if found is None:
        raise NotFound(f"no project {text[:64]!r}", field="project")
    return found


def _clean_namespaces(namespaces) -> list[str]:
    if isinstance(namespaces, str):
        namespaces = namespaces.replace(",", " ").split()
    cleaned = sorted({params.identifier(n, "namespaces", max_length=NAMESPACE_MAX, required=True)
                      for n in namespaces or []})
    if len(cleaned) > NAMESPACES_MAX:
        raise InvalidInput(f"a key may be narrowed to at most {NAMESPACES_MAX} namespaces", field="namespaces")
    return cleaned


def create_api_key(*, name: str, scopes, created_by: str = "", project=None, all_projects: bool = False,
                   namespaces=()) -> tuple[ApiKey, str]:
    """Create an API key; returns the row and the secret, which is never stored.

    The key acts in `project` (a Project or its slug; by default the current scope's, or
    `default` where the scope is every project), narrowed to `namespaces` if any are given;
    `all_projects` makes an operator's key for the whole server instead."""
    name = clean_text(name, field="name", max_length=200, required=True)
    namespaces = _clean_namespaces(namespaces)
    if all_projects:
        if project is not None:
            raise InvalidInput("a key is either for one project or for all projects, not both", field="project")
        if namespaces:
            raise InvalidInput("namespaces narrow a key of one project; an all-projects key has none",
                               field="namespaces")
        project_id = None
    elif project is not None:
        project_id = project_by_slug(project).pk
    else:
        scope = projects.current()
        project_id = scope.project_id if scope.one else projects.DEFAULT_PROJECT_ID
    if isinstance(scopes, str):
        scopes = scopes.replace(",", " ").split()
    scopes = sorted(set(scopes or []))
    unknown = [s for s in scopes if s not in ApiKey.SCOPES]
    if unknown:
        raise InvalidInput(
            f"unknown scope {', '.join(unknown)}; expected some of {', '.join(ApiKey.SCOPES)}", field="scopes"
        )
    if not scopes:
        raise InvalidInput("an API key needs at least one scope", field="scopes")
    prefix = secrets.token_hex(4)
    secret = f"mui_{prefix}_{secrets.token_urlsafe(32)}"
    with transaction.atomic():
        key = ApiKey.everywhere.create(
            name=name, prefix=prefix, key_hash=hash_api_key(secret), scopes=scopes, created_by=str(created_by)[:200],
            project_id=project_id, namespaces=namespaces,
        )
        record_audit(actor=created_by or "system", action="api_key.created", target_type="api_key",
                     target_id=str(key.pk), project_id=project_id,
                     detail={"scopes": scopes, "prefix": prefix, "all_projects": project_id is None,
                             "namespaces": namespaces})
    return key, secret


def keys_seen(*, all_projects: bool = False):
    """The keys of the current scope's project (every project's where every one is seen), with
    the whole server's own keys only for who may see them (`all_projects`: a superuser, an
    operator's key): to anyone else an all-projects key does not exist."""
    scope = projects.current()
    if scope.every:
        own = Q(project__isnull=False)
    elif scope.project_id is not None:
        own = Q(project_id=scope.project_id)
    else:
        own = Q(pk__in=[])
    return ApiKey.everywhere.filter(own | Q(project__isnull=True) if all_projects else own)


def revoke_api_key(*, key_id, revoked_by: str = "", all_projects: bool = False) -> ApiKey:
    """Revoke a key of the current scope's project (another project's key is not found), or with
    `all_projects` one of the whole server's own keys (where every project is seen:
    `project_store.server_wide`)."""
    with transaction.atomic():
        keys = ApiKey.everywhere.filter(project__isnull=True) if all_projects else ApiKey.objects
        key = keys.for_update().filter(pk=key_id).first()
        if key is None:
            raise NotFound(f"API key {key_id} not found", field="id")
        if key.revoked_at is None:
            key.revoked_at = timezone.now()
            key.save(update_fields=["revoked_at"])
            record_audit(actor=revoked_by or "system", action="api_key.revoked", target_type="api_key",
                         target_id=str(key.pk), detail={"prefix": key.prefix}, project_id=key.project_id)
    return key


def hash_api_key(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


# What a request needs of its key; the other columns load when read (deferred fields).
# In the model's field order: ApiKey.from_db places the values by it.
_KEY_COLUMNS = ("id", "name", "project_id", "namespaces", "key_hash", "scopes", "last_used_at")


# Public: bench/w8_http.py runs it alone, as every API request's first statement. The key's
# project's slug comes with it: an answer's links to pages name the project (project_http.page_url),
# which would otherwise cost a statement of its own (the project table has no row-level security).
ACTIVE_KEY = (f"SELECT {', '.join('k.' + c for c in _KEY_COLUMNS)}, p.slug FROM {ApiKey._meta.db_table} k "
              f"LEFT JOIN {Project._meta.db_table} p ON p.id = k.project_id "
              "WHERE k.prefix = %s AND k.revoked_at IS NULL LIMIT 1")
rows.sqlite_form(ACTIVE_KEY)


def _active_key(prefix: str) -> ApiKey | None:
    """The active key with this prefix. Every API request runs this: one plain statement and
    the two conversions its columns need cost a fraction of the ORM's (even `raw()`'s)."""
    row = rows.fetch_first(ACTIVE_KEY, [prefix], outside_projects=True)
    if row is None:
        return None
    pk, name, project_id, namespaces, key_hash, scopes, last_used, project_slug = row
    if isinstance(scopes, str):  # SQLite keeps JSON as text
        scopes = json.loads(scopes)
    if isinstance(namespaces, str):
        namespaces = json.loads(namespaces)
    if isinstance(last_used, str):
        last_used = datetime.fromisoformat(last_used)
    if last_used is not None and timezone.is_naive(last_used):  # SQLite: UTC without its zone
        last_used = last_used.replace(tzinfo=UTC)
    key = ApiKey.from_db(connection.alias, _KEY_COLUMNS,
                         (pk, name, project_id, namespaces or [], key_hash, scopes, last_used))
    key.project_slug = project_slug  # not a field: None for an all-projects key
    return key


def authenticate_api_key(secret: str) -> ApiKey | None:
    """The active key for a presented secret, or None. Compares hashes in constant time."""
    if not isinstance(secret, str) or not secret.startswith("mui_") or secret.count("_") < 2:
        return None
    prefix = secret.split("_", 2)[1]
    key = _active_key(prefix)
    if key is None or not hmac.compare_digest(key.key_hash, hash_api_key(secret)):
        return None
    now = timezone.now()
    # Touch last use at most once a minute: a hot agent must not write on every read.
    if key.last_used_at is None or (now - key.last_used_at).total_seconds() > 60:
        ApiKey.everywhere.filter(pk=key.pk).update(last_used_at=now)
        key.last_used_at = now
    return key
