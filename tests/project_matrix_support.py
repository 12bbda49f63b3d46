"""The cross-project matrix's world (tests/test_project_matrix.py): project B full of rows that
each carry a marker string, project A with a little of its own, and what a caller of A may
send to reach B.

Every text of B holds `MARKER-B-…`, so a body that shows any of them (other than those the
caller itself sent) shows B's data; every id of B is recorded, so a body naming one the caller
did not send names B's rows. `b_rows()` reads every row of B, of every model that holds
project data (found from the models themselves, not listed), so a write that crossed shows.
"""

import base64
import hashlib
import json
import re
import uuid
from dataclasses import dataclass, field
from datetime import timedelta

from django.apps import apps
from django.db import models
from django.test import Client
from django.utils import timezone

from conversations import api_keys, projects
from conversations.facts import store as facts_store
from conversations.models import Conversation, Project
from conversations.project_store import create_project
from conversations.roles import assign_role
from tests.api_support import Api
from tests.helpers import make_user

MARK = "MARKER-B-"
GHOST = "NOBODY-B-"  # as long as MARK
MARKERS = re.compile(r"MARKER-B-[A-Za-z0-9_-]*")
UUIDS = re.compile(r"[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}")
# A word only B's rows hold, for full-text search (the markers' parts are common words).
B_WORD = "quokkabeta"
CHECKPOINT = "0001-" + MARK + "checkpoint"
IDEMPOTENCY_KEY = "step-MARKER-B-1"
ALL_SCOPES = ["admin", "facts:read", "facts:write", "read", "write"]


def m(what: str) -> str:
    return MARK + what


@dataclass
class World:
    a: Project
    b: Project
    a_key: str
    b_key: str
    # Kind of object -> B's values of that kind (strings, as a caller sends them).
    b_values: dict[str, list[str]]
    # Kind -> for each of B's values, one of the same shape that names nothing in any project.
    ghosts: dict[str, list[str]]
    # B's UUIDs (conversations, receipts) and numeric ids, for the leak check.
    b_uuids: set[str] = field(default_factory=set)
    b_conversation_ids: list[str] = field(default_factory=list)


def _ok(response, *statuses):
    assert response.status_code in (statuses or (200, 201)), (response.status_code, response.content[:500])
    return response.json() if response.get("Content-Type", "").startswith("application/json") else None


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def claude_entry(n: int, text: str, **extra) -> dict:
    return {"type": "user", "uuid": f"00000000-0000-4000-8000-{n:012d}", "sessionId": "s",
            "message": {"role": "user", "content": text}, **extra}


def otlp_body(conversation_id: str, text: str, span_id: str = "00f067aa0ba902b7") -> bytes:
    def attr(key, value):
        return {"key": key, "value": {"stringValue": value}}

    span = {"traceId": hashlib.sha256(span_id.encode()).hexdigest()[:32], "spanId": span_id, "name": "chat m",
            "kind": 3, "startTimeUnixNano": "1767225600000000000", "endTimeUnixNano": "1767225601000000000",
            "attributes": [attr("gen_ai.operation.name", "chat"), attr("gen_ai.request.model", "m"),
                           attr("gen_ai.conversation.id", conversation_id),
                           attr("gen_ai.input.messages", json.dumps(
                               [{"role": "user", "parts": [{"type": "text", "content": text}]}])),
                           attr("gen_ai.output.messages", json.dumps(
                               [{"role": "assistant", "parts": [{"type": "text", "content": text + " ok"}]}]))]}
    return json.dumps({"resourceSpans": [{"resource": {"attributes": [attr("service.name", "bot")]},
                                          "scopeSpans": [{"scope": {"name": "t"}, "spans": [span]}]}]}).encode()


def langgraph_checkpoint(thread_id: str, checkpoint_id: str, text: str, run_id: str, parent: str = "") -> dict:
    return {"thread_id": thread_id, "checkpoint_ns": "", "checkpoint_id": checkpoint_id,
            "parent_checkpoint_id": parent, "checkpoint": {"type": "json", "data": _b64(text.encode())},
            "metadata": {"type": "json", "data": _b64(b"{}")}, "metadata_json": {"run_id": run_id, "note": text},
            "messages": [{"id": f"h-{checkpoint_id}", "message": {"type": "human", "content": text}}]}


def build_world(b_slug: str = "beta") -> World:
    """Projects A (`alpha`) and B (`b_slug`, which may be `default`), B's rows made through its
    own key as its agents would make them, A's few the same way."""
    a = create_project(slug="alpha", name="Alpha")
    b = Project.objects.get(slug=b_slug) if b_slug == projects.DEFAULT_SLUG else create_project(
        slug=b_slug, name=m("project-name"))
    _, a_key = api_keys.create_api_key(name="a-agent", scopes=ALL_SCOPES, project=a)
    b_key_row, b_key = api_keys.create_api_key(name=m("key-name"), scopes=ALL_SCOPES, project=b)
    spare, _ = api_keys.create_api_key(name=m("spare-key"), scopes=["read"], project=b)
    client = Client()
    api = Api(client, b_key)
    values: dict[str, list[str]] = {}

    def add(kind, value):
        values.setdefault(kind, [])
        if str(value) not in values[kind]:
            values[kind].append(str(value))

    # A conversation with every kind of row: messages, a fold, task state, an action, a snapshot.
    # Sent with Idempotency-Keys, as a retrying agent sends them: its kept answers are B's rows too.
    root = _ok(api.post("/conversations", {"title": m("title-root"), "subject": m("subject"), "namespace": m("ns"),
                                            "external_id": m("ext-root"), "meta": {"note": m("meta")}},
                        headers={"Idempotency-Key": IDEMPOTENCY_KEY}))
    cid = root["id"]
    for message in (
        {"kind": "system", "content": m("system-prompt")},
        {"kind": "user", "content": f"{m('user-text')} {B_WORD} refund please"},
        {"kind": "assistant", "content": m("assistant-text"),
         "tool_calls": [{"id": "call_b", "name": "lookup", "arguments": {"order": m("tool-args")}}],
         "meta": {"model": "m", "usage": {"input_tokens": 700, "output_tokens": 40}}},
        {"kind": "tool", "tool_call_id": "call_b", "name": "lookup", "content": f"{m('tool-output')} {B_WORD}"},
        {"kind": "note", "text": m("note-text")},
    ):
        _ok(api.post(f"/conversations/{cid}/messages", message,
                     headers={"Idempotency-Key": f"{IDEMPOTENCY_KEY}-{message['kind']}"}))
    _ok(api.post(f"/conversations/{cid}/checkpoints", {"position": 1, "summary": m("summary")}))
    _ok(api.put(f"/conversations/{cid}/state", {"state": {"ticket": m("state")}, "expected_version": 0}))
    _ok(api.post(f"/conversations/{cid}/actions", {"idempotency_key": m("business-key"), "name": "issue_refund",
                                                   "arguments": {"order": m("action-args")},
                                                   "result": {"refund": m("action-result")}, "status": "performed"}))
    _ok(api.post(f"/conversations/{cid}/snapshots", {
        "position": 4, "repo": f"/home/{m('repo')}", "commit": "9f2c4e1b7a0d3c5e8f6a2b4d1c3e5f7a9b0c2d4e",
        "files_changed": 1, "insertions": 2, "deletions": 0}))
    fork = _ok(api.post(f"/conversations/{cid}/forks", {"position": 3, "title": m("title-fork"),
                                                        "external_id": m("ext-fork")}))
    _ok(api.post(f"/conversations/{cid}/signed-heads"))
    # A Claude Code session with a subagent's transcript (a child conversation), and its summary.
    session = m("session")
    _ok(api.post("/imports", {"namespace": m("cc"), "external_id": session, "subject": m("subject"),
                              "entries": [claude_entry(1, f"{m('session-text')} {B_WORD}")],
                              "summary": {"first_prompt": m("session-summary")}}))
    _ok(api.post("/imports", {"namespace": m("cc"), "external_id": f"{session}/subagents/agent-{m('agent')}",
                              "entries": [claude_entry(2, m("subagent-text"), isSidechain=True)]}))
    # An OpenAI Agents session (Responses items), a LangGraph thread, a LangChain history, OTLP spans.
    _ok(api.post("/imports", {"format": "openai-responses", "namespace": m("agents"), "external_id": m("oai-session"),
                              "entries": [{"role": "user", "content": m("oai-item")},
                                          {"role": "user", "content": m("oai-item-2")}]}))
    thread = m("thread")
    _ok(api.post("/langgraph/checkpoints", langgraph_checkpoint(thread, CHECKPOINT, m("graph-text"), m("run"))))
    _ok(api.post("/langgraph/writes", {"thread_id": thread, "checkpoint_ns": "", "checkpoint_id": CHECKPOINT,
                                       "task_id": m("task"), "writes": [{"idx": 0, "channel": "messages", "value": {
                                           "type": "json", "data": _b64(m("pending-write").encode())}}]}))
    _ok(api.post("/langchain/history/messages", {"namespace": m("lc"), "session_id": m("lc-session"),
                                                 "messages": [{"type": "human", "content": m("lc-text")}]}))
    otlp = client.post("/v1/traces", otlp_body(m("otel-conv"), m("otel-text")), content_type="application/json",
                       headers={"Authorization": f"Bearer {b_key}"})
    assert otlp.status_code == 200, otlp.content
    # Facts: one proposed, one approved (a reviewer's decision), with its source.
    proposed = _ok(api.post("/facts", {"subject": m("subject"), "text": m("fact-proposed"), "importance": 5,
                                       "source_conversation_id": cid, "source_position": 1}))
    approved = _ok(api.post("/facts", {"subject": m("subject"), "text": f"{m('fact-approved')} {B_WORD}",
                                       "importance": 9}))
    with projects.scoped(projects.one(b.pk)):
        facts_store.approve_fact(fact_id=approved["id"], actor=f"user:{m('reviewer')}")
        facts_store.record_access(actor=f"user:{m('reviewer')}", subject=m("subject"))
    # A deletion receipt (a subject erased) and one of a conversation deleted; a prune run.
    doomed = _ok(api.post("/conversations", {"title": m("doomed-title"), "subject": m("doomed")}))
    _ok(api.post(f"/conversations/{doomed['id']}/messages", {"kind": "user", "content": m("doomed-text")}))
    receipt = _ok(api.post("/deletion-requests", {"subject": m("doomed")}))
    gone = _ok(api.post("/conversations", {"title": m("gone-title")}))
    deleted = _ok(api.delete(f"/conversations/{gone['id']}"))
    prune = _ok(api.post("/prune", {"older_than_days": 36500}))
    # A person of B opens the conversation (the access log) and exports it (the audit log).
    b_person = make_user(None, m("person"))
    assign_role(b_person, "admin", b)
    person = Client()
    person.force_login(b_person)
    prefix = "" if b.pk == projects.DEFAULT_PROJECT_ID else f"/p/{b.slug}"
    assert person.get(f"{prefix}/conversations/{cid}/").status_code == 200
    assert person.get(f"{prefix}/conversations/{cid}/export.json").status_code == 200

    # A's own: a conversation, a fact, a key, so that A's lists are not empty by accident.
    mine = Api(Client(), a_key)
    own = _ok(mine.post("/conversations", {"title": "alpha own", "subject": "alpha-subject", "namespace": "alpha-ns",
                                            "external_id": "alpha-ext"}))
    _ok(mine.post(f"/conversations/{own['id']}/messages", {"kind": "user", "content": "alpha words"}))
    _ok(mine.post("/facts", {"subject": "alpha-subject", "text": "alpha fact", "importance": 3}))

    b_conversations = list(Conversation.everywhere.filter(project=b, deleting=False).order_by("created_at", "id"))
    by_external = {c.external_id: c for c in b_conversations}
    assert {cid, fork["id"]} <= {str(c.pk) for c in b_conversations}
    for c in b_conversations:
        add("conversation", c.pk)
    add("conversation", gone["id"])  # deleted: B's all the same
    add("fact", proposed["id"])
    add("fact", approved["id"])
    add("receipt", receipt["request_id"])
    add("receipt", deleted["receipt_id"])
    add("key", b_key_row.pk)
    add("key", spare.pk)
    add("prune_run", prune["run_id"])
    add("subject", m("subject"))
    add("subject", m("doomed"))
    for c in b_conversations:
        if MARK in c.namespace:  # "langgraph", "otel": every project's namespaces, not B's
            add("namespace", c.namespace)
        if c.external_id and MARK in c.external_id:  # not a LangGraph thread's digest: A may make the same
            add("external_id", c.external_id)
            values.setdefault("external_namespace", []).append(c.namespace)
    add("source_key", session)
    add("source_key", f"{session}/subagents/agent-{m('agent')}")
    add("session", m("oai-session"))
    add("session", m("lc-session"))
    add("thread", thread)
    add("langgraph_checkpoint", CHECKPOINT)
    add("langgraph_run", m("run"))
    add("business_key", m("business-key"))
    add("search", B_WORD)
    add("actor", f"key:{m('key-name')}")
    add("actor", f"user:{m('person')}")
    for framework_id in (m("oai-session"), m("lc-session"), thread, m("otel-conv")):  # as PATH_VALUES' framework
        add("framework_id", framework_id)
    add("user", b_person.pk)  # an account of B's only: A's members pages must not reach it
    assert by_external.get(m("ext-root")) is not None
    ghosts = {kind: [ghost_of(value) for value in found] for kind, found in values.items()}
    world = World(a=a, b=b, a_key=a_key, b_key=b_key, b_values=values, ghosts=ghosts,
                  b_conversation_ids=[str(c.pk) for c in b_conversations])
    world.b_uuids = {v.replace("-", "") for kind in ("conversation", "receipt") for v in values[kind]}
    return world


def ghost_of(value: str) -> str:
    """A value like B's `value` (a UUID, a number, a text of the same length, so that an answer
    sized by it is sized alike) that names nothing anywhere; the same one wherever B's value is
    sent (a session id that is also an external id)."""
    digest = hashlib.sha256(value.encode()).hexdigest()
    if UUIDS.fullmatch(value):
        return str(uuid.uuid5(uuid.NAMESPACE_URL, value))
    if value.isdigit():
        return str(900_000_000 + int(digest, 16) % 10**8)
    return value.replace(MARK, GHOST) if MARK in value else "x" + digest[:max(len(value) - 1, 1)]


def age_one_conversation(world: World) -> None:
    """B's root conversation last received a row long ago: a prune of A that ignored the
    fence would take it."""
    old = timezone.now() - timedelta(days=4000)
    Conversation.everywhere.filter(project=world.b, external_id=m("ext-root")).update(received_at=old,
                                                                                     last_activity_at=old)


# ---- what B holds, read from every model that holds project data -----------------------------


def _links(model) -> list[str]:
    """How a model's rows are B's: its project column, or the conversation, fact or receipt
    it belongs to (children hold no project column of their own)."""
    found = []
    for f in model._meta.concrete_fields:
        target = f.related_model if f.is_relation else None
        if f.name == "project" or target is Project:
            found.append("project")
        elif target is Conversation or f.attname == "conversation_id" or f.name in ("source_conversation_id",):
            found.append(f"conversation:{f.attname}")
        elif target is not None and target._meta.label in ("facts.Fact", "retention.DeletionReceipt",
                                                            "imports.ImportSource"):
            found.append(f"{target._meta.label}:{f.attname}")
    return found


def project_data_models() -> list:
    return [model for model in apps.get_models() if model._meta.app_label in
            {"conversations", "access", "facts", "frameworks", "imports", "langgraph", "ledger", "proofs",
             "retention", "search"} and model is not Project and _links(model)]


def _value(v):
    if isinstance(v, memoryview | bytes):
        return hashlib.sha256(bytes(v)).hexdigest()
    return v if isinstance(v, str | int | float | bool | type(None)) else str(v)


def b_rows(world: World) -> dict[str, list]:
    """Every row of B, per model, as plain values (bytes by their digest), in a stable order."""
    with projects.scoped(projects.EVERY):
        conversation_ids = [uuid.UUID(c) for c in world.b_values["conversation"]]
        conversation_ids += list(Conversation.everywhere.filter(project=world.b).values_list("pk", flat=True))
        parents = {
            "facts.Fact": list(apps.get_model("facts", "Fact").everywhere.filter(project=world.b)
                               .values_list("pk", flat=True)),
            "retention.DeletionReceipt": list(apps.get_model("retention", "DeletionReceipt").everywhere
                                              .filter(project=world.b).values_list("pk", flat=True)),
            "imports.ImportSource": list(apps.get_model("imports", "ImportSource").everywhere
                                         .filter(project=world.b).values_list("pk", flat=True)),
        }
        out = {}
        for model in project_data_models():
            condition = models.Q(pk__in=[])
            for link in _links(model):
                if link == "project":
                    condition |= models.Q(project=world.b)
                elif link.startswith("conversation:"):
                    condition |= models.Q(**{f"{link.split(':')[1]}__in": conversation_ids})
                else:
                    label, attname = link.split(":")
                    condition |= models.Q(**{f"{attname}__in": parents[label]})
            manager = model._base_manager
            names = [f.attname for f in model._meta.concrete_fields]
            rows = [tuple(_value(v) for v in row) for row in manager.filter(condition).values_list(*names)]
            out[model._meta.label] = sorted(rows, key=repr)
        return out


def rows_changed(before: dict, after: dict) -> list[str]:
    changed = []
    for label in sorted(set(before) | set(after)):
        old, new = before.get(label, []), after.get(label, [])
        if old != new:
            gone = [r for r in old if r not in new]
            added = [r for r in new if r not in old]
            changed.append(f"{label}: {len(old)} rows before, {len(new)} after; gone {gone[:2]!r}; "
                           f"new {added[:2]!r}"[:600])
    return changed
