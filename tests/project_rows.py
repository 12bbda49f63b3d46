"""Every table of project data, found from the models, and a project filled through the API
with a row in each of them (tests/test_project_rls.py, tests/test_project_erasure.py).

A table holds project data when it has a `project_id` column, or a parent that does: a
foreign key to such a table, or a column naming a conversation, fact, import source or
deletion receipt (`PARENT_COLUMNS`; checked against the parent's key type, so
search_borrowed's `source_id`, a conversation id, is not taken for an import source). A
new table of either kind is found without anyone listing it, and the tests that use
`project_tables()` fail until it has a row-level security policy and `fill` writes a row
of it.
"""

import base64
import json
import uuid
from dataclasses import dataclass

from django.apps import apps
from django.db import models
from django.test import override_settings

from conversations import api_keys, projects, usage_totals
from conversations.embeddings import worker as embedding_worker
from conversations.imports import store as imports_store
from conversations.models import Conversation
from tests.api_support import Api

# Columns that name a parent row without a foreign key (ids that outlive their row, or
# cross apps that must not import each other): column → (app label, model name).
PARENT_COLUMNS = {
    "conversation_id": ("conversations", "Conversation"),
    "fact_id": ("facts", "Fact"),
    "source_id": ("imports", "ImportSource"),
    "receipt_id": ("retention", "DeletionReceipt"),
}


@dataclass(frozen=True)
class ProjectTable:
    model: type
    # How a row finds its project: None for its own `project_id`, else (column, parent model).
    parent: tuple[str, type] | None

    @property
    def table(self) -> str:
        return self.model._meta.db_table

    @property
    def key_columns(self) -> list[str]:
        pk = self.model._meta.pk
        return [f.column for f in (getattr(pk, "fields", None) or [pk])]


def _same_key_type(field, parent) -> bool:
    """Whether `field` can hold `parent`'s key: an integer for an integer, a UUID (or its text,
    as signed heads keep a conversation id) for a UUID."""
    if isinstance(parent._meta.pk, models.UUIDField):
        return isinstance(field, (models.UUIDField, models.CharField))
    return isinstance(field, models.IntegerField) and not isinstance(field, models.UUIDField)


def project_tables() -> list[ProjectTable]:
    """Every concrete model table that holds a project's rows, parents first."""
    found: dict[type, ProjectTable] = {}
    candidates = [m for m in apps.get_models() if m._meta.managed and not m._meta.proxy]
    changed = True
    while changed:
        changed = False
        for model in candidates:
            if model in found:
                continue
            columns = {f.column: f for f in model._meta.concrete_fields}
            entry = None
            if "project_id" in columns:
                entry = ProjectTable(model, None)
            else:
                for field in model._meta.concrete_fields:
                    if field.is_relation and field.related_model in found:
                        entry = ProjectTable(model, (field.column, field.related_model))
                        break
                    named = PARENT_COLUMNS.get(field.column)
                    if named and not field.is_relation:
                        parent = apps.get_model(*named)
                        if parent in found and _same_key_type(field, parent):
                            entry = ProjectTable(model, (field.column, parent))
                            break
            if entry is not None:
                found[model] = entry
                changed = True
    return list(found.values())


def _key(value):
    """A key as Python compares it, whichever form the database or the ORM handed it in."""
    if isinstance(value, (bytes, memoryview)):
        return bytes(value)
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, str):
        try:
            return str(uuid.UUID(value))
        except ValueError:
            return value
    return value


def row_key(values) -> tuple:
    return tuple(_key(v) for v in values)


def rows_by_project(table: ProjectTable, cache: dict | None = None) -> dict:
    """{project id (None: nobody's) → {row key → every column's value}}, read where every project is seen."""
    cache = {} if cache is None else cache
    if table.model in cache:
        return cache[table.model]
    columns = [f.column for f in table.model._meta.concrete_fields]
    attnames = [f.attname for f in table.model._meta.concrete_fields]
    with projects.scoped(projects.EVERY):
        rows = list(table.model._base_manager.values_list(*attnames))
    out: dict = {}
    if table.parent is None:
        project_of = {}
    else:
        column, parent = table.parent
        parent_rows = rows_by_project(next(t for t in project_tables() if t.model is parent), cache)
        project_of = {key[0]: pid for pid, keyed in parent_rows.items() for key in keyed}
    for values in rows:
        record = dict(zip(columns, values, strict=True))
        key = row_key(record[c] for c in table.key_columns)
        if table.parent is None:
            pid = record["project_id"]
        else:
            pid = project_of.get(_key(record[table.parent[0]]))
        out.setdefault(pid, {})[key] = {c: _key(v) for c, v in record.items()}
    cache[table.model] = out
    return out


# -- a project with a row in every table --------------------------------------------------


def _blob(data: bytes) -> dict:
    return {"type": "msgpack", "data": base64.b64encode(data).decode()}


def fill(client, project, marker: str, *, subject: str) -> dict:
    """Rows of `project` in every project table, written through the API with a key of the
    project (its rows are found by `marker` in their text). Returns what it made."""
    _, secret = api_keys.create_api_key(name=f"filler-{project.slug}", project=project,
                                        scopes=["read", "write", "admin", "facts:read", "facts:write"])
    api = Api(client, secret)

    def ok(response, *codes):
        body = b"".join(response.streaming_content) if response.streaming else response.content
        assert response.status_code in (codes or (200, 201)), (response.status_code, body[:600])
        return json.loads(body) if response.get("Content-Type", "").startswith("application/json") else body

    made = ok(api.post("/conversations", {"title": f"{marker} talk", "subject": subject, "namespace": "agents",
                                          "external_id": f"{marker}-1"}))
    cid = made["id"]
    ok(api.post(f"/conversations/{cid}/messages", {"kind": "user", "content": f"{marker} hello from {subject}"},
                headers={"Idempotency-Key": f"{marker}-append"}))
    ok(api.post(f"/conversations/{cid}/messages/batch", {"messages": [
        {"kind": "assistant", "content": f"{marker} let me look",
         "tool_calls": [{"id": "c1", "name": "lookup", "arguments": {"q": marker}}]},
        {"kind": "tool", "tool_call_id": "c1", "content": f"{marker} found it"}]}))
    ok(api.post(f"/conversations/{cid}/checkpoints", {"position": 2, "summary": f"{marker} summary so far"}))
    fork = ok(api.post(f"/conversations/{cid}/forks", {"position": 2}))
    ok(api.put(f"/conversations/{cid}/state", {"state": {"marker": marker}, "expected_version": 0}))
    ok(api.post(f"/conversations/{cid}/actions", {"idempotency_key": f"{marker}:refund", "name": "refund",
                                                   "arguments": {"m": marker}, "result": {"ok": True}}))
    ok(api.post(f"/conversations/{cid}/snapshots", {"position": 2, "repo": f"/src/{marker}",
                                                     "commit": "9f2c4e1b7a0d3c5e8f6a2b4d1c3e5f7a9b0c2d4e",
                                                     "files_changed": 1, "insertions": 2, "deletions": 0}))
    ok(api.post(f"/conversations/{cid}/signed-heads"))
    ok(api.get(f"/conversations/{cid}/export"))
    fact = ok(api.post("/facts", {"subject": subject, "text": f"{marker} prefers letters", "importance": 2,
                                  "source_conversation_id": cid, "source_position": 0}))
    ok(api.get("/facts", {"subject": subject}))
    ok(api.get("/subject-export", {"subject": subject}))  # into both access logs
    ok(api.post("/imports", {"namespace": "proj", "external_id": f"{marker}-session", "summary": {"m": marker},
                             "entries": [{"type": "user", "uuid": f"{marker}-u1",
                                          "message": {"role": "user", "content": f"{marker} imported"}}]}))
    ok(api.post("/langgraph/checkpoints", {
        "thread_id": f"{marker}-thread", "checkpoint_id": "1", "checkpoint": _blob(marker.encode()),
        "metadata": _blob(b"{}"), "messages": [{"id": "h1", "message": {"type": "human", "content": f"{marker} hi"}}]}))
    ok(api.post("/langgraph/writes", {"thread_id": f"{marker}-thread", "checkpoint_id": "1", "task_id": "t1",
                                      "writes": [{"idx": 0, "channel": "messages", "value": _blob(b"x")}]}))
    ok(api.post("/langchain/history/messages", {"session_id": f"{marker}-chat",
                                                "messages": [{"type": "human", "content": f"{marker} chat"}]}))
    # A prune run of the project (nothing is that old), and a receipt with the rows it kept.
    ok(api.post("/prune", {"older_than_days": 1}))
    gone = ok(api.post("/conversations", {"title": f"{marker} to erase", "subject": f"{subject}-gone"}))
    ok(api.post(f"/conversations/{gone['id']}/messages", {"kind": "user", "content": f"{marker} erased text"}))
    with override_settings(MEMORYUI_ERASURE_VERIFY="window"):  # the receipt, then the window's check of it
        ok(api.post("/deletion-requests", {"subject": f"{subject}-gone"}))
        ok(api.post("/deletion-requests/window"))
    with projects.scoped(projects.one(project.pk)):
        # An import still being written leaves its stage row (imports/models.py, ImportStage).
        imports_store.stage_conversation(holder=f"fill:{marker}", staged=[], title=f"{marker} staged")
        conversation = Conversation.objects.get(pk=cid)
        usage_totals.refresh([conversation])  # what the conversation list reads, kept per conversation
    # The vectors of its messages and facts, as the background embedder writes them.
    embedding_worker.run_until_done(1000)
    return {"api": api, "conversation": conversation, "fork_id": fork["id"], "fact_id": fact["id"]}
