"""`memoryui-mcp`: memoryui as an MCP server (stdio), for Claude Code, Codex and editors.

    pip install "./clients/python[mcp]"   # from a memoryui checkout: the client is not on PyPI yet
    MEMORYUI_API_KEY=mui_… memoryui-mcp --url http://127.0.0.1:8000

Tools: list, find and read conversations (the active view: what a model receives),
create one, append messages, checkpoint (fold) and fork it, recall approved facts
about a subject and propose a new one. Every call goes to memoryui's HTTP API with
the key from MEMORYUI_API_KEY; what the API refuses comes back as a tool error
carrying the API's code, message and field, so the model can correct itself.

The server is bound to one project, and no tool takes a project: a model cannot step
out of it. A key of one project binds it to that project. An operator's all-projects
key binds it to the project `--project` (MEMORYUI_PROJECT) names; without one, every
tool refuses, before anything is read or written, rather than act in every project.

A tool's output is read by models and by the prompts written for them: its shape is
an interface (tests/fixtures/mcp_output_shapes.json pins it). The lists are `items`
(with `next`); the keys they had before, `conversations` (list_conversations, and
find_conversations by external id), `hits` (find_conversations by words) and `facts`
(recall_facts), hold the same list too, so a prompt or client reading them keeps
working. `--no-legacy-keys` (build_server(legacy_keys=False)) leaves them out.
"""

import argparse
import os
import sys
from typing import Annotated, Any

import httpx
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from .. import _core
from ..client import EVERY_PROJECT, PROJECT_HEADER, AsyncMemoryui
from ..errors import MemoryuiError
from ..formats import BATCH_MAX, JOURNAL_KINDS

__all__ = ["build_server", "main"]

INSTRUCTIONS = """\
memoryui is the durable, append-only memory of agents. A conversation is a list of
messages at positions 0, 1, 2, … that is never rewritten. To continue one, read its
active view (read_conversation) and send `handoff` then each item's message to the
model; append each settled step (append_messages). Fold a long history with
checkpoint (nothing is deleted: the active view then starts with the summary), branch
with fork. Facts about people are proposed (propose_fact) and recalled only once a
person has approved them (recall_facts)."""

MESSAGE_SHAPES = (
    "Each message is one object with `kind`: "
    "user {kind, content: text or content blocks}; "
    "assistant {kind, content, tool_calls?: [{id, name, arguments}]}; "
    "tool {kind, tool_call_id, name?, content, is_error?}; "
    "system {kind, content}; "
    f"journal kinds {', '.join(JOURNAL_KINDS)} {{kind, text}}. "
    "Any message may carry `meta` (an object: model, token usage, …). "
    "Never send positions: the store assigns them."
)


def _error(exc: MemoryuiError) -> ToolError:
    where = f" (field: {exc.field})" if exc.field else ""
    return ToolError(f"memoryui refused: {exc.code}: {exc.message}{where}")


UNBOUND = ("this API key is an all-projects (operator's) key and memoryui-mcp acts in one project only: start it "
           "with --project SLUG (or MEMORYUI_PROJECT), or give it a key of the project")


async def _acts_in_every_project(client: AsyncMemoryui) -> bool:
    """Whether the client's key, as sent, acts in every project: the server's answer says so
    (its X-Memoryui-Project header); asked with a read that writes nothing, whatever the
    key's scopes (a key without `read` is refused, and that answer says it too)."""
    if client.project:
        return False  # the header names the project; a project's key naming another gets 404
    response = await client._http.get("/conversations", params={"limit": 1})
    return response.headers.get(PROJECT_HEADER) == EVERY_PROJECT


def build_server(url: str | None = None, *, api_key: str | None = None, project: str | None = None,
                 client: AsyncMemoryui | None = None, legacy_keys: bool = True) -> MCPServer:
    """The MCP server with its tools, talking to memoryui at `url` with `api_key`, bound to the
    key's project (`project`, a slug, for an all-projects key: see the module). With
    `legacy_keys`, a list is also under the key it had before `items` (see the module)."""
    # WARNING: stderr is the MCP client's log; a line per HTTP request would drown it.
    server = MCPServer(name="memoryui", title="memoryui", instructions=INSTRUCTIONS, log_level="WARNING",
                       description="Durable, append-only memory for agents: conversations, checkpoints, forks, "
                                   "facts.")
    holder: dict[str, AsyncMemoryui] = {}
    checked: dict[str, bool] = {}

    def mui() -> AsyncMemoryui:
        if client is not None:
            return client
        if "client" not in holder:
            holder["client"] = AsyncMemoryui(url, api_key=api_key, project=project)
        return holder["client"]

    async def call(method, *args, **kwargs):
        if "every" not in checked:
            try:
                checked["every"] = await _acts_in_every_project(mui())
            except httpx.HTTPError as exc:
                raise ToolError(f"memoryui is not reachable: {type(exc).__name__}: {exc}") from None
        if checked["every"]:
            raise ToolError(UNBOUND)
        try:
            return await method(*args, **kwargs)
        except MemoryuiError as exc:
            raise _error(exc) from None

    def listing(items: list, next_cursor, legacy: str) -> dict[str, Any]:
        return {"items": items, "next": next_cursor, **({legacy: items} if legacy_keys else {})}

    _conversation_reads(server, mui, call, listing)
    _conversation_writes(server, mui, call)
    _fact_tools(server, mui, call, listing)
    return server


ConversationId = Annotated[str, Field(description="The conversation's id (a UUID), as list_conversations or "
                                                  "find_conversations return it.")]


def _conversation_reads(server: MCPServer, mui, call, listing) -> None:
    """The tools that find and read conversations."""
    @server.tool(title="List conversations")
    async def list_conversations(
        namespace: Annotated[str | None, Field(description="Only this namespace (an agent's or a framework's "
                                                           "name, e.g. 'openai-agents').")] = None,
        subject: Annotated[str | None, Field(description="Only conversations about this subject, e.g. "
                                                         "'customer:42'.")] = None,
        limit: Annotated[int, Field(ge=1, le=100, description="How many, at most.")] = 20,
        cursor: Annotated[str | None, Field(description="The `next` of the previous page, to read on.")] = None,
    ) -> dict[str, Any]:
        """List conversations, latest activity first, with their id, title, namespace,
        external id and message count. Page with `cursor`."""
        page = await call(mui()._run, _core.list_page(cursor=cursor, limit=limit, subject=subject,
                                                       namespace=namespace))
        return listing([_summary(c) for c in page["items"]], page.get("next"), "conversations")

    @server.tool(title="Find conversations")
    async def find_conversations(
        query: Annotated[str | None, Field(description="Words to find in messages: all must occur; "
                                                       "\"a phrase\", prefix*, a OR b, -excluded.")] = None,
        external_id: Annotated[str | None, Field(description="Instead of words: the conversation a framework "
                                                             "knows by this id (its session id).")] = None,
        namespace: Annotated[str | None, Field(description="Only this namespace (with external_id: the "
                                                           "namespace the id is in; default '').")] = None,
        subject: Annotated[str | None, Field(description="Only conversations about this subject.")] = None,
        limit: Annotated[int, Field(ge=1, le=100, description="How many hits, at most.")] = 10,
    ) -> dict[str, Any]:
        """Find conversations by what was said in them (full-text search over every message;
        each hit names its conversation, position and a snippet), or the one conversation a
        framework knows by `external_id`. Give exactly one of `query` and `external_id`."""
        if bool(query) == bool(external_id):
            raise ToolError("give exactly one of query (words to find) and external_id (a framework's id)")
        if external_id:
            found = await call(mui().find, external_id=external_id, namespace=namespace or "")
            return listing([_summary(found)] if found else [], None, "conversations")
        params = {k: v for k, v in {"q": query, "namespace": namespace, "subject": subject,
                                     "limit": limit}.items() if v is not None}
        page = await call(mui()._run, _core.Call("GET", "/search", params=params))
        return listing(page["items"], page.get("next"), "hits")

    @server.tool(title="Read a conversation's active view")
    async def read_conversation(conversation_id: ConversationId) -> dict[str, Any]:
        """What a model receives from this conversation: `handoff` (the latest checkpoint's
        summary, standing in for the rows it folds, or null) and then `items`, the messages
        after it, each {position, kind, message}. `next_position` is where the next append
        lands."""
        view = await call(mui().active, conversation_id)
        return {"conversation_id": conversation_id, "checkpoint": view.get("checkpoint"),
                "handoff": view.get("handoff"), "items": view.get("items", []),
                "next_position": view.get("next_position"), "skipped": view.get("skipped", [])}


def _conversation_writes(server: MCPServer, mui, call) -> None:
    """The tools that create, append to, fold and fork conversations."""
    @server.tool(title="Create a conversation")
    async def create_conversation(
        title: Annotated[str, Field(max_length=300, description="A short title people will see.")],
        namespace: Annotated[str, Field(max_length=200, description="Your agent's name, to find it again.")] = "mcp",
        external_id: Annotated[str | None, Field(max_length=200, description="Your own id for it (a session "
                                                                            "id): the same id finds the same "
                                                                            "conversation again instead of "
                                                                            "creating another.")] = None,
        subject: Annotated[str | None, Field(max_length=300, description="Who it is about, e.g. "
                                                                        "'customer:42' (erasure finds it by "
                                                                        "this).")] = None,
    ) -> dict[str, Any]:
        """Start a conversation (or, with an external_id that exists, get that one back)."""
        created = await call(mui().create, title=title, namespace=namespace, external_id=external_id,
                             subject=subject)
        return _summary(created)

    @server.tool(title="Append messages")
    async def append_messages(
        conversation_id: ConversationId,
        messages: Annotated[list[dict[str, Any]],
                            Field(min_length=1, max_length=BATCH_MAX, description=MESSAGE_SHAPES)],
        expected_position: Annotated[int | None, Field(ge=0, description="Append only if the first message "
                                                                         "would land at this position "
                                                                         "(another writer came first: "
                                                                         "nothing is written).")] = None,
    ) -> dict[str, Any]:
        """Append messages to the end of a conversation, all or none, in one transaction.
        Returns the positions they were given."""
        return await call(mui().append_batch, conversation_id, messages, expected_position=expected_position)

    @server.tool(title="Checkpoint (fold) a conversation")
    async def checkpoint(
        conversation_id: ConversationId,
        position: Annotated[int, Field(ge=0, description="The last position the summary stands in for.")],
        summary: Annotated[str, Field(min_length=1, description="What the folded messages established: "
                                                                "decisions, facts, open questions.")],
    ) -> dict[str, Any]:
        """Fold positions 0..position into a summary. Nothing is deleted: the active view
        starts with the summary, the full record keeps every message. A checkpoint can only
        move forward."""
        return await call(mui().checkpoint, conversation_id, position=position, summary=summary)

    @server.tool(title="Fork a conversation")
    async def fork(
        conversation_id: ConversationId,
        position: Annotated[int, Field(ge=0, description="The last position the fork keeps.")],
        title: Annotated[str | None, Field(max_length=300, description="The fork's title.")] = None,
    ) -> dict[str, Any]:
        """A new conversation holding copies of positions 0..position (and the checkpoint
        in force there), to try another path; the original is untouched."""
        return _summary(await call(mui().fork, conversation_id, position=position, title=title))


def _fact_tools(server: MCPServer, mui, call, listing) -> None:
    """The tools that recall and propose long-term facts."""
    @server.tool(title="Recall facts")
    async def recall_facts(
        subject: Annotated[str, Field(min_length=1, description="Who the facts are about, e.g. 'customer:42'.")],
        query: Annotated[str, Field(description="What you want to know, in words (ranks the facts).")] = "",
        limit: Annotated[int, Field(ge=1, le=50, description="How many, at most.")] = 10,
    ) -> dict[str, Any]:
        """Approved, current facts about a subject, best first (a person approved each one;
        proposed, expired and invalidated facts are never recalled)."""
        return listing(await call(mui().recall, subject=subject, query=query, limit=limit), None, "facts")

    @server.tool(title="Propose a fact")
    async def propose_fact(
        subject: Annotated[str, Field(min_length=1, description="Who it is about, e.g. 'customer:42'.")],
        text: Annotated[str, Field(min_length=1, description="The fact, as one dated, self-contained sentence.")],
        importance: Annotated[int, Field(ge=1, le=10, description="1 (trivia) to 10 (must never be forgotten).")],
        category: Annotated[str | None, Field(description="e.g. preference, decision, observation.")] = None,
        source_conversation_id: Annotated[str | None, Field(description="The conversation it came from.")] = None,
        source_position: Annotated[int | None, Field(ge=0, description="The message it came from.")] = None,
    ) -> dict[str, Any]:
        """Propose a long-term fact about a subject. It is recalled only after a person
        approves it; returns the proposed fact with its id and status."""
        return await call(mui().propose_fact, subject=subject, text=text, importance=importance, category=category,
                          source_conversation_id=source_conversation_id, source_position=source_position)


def _summary(c: dict) -> dict[str, Any]:
    keys = ("id", "title", "namespace", "external_id", "subject", "message_count", "next_position", "parent_id",
            "parent_relation", "forked_from_position", "created_at", "last_activity_at", "url")
    return {k: c.get(k) for k in keys if k in c}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="memoryui-mcp", description="memoryui as an MCP server over stdio. The API key is read from "
                                         "MEMORYUI_API_KEY (scopes: read, write; facts:read and facts:write for "
                                         "the fact tools).")
    parser.add_argument("--url", default=os.environ.get("MEMORYUI_URL"),
                        help="memoryui's address, e.g. http://127.0.0.1:8000 (default: MEMORYUI_URL)")
    parser.add_argument("--no-legacy-keys", action="store_true",
                        help="answer lists under `items` only, without the keys they had before "
                             "(conversations, hits, facts)")
    parser.add_argument("--project", default=os.environ.get("MEMORYUI_PROJECT") or None,
                        help="the project (its slug) an all-projects key acts in; a project's key needs none "
                             "(default: MEMORYUI_PROJECT)")
    args = parser.parse_args(argv)
    if not (args.url or "").strip():
        print("memoryui-mcp: give memoryui's address with --url (or MEMORYUI_URL)", file=sys.stderr)
        raise SystemExit(2)
    key = os.environ.get("MEMORYUI_API_KEY")
    if not key:
        print("memoryui-mcp: set MEMORYUI_API_KEY to an API key (manage.py create_api_key)", file=sys.stderr)
        raise SystemExit(2)
    build_server(args.url, api_key=key, project=args.project, legacy_keys=not args.no_legacy_keys).run("stdio")


if __name__ == "__main__":
    main()
