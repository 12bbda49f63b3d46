"""A LangChain chat history kept in memoryui. Install from a memoryui checkout (the client is
not on PyPI yet): `pip install "./clients/python[langgraph]"` (LangChain's core is all it needs).

    from memoryui_client.integrations.langchain import MemoryuiChatMessageHistory

    history = MemoryuiChatMessageHistory("user-42", url="http://127.0.0.1:8000", api_key="mui_…")
    history.add_messages([HumanMessage("Where is my refund?"), AIMessage("It went out on Monday.")])
    history.messages  # what the model gets next turn

Each message becomes the readable row it maps to (an AI message with its tool calls is
one assistant row, a tool message a `tool` row), with the original kept beside it, so
`messages` gives back what was added. `messages` is the active view: after a fold made
in memoryui, its summary comes first as a system message. `clear()` erases nothing (the
log is append-only): the history continues, empty, in a new conversation whose parent is
the one it leaves, the generation after it (`SESSION#N` as external id). The key needs
`read` and `write`.
"""

import json
from collections.abc import Sequence

from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.messages import BaseMessage, messages_from_dict

from .._core import Call, Retries
from ..client import Memoryui

__all__ = ["MemoryuiChatMessageHistory"]


class MemoryuiChatMessageHistory(BaseChatMessageHistory):
    """LangChain's `BaseChatMessageHistory` over memoryui's HTTP API (see the module)."""

    def __init__(self, session_id: str, *, url: str | None = None, api_key: str | None = None,
                 project: str | None = None, namespace: str = "langchain", retries: Retries | None = None,
                 client: Memoryui | None = None):
        if not isinstance(session_id, str) or not session_id.strip() or "#" in session_id:
            raise ValueError("session_id must be a non-empty string without '#'")
        self.session_id = session_id
        self.namespace = namespace
        self._client = client or Memoryui(url, api_key=api_key, project=project, retries=retries)
        self.conversation_id: str | None = None

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        answer = self._client._run(Call("GET", "/langchain/history",
                                        params={"namespace": self.namespace, "session_id": self.session_id}))
        self.conversation_id = answer["conversation_id"]
        return messages_from_dict([{"type": m["type"], "data": m} for m in answer["messages"]])

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        if not messages:
            return
        body = {"namespace": self.namespace, "session_id": self.session_id,
                "messages": [json.loads(json.dumps(m.model_dump(), default=str)) for m in messages]}
        self.conversation_id = self._client._run(Call("POST", "/langchain/history/messages", json=body))[
            "conversation_id"]

    def clear(self) -> None:
        answer = self._client._run(Call("POST", "/langchain/history/clear",
                                        json={"namespace": self.namespace, "session_id": self.session_id}))
        self.conversation_id = answer["conversation_id"]

    def close(self) -> None:
        self._client.close()
