"""What a LangGraph checkpointer (`memoryui_client.integrations.langgraph.MemoryuiSaver`) keeps.

A LangGraph checkpoint is the graph's whole state after a super-step, serialised by the
graph's own serde (`dumps_typed`: a type tag and bytes). memoryui keeps those bytes as they
came (a `BinaryField`, never decoded here), so `get_tuple` hands back what `put` was given,
deep-equal; the same for each pending write. Beside the blob, each checkpoint row records
where its thread reads as a conversation: `conversation_id` (the conversation holding the
rows of the `messages` channel as of this checkpoint), `rows` (how many rows that
conversation had then) and `message_ids` (the LangChain ids those rows came from). That is
what lets a replay from an earlier checkpoint become a fork at the right position.

Checkpoints are framework state, not the log: `delete_thread`, `delete_for_runs` and
`prune` remove rows here, never a message (the conversation stays, append-only).
"""

from django.db import models
from django.utils import timezone

from conversations import projects
from conversations.models import InProject
from conversations.personal import PersonalData

KEY_MAX = 255
ID_MAX = 64


class LangGraphCheckpoint(InProject):
    id = models.BigAutoField(primary_key=True)
    thread_id = models.CharField(max_length=KEY_MAX)
    checkpoint_ns = models.CharField(max_length=KEY_MAX, blank=True, default="")
    # LangGraph's ids are uuid6: their text order is their time order (list() sorts by them).
    checkpoint_id = models.CharField(max_length=ID_MAX)
    parent_checkpoint_id = models.CharField(max_length=ID_MAX, blank=True, default="")
    type = models.CharField(max_length=64)
    data = models.BinaryField()
    metadata_type = models.CharField(max_length=64)
    metadata_data = models.BinaryField()
    # A JSON rendering of the metadata, for list(filter=…); the blob above is what is returned.
    metadata = models.JSONField(default=dict)
    run_id = models.CharField(max_length=KEY_MAX, blank=True, default="")
    # A plain value, not a foreign key (like every owned table).
    conversation_id = models.UUIDField()
    rows = models.IntegerField(default=0)
    message_ids = models.JSONField(default=list)
    created_at = models.DateTimeField(default=timezone.now)

    # The graph's state, messages among it, in LangGraph's serialisation (msgpack, pickle …).
    personal_data = PersonalData(not_searched=("data", "metadata_data", "metadata"),
                                 not_personal=("thread_id", "checkpoint_ns", "checkpoint_id", "parent_checkpoint_id",
                                               "type", "metadata_type", "run_id", "message_ids"))

    objects = projects.scoped_manager(models.QuerySet)
    everywhere = projects.unscoped_manager()

    class Meta:
        base_manager_name = "everywhere"
        constraints = [
            models.UniqueConstraint(fields=["project", "thread_id", "checkpoint_ns", "checkpoint_id"],
                                    name="langgraph_checkpoint_key"),
        ]
        indexes = [
            models.Index(fields=["conversation_id"], name="langgraph_cp_conv_idx"),
            models.Index(fields=["run_id"], name="langgraph_cp_run_idx"),
        ]

    def __str__(self) -> str:
        return f"checkpoint {self.checkpoint_id} of thread {self.thread_id}"


class LangGraphWrite(InProject):
    id = models.BigAutoField(primary_key=True)
    thread_id = models.CharField(max_length=KEY_MAX)
    checkpoint_ns = models.CharField(max_length=KEY_MAX, blank=True, default="")
    checkpoint_id = models.CharField(max_length=ID_MAX)
    task_id = models.CharField(max_length=KEY_MAX)
    task_path = models.CharField(max_length=KEY_MAX * 4, blank=True, default="")
    # The write's index in its task's batch; LangGraph's special channels (errors,
    # interrupts, …) use fixed negative indexes, and those replace an earlier write.
    idx = models.IntegerField()
    channel = models.CharField(max_length=KEY_MAX)
    type = models.CharField(max_length=64)
    data = models.BinaryField()
    conversation_id = models.UUIDField()

    personal_data = PersonalData(not_searched=("data",),
                                 not_personal=("thread_id", "checkpoint_ns", "checkpoint_id", "task_id", "task_path",
                                               "channel", "type"))

    objects = projects.scoped_manager(models.QuerySet)
    everywhere = projects.unscoped_manager()

    class Meta:
        base_manager_name = "everywhere"
        constraints = [
            models.UniqueConstraint(fields=["project", "thread_id", "checkpoint_ns", "checkpoint_id", "task_id", "idx"],
                                    name="langgraph_write_key"),
        ]
        indexes = [models.Index(fields=["conversation_id"], name="langgraph_write_conv_idx")]

    def __str__(self) -> str:
        return f"write {self.idx} of task {self.task_id} at checkpoint {self.checkpoint_id}"


class LangChainHistory(InProject):
    """Where a LangChain chat history (`MemoryuiChatMessageHistory`) stands: the conversation
    of its current generation. `clear()` starts the next generation in a new, empty
    conversation (a child of the one it leaves, which stays as it was): the log is
    append-only, so clearing moves the history on and erases nothing."""

    id = models.BigAutoField(primary_key=True)
    namespace = models.CharField(max_length=200)
    session_id = models.CharField(max_length=KEY_MAX)
    generation = models.IntegerField(default=0)
    conversation_id = models.UUIDField()

    personal_data = PersonalData(not_personal=("namespace", "session_id"))

    objects = projects.scoped_manager(models.QuerySet, namespace_field="namespace")
    everywhere = projects.unscoped_manager()

    class Meta:
        base_manager_name = "everywhere"
        constraints = [models.UniqueConstraint(fields=["project", "namespace", "session_id"],
                                               name="langchain_history_key")]
        indexes = [models.Index(fields=["conversation_id"], name="langchain_history_conv_idx")]

    def __str__(self) -> str:
        return f"history {self.namespace}/{self.session_id} -> {self.conversation_id}"
