"""Every API operation declares the scope it needs (`@scope(...)`) or that it is public
(`@public`, with `auth=None`): a new handler cannot forget its check."""

import pytest
from ninja import NinjaAPI, Router

from conversations.apiauth import ANY, PUBLIC, public, scope
from memoryui.api import api

SCOPES = {"read", "write", "admin", "facts:read", "facts:write", ANY, PUBLIC}


def operations(ninja_api):
    for prefix, router in ninja_api._routers:
        for path, view in router.path_operations.items():
            for op in view.operations:
                yield f"{'|'.join(op.methods)} {prefix}{path}", op


def undeclared(ninja_api) -> list[str]:
    return [name for name, op in operations(ninja_api) if getattr(op.view_func, "required_scope", None) not in SCOPES]


def test_every_operation_declares_a_scope_or_is_public():
    assert len(list(operations(api))) > 40
    assert undeclared(api) == []


def test_exactly_the_public_operations_take_no_credentials():
    for name, op in operations(api):
        declared_public = op.view_func.required_scope == PUBLIC
        assert declared_public == (op.auth_param is None), name


def test_an_operation_without_a_declaration_is_caught():
    router = Router()

    @router.get("/declared")
    @scope("read")
    def declared(request):
        return {}

    @router.get("/open", auth=None)
    @public
    def open_one(request):
        return {}

    @router.get("/forgotten")
    def forgotten(request):
        return {}

    other = NinjaAPI(urls_namespace="scope-check")
    other.add_router("", router)
    assert undeclared(other) == ["GET /forgotten"]


@pytest.mark.django_db
def test_the_declared_scope_is_enforced_before_the_handler_runs(reader, convo):
    refused = reader.post(f"/conversations/{convo.pk}/messages", {"kind": "user", "content": "hi"})
    assert refused.status_code == 403 and "'write' scope" in refused.json()["error"]["message"]
    convo.refresh_from_db()
    assert convo.next_position == 4
    # Parameters are still parsed first: a malformed one is a 422, whatever the scope.
    bad = reader.get(f"/conversations/{convo.pk}/messages", {"limit": "many"})
    assert bad.status_code == 422
