"""A LangGraph checkpointer kept in memoryui. Install from a memoryui checkout (the client is not
on PyPI yet): `pip install "./clients/python[langgraph]"`.

    from memoryui_client.integrations.langgraph import MemoryuiSaver

    saver = MemoryuiSaver(url="http://127.0.0.1:8000", api_key="mui_…")
    graph = builder.compile(checkpointer=saver)
    graph.invoke({"messages": [("user", "Where is my refund?")]}, {"configurable": {"thread_id": "t-42"}})

Every checkpoint and pending write is kept as the graph's serializer made it (the
`dumps_typed` type and bytes, base64 on the wire), so what comes back is deep-equal to
what was put. Beside it, the server projects the thread's `messages` channel into a
readable conversation: one row per LangChain message, an AI message with its tool calls
as one assistant row, a tool message as a `tool` row. A subgraph (`checkpoint_ns`) is a
child conversation; a run replayed from an earlier checkpoint (time travel,
`update_state` on an old config) forks the conversation at that checkpoint's last row.

`delete_thread`, `delete_for_runs` and `prune` forget checkpoints, never messages: the
conversations stay (memoryui's log is append-only; deleting one is a person's act).
Sync and async methods are both implemented; the key needs `read` and `write`.
"""

import base64
import json
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

from langchain_core.messages import BaseMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    get_checkpoint_id,
)

from .._core import Call, Retries
from ..client import Memoryui
from ._loop import LoopBoundClient

__all__ = ["MemoryuiSaver"]

MESSAGES = "messages"


class MemoryuiSaver(LoopBoundClient, BaseCheckpointSaver):
    """LangGraph's `BaseCheckpointSaver` over memoryui's HTTP API (see the module)."""

    def __init__(self, *, url: str | None = None, api_key: str | None = None, project: str | None = None,
                 retries: Retries | None = None, timeout=None, serde=None, messages_channel: str = MESSAGES):
        BaseCheckpointSaver.__init__(self, serde=serde)
        self._init_client(url, api_key=api_key, retries=retries, timeout=timeout, project=project)
        self._sync: Memoryui | None = None
        self.messages_channel = messages_channel

    # -- plumbing ----------------------------------------------------------------------

    def _run(self, call: Call):
        if self._sync is None:
            kw = {"timeout": self._timeout} if self._timeout is not None else {}
            self._sync = Memoryui(self.url, api_key=self._api_key, project=self.project, retries=self._retries,
                                  **kw)
        return self._sync._run(call)

    def close(self) -> None:
        """Close the synchronous client's connections (`aclose` for the async one)."""
        if self._sync is not None:
            self._sync.close()
            self._sync = None

    async def aclose(self) -> None:
        await self._close_client()

    def _blob(self, value) -> dict:
        type_, data = self.serde.dumps_typed(value)
        return {"type": type_, "data": base64.b64encode(data).decode("ascii")}

    def _load(self, blob: dict):
        return self.serde.loads_typed((blob["type"], base64.b64decode(blob["data"])))

    # -- the calls, shared by the sync and async methods --------------------------------

    def _put_call(self, config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata) -> Call:
        conf = config["configurable"]
        thread_id, ns = str(conf["thread_id"]), conf.get("checkpoint_ns", "")
        metadata = {**(metadata or {})}
        body = {
            "thread_id": thread_id, "checkpoint_ns": ns, "checkpoint_id": checkpoint["id"],
            "parent_checkpoint_id": conf.get("checkpoint_id") or "",
            "checkpoint": self._blob(checkpoint), "metadata": self._blob(metadata),
            "metadata_json": _jsonable(metadata),
        }
        messages = checkpoint.get("channel_values", {}).get(self.messages_channel)
        if isinstance(messages, list) and all(isinstance(m, BaseMessage) for m in messages):
            body["messages"] = [{"id": m.id, "message": _jsonable(m.model_dump())} for m in messages]
        return Call("POST", "/langgraph/checkpoints", json=body)

    @staticmethod
    def _config(thread_id, ns, checkpoint_id) -> RunnableConfig:
        return {"configurable": {"thread_id": thread_id, "checkpoint_ns": ns, "checkpoint_id": checkpoint_id}}

    def _writes_call(self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str,
                     task_path: str) -> Call:
        conf = config["configurable"]
        body = {"thread_id": str(conf["thread_id"]), "checkpoint_ns": conf.get("checkpoint_ns", ""),
                "checkpoint_id": conf["checkpoint_id"], "task_id": task_id, "task_path": task_path,
                "writes": [{"idx": WRITES_IDX_MAP.get(channel, idx), "channel": channel, "value": self._blob(value)}
                           for idx, (channel, value) in enumerate(writes)]}
        return Call("POST", "/langgraph/writes", json=body)

    def _list_call(self, config: RunnableConfig | None, *, filter=None, before=None, limit=None,
                   latest_in_ns: bool = False) -> Call:
        params: dict[str, Any] = {}
        if config:
            conf = config["configurable"]
            params["thread_id"] = str(conf["thread_id"])
            if latest_in_ns or "checkpoint_ns" in conf:
                params["checkpoint_ns"] = conf.get("checkpoint_ns", "")
            if checkpoint_id := get_checkpoint_id(config):
                params["checkpoint_id"] = checkpoint_id
        if before and (before_id := get_checkpoint_id(before)):
            params["before"] = before_id
        if filter:
            params["filter"] = json.dumps(_jsonable(filter))
        if limit is not None:
            params["limit"] = limit
        return Call("GET", "/langgraph/checkpoints", params=params)

    def _tuple(self, row: dict) -> CheckpointTuple:
        thread_id, ns = row["thread_id"], row["checkpoint_ns"]
        parent = row.get("parent_checkpoint_id")
        return CheckpointTuple(
            config=self._config(thread_id, ns, row["checkpoint_id"]),
            checkpoint=self._load(row["checkpoint"]),
            metadata=self._load(row["metadata"]),
            parent_config=self._config(thread_id, ns, parent) if parent else None,
            pending_writes=[(w["task_id"], w["channel"], self._load(w["value"])) for w in row["pending_writes"]],
        )

    # -- sync ----------------------------------------------------------------------------

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        rows = self._run(self._list_call(config, limit=1, latest_in_ns=True))["items"]
        return self._tuple(rows[0]) if rows else None

    def list(self, config: RunnableConfig | None, *, filter: dict[str, Any] | None = None,
             before: RunnableConfig | None = None, limit: int | None = None) -> Iterator[CheckpointTuple]:
        for row in self._run(self._list_call(config, filter=filter, before=before, limit=limit))["items"]:
            yield self._tuple(row)

    def put(self, config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata,
            new_versions: ChannelVersions) -> RunnableConfig:
        self._run(self._put_call(config, checkpoint, metadata))
        conf = config["configurable"]
        return self._config(conf["thread_id"], conf.get("checkpoint_ns", ""), checkpoint["id"])

    def put_writes(self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str,
                   task_path: str = "") -> None:
        self._run(self._writes_call(config, writes, task_id, task_path))

    def delete_thread(self, thread_id: str) -> None:
        self._run(Call("POST", "/langgraph/threads/delete", json={"thread_id": str(thread_id)}))

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        self._run(Call("POST", "/langgraph/runs/delete", json={"run_ids": [str(r) for r in run_ids]}))

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        self._run(Call("POST", "/langgraph/threads/copy", json={"source_thread_id": str(source_thread_id),
                                                                "target_thread_id": str(target_thread_id)}))

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        self._run(Call("POST", "/langgraph/threads/prune", json={"thread_ids": [str(t) for t in thread_ids],
                                                                 "strategy": strategy}))

    # -- async ---------------------------------------------------------------------------

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        rows = (await self._send(self._list_call(config, limit=1, latest_in_ns=True)))["items"]
        return self._tuple(rows[0]) if rows else None

    async def alist(self, config: RunnableConfig | None, *, filter: dict[str, Any] | None = None,
                    before: RunnableConfig | None = None, limit: int | None = None) -> AsyncIterator[CheckpointTuple]:
        answer = await self._send(self._list_call(config, filter=filter, before=before, limit=limit))
        for row in answer["items"]:
            yield self._tuple(row)

    async def aput(self, config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata,
                   new_versions: ChannelVersions) -> RunnableConfig:
        await self._send(self._put_call(config, checkpoint, metadata))
        conf = config["configurable"]
        return self._config(conf["thread_id"], conf.get("checkpoint_ns", ""), checkpoint["id"])

    async def aput_writes(self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str,
                          task_path: str = "") -> None:
        await self._send(self._writes_call(config, writes, task_id, task_path))

    async def adelete_thread(self, thread_id: str) -> None:
        await self._send(Call("POST", "/langgraph/threads/delete", json={"thread_id": str(thread_id)}))

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        await self._send(Call("POST", "/langgraph/runs/delete", json={"run_ids": [str(r) for r in run_ids]}))

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        await self._send(Call("POST", "/langgraph/threads/copy", json={"source_thread_id": str(source_thread_id),
                                                                       "target_thread_id": str(target_thread_id)}))

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        await self._send(Call("POST", "/langgraph/threads/prune", json={"thread_ids": [str(t) for t in thread_ids],
                                                                        "strategy": strategy}))


def _jsonable(value):
    """A JSON rendering (for the server's filters and projection): what JSON has no form for
    becomes its text. The blobs, not this, are what reads give back."""
    return json.loads(json.dumps(value, default=str, allow_nan=False, ensure_ascii=False))
