"""A conversation found by the id its framework knows it by.

Each door keys its conversations its own way: a LangGraph thread by a digest of its thread id
and checkpoint namespace (and, after time travel, a fork the thread's checkpoints moved to), a
Claude session under its project key, an OpenAI Agents session by generation (`SESSION#1`
after `clear_session`), an OTel conversation by its id or, when it had none, its trace id (a
long id by its digest). A caller knows only the framework's id; `find` answers with the
conversations that id names, the one where it stands now first:

- `langgraph`, a thread id (`checkpoint_ns`: "" the root graph, or a subgraph's namespace;
  omitted: all): the conversation of the thread's latest checkpoint (a fork after time
  travel), then every other its checkpoints were in, then its first one;
- `claude`, a session id: the session in each project key (namespace) it was stored under;
- `openai-agents`, a session id: the live generation, then the earlier ones, newest first;
- `otel`, a `gen_ai.conversation.id` or a trace id: the conversation of that id, and the
  conversations holding the trace's spans;
- `pydantic-ai`, a history id, and `langchain`, a session id: that history's conversation
  (LangChain: also the one it continues in after `clear()`).

Every read goes through the project fence (the scoped managers): another project's
conversations are never found, nor counted.
"""

from dataclasses import dataclass

from conversations import params
from conversations.errors import InvalidInput
from conversations.langgraph import store as langgraph_store
from conversations.langgraph.models import LangChainHistory, LangGraphCheckpoint
from conversations.models import Conversation

from . import otlp, sessions
from .models import ImportSource, SourceEntry

FRAMEWORKS = ("langgraph", "claude", "openai-agents", "otel", "pydantic-ai", "langchain")
ID_MAX = 4096


@dataclass(frozen=True)
class Found:
    conversation: Conversation
    framework: str


def _ordered(ids: list) -> list[Conversation]:
    """The live conversations of `ids`, in that order, each once, within the project."""
    unique = list(dict.fromkeys(i for i in ids if i is not None))
    by_id = {c.pk: c for c in Conversation.objects.live().filter(pk__in=unique)}
    return [by_id[i] for i in unique if i in by_id]


def _langgraph(thread_id: str, checkpoint_ns: str | None) -> list:
    checkpoints = LangGraphCheckpoint.objects.filter(thread_id=thread_id)
    if checkpoint_ns is not None:
        checkpoints = checkpoints.filter(checkpoint_ns=checkpoint_ns)
    # The root graph first, then each subgraph; in each, the latest checkpoint's conversation first.
    rows = checkpoints.order_by("checkpoint_ns", "-checkpoint_id").values_list("checkpoint_ns", "conversation_id")
    spaces = [checkpoint_ns] if checkpoint_ns is not None else sorted({ns for ns, _ in rows} | {""})
    ids = []
    for ns in spaces:
        ids += [cid for row_ns, cid in rows if row_ns == ns]
        # Its first conversation: also found after delete_thread forgot the checkpoints.
        ids += list(Conversation.objects.filter(namespace=langgraph_store.NAMESPACE,
                                                external_id=langgraph_store.thread_external_id(thread_id, ns))
                    .values_list("pk", flat=True))
    return ids


def _claude(session_id: str) -> list:
    return list(ImportSource.objects.filter(format="claude-code", source_key=session_id)
                .order_by("-updated_at").values_list("conversation_id", flat=True))


def _openai_agents(session_id: str) -> list:
    generations = ImportSource.objects.filter(format=sessions.FORMAT, state__session=session_id)
    ordered = sorted(generations, key=lambda s: s.state.get("generation", 0), reverse=True)
    return [s.conversation_id for s in ordered]


def _otel(value: str) -> list:
    ids = list(ImportSource.objects.filter(format=otlp.FORMAT, source_key=otlp.conversation_key(value))
               .values_list("conversation_id", flat=True))
    if len(value) == 32 and all(c in "0123456789abcdef" for c in value.lower()):
        # A trace id: the conversations its spans were written to (a conversation id keys them).
        ids += list(SourceEntry.objects.filter(group=value.lower()).order_by("conversation_id")
                    .values_list("conversation_id", flat=True).distinct())
    return ids


def _history(namespace: str, history_id: str) -> list:
    found = list(LangChainHistory.objects.filter(namespace=namespace, session_id=history_id)
                 .values_list("conversation_id", flat=True)) if namespace == "langchain" else []
    return found + list(Conversation.objects.with_external_id(namespace, history_id).values_list("pk", flat=True))


def find(framework: str, framework_id: str, *, checkpoint_ns: str | None = None) -> list[Conversation]:
    """The conversations a framework's id names, where it stands now first (see the module)."""
    if framework not in FRAMEWORKS:
        raise InvalidInput(f"framework must be one of {', '.join(FRAMEWORKS)}", field="framework")
    framework_id = params.identifier(framework_id, "id", max_length=ID_MAX, required=True)
    if checkpoint_ns is not None:
        if framework != "langgraph":
            raise InvalidInput("checkpoint_ns is for framework langgraph", field="checkpoint_ns")
        params.check_text(checkpoint_ns, "checkpoint_ns")
    if framework == "langgraph":
        ids = _langgraph(framework_id, checkpoint_ns)
    elif framework == "claude":
        ids = _claude(framework_id)
    elif framework == "openai-agents":
        ids = _openai_agents(framework_id)
    elif framework == "otel":
        ids = _otel(framework_id)
    else:
        ids = _history(framework, framework_id)
    return _ordered(ids)


def find_anywhere(text: str) -> list[Found]:
    """What the search box finds by a framework's id: every framework's conversations for it."""
    try:
        value = params.identifier(text, "q", max_length=ID_MAX, required=True)
    except InvalidInput:
        return []
    found, seen = [], set()
    for framework in FRAMEWORKS:
        for conversation in find(framework, value):
            if conversation.pk not in seen:
                seen.add(conversation.pk)
                found.append(Found(conversation, framework))
    return found
