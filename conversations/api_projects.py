"""Projects and API keys over JSON.

- `GET /projects` answers any caller with the project it acts in (a person: the projects
  they belong to; an operator's all-projects key: every one). `POST /projects` creates one,
  for an all-projects key with `admin` only.
- `/keys` lists, makes and revokes the keys of the caller's project (`admin`). A key made
  here acts in the caller's project (an all-projects key names it with X-Memoryui-Project,
  else `default`), narrowed to `namespaces` if any are given. Keys for the whole server are
  an operator's: only an all-projects admin key sees, makes or revokes them; to any other
  caller they do not exist (404). A key narrowed to namespaces manages no keys, and no
  caller grants a scope it does not hold itself.

The secret of a new key is in the answer to its POST and nowhere else: an Idempotency-Key
sent with it keeps the key, not the answer (conversations/idempotency.py).
"""

from datetime import datetime

from ninja import Field, Path, Query, Router, Schema, Status
from pydantic import StrictBool, StrictInt, StrictStr

from . import api_keys, keyset, params, project_store, projects
from .api_schemas import ListOut, errors_doc, inline_schema, json_body_doc
from .apiauth import ANY, actor_of, scope, scopes_of
from .errors import Forbidden, NotFound
from .jsonbody import StrictBody, read_body
from .models import ApiKey, Project
from .roles import projects_of

router = Router(tags=["projects and keys"])
KEY_PAGE = 100
KEY_PAGE_MAX = 200


class ProjectOut(Schema):
    id: int
    slug: str = Field(..., description="Its address: pages under /p/<slug>/ (`default` at the root); "
                                       "an all-projects key names it in the X-Memoryui-Project header.")
    name: str
    created_at: datetime
    retention_days: int | None = Field(..., description="Days a conversation is kept after its last row; "
                                                        "null: the server's default.")
    kept_days: int = Field(..., description="The retention in force (the project's, or the server's default).")


class ProjectList(ListOut):
    items: list[ProjectOut]


class ProjectIn(StrictBody):
    slug: StrictStr = Field(..., max_length=64, description="Lower-case letters, digits, - and _.")
    name: StrictStr | None = Field(None, max_length=200, description="A readable name (default: the slug).")
    retention_days: StrictInt | None = Field(None, ge=1, le=project_store.RETENTION_MAX_DAYS)


class KeyOut(Schema):
    id: int
    name: str
    prefix: str = Field(..., description="The key's secret starts `mui_<prefix>_`: tells keys apart. "
                                         "The secret itself is never shown again.")
    project: str | None = Field(..., description="The slug of the project the key acts in; null for an "
                                                 "all-projects key.")
    all_projects: bool = Field(..., description="An operator's key for the whole server.")
    namespaces: list[str] = Field(..., description="The only namespaces it reads and writes; empty: all of "
                                                   "its project's.")
    scopes: list[str]
    created_at: datetime
    created_by: str
    last_used_at: datetime | None
    revoked_at: datetime | None
    active: bool


class KeyCreatedOut(KeyOut):
    secret: str = Field(..., description="Send as `Authorization: Bearer <secret>`. Shown once: only a hash "
                                         "is kept.")


class KeyList(ListOut):
    items: list[KeyOut]


class KeyIn(StrictBody):
    name: StrictStr = Field(..., max_length=200, description="Who uses the key, e.g. `support-agent`.")
    scopes: list[StrictStr] = Field(..., max_length=len(ApiKey.SCOPES),
                                    description=f"Some of {', '.join(ApiKey.SCOPES)}; at most the caller's own.")
    namespaces: list[StrictStr] = Field(default_factory=list, max_length=api_keys.NAMESPACES_MAX,
                                        description="Narrow the key to these namespaces of its project.")
    all_projects: StrictBool = Field(False, description="An operator's key for the whole server: only an "
                                                        "all-projects admin key makes one.")


def _project_out(project: Project) -> dict:
    return {"id": project.pk, "slug": project.slug, "name": project.name, "created_at": project.created_at,
            "retention_days": project.retention_days, "kept_days": project.kept_days}


def _key_out(key: ApiKey, slugs: dict[int, str]) -> dict:
    return {"id": key.pk, "name": key.name, "prefix": key.prefix, "project": slugs.get(key.project_id),
            "all_projects": key.all_projects, "namespaces": list(key.namespaces or []),
            "scopes": list(key.scopes), "created_at": key.created_at, "created_by": key.created_by,
            "last_used_at": key.last_used_at, "revoked_at": key.revoked_at, "active": key.active}


def _operator(request) -> bool:
    """An all-projects key with `admin`: the one caller that manages the whole server."""
    auth = getattr(request, "auth", None)
    return isinstance(auth, ApiKey) and auth.all_projects and "admin" in auth.scopes


def _manages_keys(request) -> None:
    auth = getattr(request, "auth", None)
    if isinstance(auth, ApiKey) and auth.namespaces:
        raise Forbidden("a key narrowed to namespaces does not manage keys; use an admin key of the whole project",
                        field="Authorization")


def _slugs(keys) -> dict[int, str]:
    ids = {k.project_id for k in keys if k.project_id is not None}
    return dict(Project.objects.filter(pk__in=ids).values_list("pk", "slug")) if ids else {}


@router.get("/projects", response={200: ProjectList, **errors_doc()}, operation_id="list_projects",
            summary="The projects the caller acts in")
@scope(ANY)
def list_projects(request):
    """A key of one project: that project. An all-projects key: every project (or the one its
    X-Memoryui-Project header names). A signed-in person: the projects they belong to."""
    scope_now = projects.current()
    if not isinstance(getattr(request, "auth", None), ApiKey):
        found = projects_of(request.auth)
    elif scope_now.every:
        found = list(Project.objects.order_by("id"))
    else:
        found = list(Project.objects.filter(pk=scope_now.project_id))
    return keyset.listing([_project_out(p) for p in found], None)


@router.post("/projects", response={201: ProjectOut, **errors_doc(400, 409, 413, 415, 422)},
             operation_id="create_project", summary="Create a project (an all-projects admin key only)",
             openapi_extra=json_body_doc(inline_schema(ProjectIn), {
                 "support": {"summary": "A support project keeping 30 days",
                             "value": {"slug": "support", "name": "Support bots", "retention_days": 30}}}))
@scope("admin")
def create_project(request):
    """Needs an all-projects key with `admin`. Audited. Give it keys with `POST /keys` and the
    header X-Memoryui-Project naming it, and people with `manage.py create_user --project`."""
    if not _operator(request):
        raise Forbidden("only an all-projects key with the 'admin' scope creates projects", field="Authorization")
    payload = read_body(request, ProjectIn)
    actor = actor_of(request)
    with project_store.server_wide(reason="a project created", actor=actor):
        project = project_store.create_project(slug=payload.slug, name=payload.name or "",
                                               retention_days=payload.retention_days, actor=actor)
    return Status(201, _project_out(project))


@router.get("/keys", response={200: KeyList, **errors_doc(400, 422)}, operation_id="list_keys",
            summary="The API keys of the caller's project, newest first, in keyset pages")
@scope("admin")
def list_keys(request, cursor: str | None = Query(None, max_length=params.CURSOR_MAX),
              limit: int = Query(KEY_PAGE, ge=1, le=KEY_PAGE_MAX),
              active: bool | None = Query(None, description="true: only keys in use; false: only revoked ones.")):
    """Needs `admin`. Revoked keys too, unless `active=true`. All-projects keys appear only to an
    all-projects admin key. Never a secret."""
    _manages_keys(request)
    qs = api_keys.keys_seen(all_projects=_operator(request)).order_by("-id")
    if active is not None:
        qs = qs.filter(revoked_at__isnull=active)
    after = keyset.decode(cursor, "keys", int)
    if after:
        qs = qs.filter(id__lt=after[0])
    rows, next_cursor = keyset.page(qs, limit, "keys", lambda k: (k.pk,))
    slugs = _slugs(rows)
    query = [("limit", limit), ("active", None if active is None else str(active).lower())]
    return keyset.listing([_key_out(k, slugs) for k in rows], next_cursor,
                          keyset.next_url(request, next_cursor, query))


def _seen_key(request, key_id: int) -> ApiKey:
    key = (api_keys.keys_seen(all_projects=_operator(request)).filter(pk=key_id).first()
           if 0 < key_id <= params.MAX_BIGINT else None)
    if key is None:
        raise NotFound(f"API key {key_id} not found", field="key_id")
    return key


@router.get("/keys/{key_id}", response={200: KeyOut, **errors_doc(404, 422)}, operation_id="get_key",
            summary="One API key of the caller's project")
@scope("admin")
def get_key(request, key_id: int = Path(..., description="The key's id (not its secret).")):
    _manages_keys(request)
    key = _seen_key(request, key_id)
    return _key_out(key, _slugs([key]))


@router.post("/keys", response={201: KeyCreatedOut, **errors_doc(400, 404, 409, 413, 415, 422)},
             operation_id="create_key", summary="Create an API key in the caller's project; its secret once",
             openapi_extra=json_body_doc(inline_schema(KeyIn), {
                 "importer": {"summary": "A Claude Code importer that writes only its namespace",
                              "value": {"name": "claude-code-importer", "scopes": ["read", "write"],
                                        "namespaces": ["claude-code"]}}}))
@scope("admin")
def create_key(request):
    """Needs `admin`, and every scope it grants (`admin` stands for `read` and `write`). The key
    acts in the caller's project; `all_projects` only from an all-projects admin key. Audited."""
    _manages_keys(request)
    payload = read_body(request, KeyIn)
    beyond = sorted(set(payload.scopes) & set(ApiKey.SCOPES) - scopes_of(request))
    if beyond:
        raise Forbidden(f"a key grants only scopes its maker holds; you lack {', '.join(beyond)}", field="scopes")
    actor = actor_of(request)
    if payload.all_projects:
        if not _operator(request):
            raise Forbidden("only an all-projects key with the 'admin' scope makes all-projects keys",
                            field="all_projects")
        with project_store.server_wide(reason="an all-projects API key made", actor=actor):
            key, secret = api_keys.create_api_key(name=payload.name, scopes=payload.scopes, created_by=actor,
                                                  all_projects=True, namespaces=payload.namespaces)
    else:
        key, secret = api_keys.create_api_key(name=payload.name, scopes=payload.scopes, created_by=actor,
                                              namespaces=payload.namespaces)
    return Status(201, _key_out(key, _slugs([key])) | {"secret": secret})


@router.post("/keys/{key_id}/revoke", response={200: KeyOut, **errors_doc(404, 413, 415, 422)},
             operation_id="revoke_key", summary="Revoke an API key of the caller's project, at once")
@scope("admin")
def revoke_key(request, key_id: int = Path(..., description="The key's id (not its secret).")):
    """Needs `admin`. Agents using the key get 401 from their next request. Revoking a revoked
    key answers it unchanged. Audited. A key may revoke itself."""
    _manages_keys(request)
    key = _seen_key(request, key_id)
    actor = actor_of(request)
    if key.all_projects:
        with project_store.server_wide(reason="an all-projects API key revoked", actor=actor):
            key = api_keys.revoke_api_key(key_id=key.pk, revoked_by=actor, all_projects=True)
    else:
        key = api_keys.revoke_api_key(key_id=key.pk, revoked_by=actor)
    return _key_out(key, _slugs([key]))
