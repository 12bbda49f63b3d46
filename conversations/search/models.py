"""A small integer for every conversation, so a message has an integer id in the index.

The message table is keyed by (conversation, position) and, on SQLite, has no
rowid; an FTS5 index needs one. A message's id in the index is
`seq * 2**32 + position`: a conversation's rows sit together in the index, in
order, so "search inside one conversation" is a rowid range and "newest first"
is the index's own order. Keys are handed out by a trigger on conversation
insert and never reused (AUTOINCREMENT / a sequence): an index entry can never
point at another conversation's row.
"""

from django.db import models

from conversations.db import LockingQuerySet
from conversations.personal import PersonalData

# Positions at or above this are not indexed (a conversation would need four
# billion messages first); the index id would run into the next conversation's.
POSITION_SPAN = 2**32


def project_token(project_id: int) -> str:
    """SQLite: the token a project's rows carry in the index's `project` column (search
    migration 0011 writes it as `project_token_sql`)."""
    return f"p{int(project_id)}"


def project_token_sql(key: str) -> str:
    """`project_token` in SQL, of the conversation key row aliased `key`."""
    return f"'p' || {key}.project_id"


class ConversationKey(models.Model):
    seq = models.BigAutoField(primary_key=True)
    conversation_id = models.UUIDField(unique=True)
    # The conversation's project, copied by the trigger that makes the key (migration 0007):
    # a project's search drops another project's hits at the key, the first row each joins.
    project_id = models.BigIntegerField(editable=False)

    class Meta:
        db_table = "search_conversationkey"

    def __str__(self):
        return f"{self.conversation_id} → {self.seq}"


class BorrowedRows(models.Model):
    """A fork's copied rows, found by search through the rows they were copied from.

    `fork_conversation` copies rows 0..upto of `source` into `conversation`, the same
    bytes; tokenising them again would only give the index a second copy of the same
    words (it was 40% of a fork's time). While this row exists, the index holds none of
    `conversation`'s rows 0..upto: a search finds them as `source`'s rows (following
    `source`'s own borrowed rows, for a fork of a fork), and reports every conversation
    that holds them. When `source` is marked `deleting` (prune, delete, erasure), a
    trigger in the same transaction gives the rows it held itself their own index
    entries under `conversation` and points the rest at `source`'s own source: a fork
    stays findable however its ancestors go (search migration 0004).
    """

    conversation_id = models.UUIDField(primary_key=True)
    source_id = models.UUIDField(db_index=True)
    upto = models.BigIntegerField()

    objects = LockingQuerySet.as_manager()

    class Meta:
        db_table = "search_borrowed"

    def __str__(self):
        return f"{self.conversation_id} 0..{self.upto} → {self.source_id}"


class MessageVector(models.Model):
    """A message's text as a vector (conversations/embeddings), and its binary code.

    `msg` is the message's id in the full-text index (`seq * 2**32 + position`); `id` is the
    order vectors were written in, which a server process's in-memory codes
    (conversations/search/meaning.py) follow to take in only what is new. Written by the
    background embedder from the queue that an insert trigger fills in the append's own
    transaction (search migration 0007), so no append waits for a model and none is lost.
    A fork's copied rows have none: they are found through their source's, as the index
    finds them. Derived personal data: deleted with its conversation (the `owned`
    registry), counted and searched for by deletion requests, never exported.
    """

    id = models.BigAutoField(primary_key=True)
    msg = models.BigIntegerField(unique=True)
    conversation_id = models.UUIDField(db_index=True)
    model = models.ForeignKey("embeddings.EmbeddingModel", on_delete=models.PROTECT, related_name="+")
    vector = models.BinaryField()
    code = models.BinaryField()

    # The code is a few bits per dimension of the vector: no needle from one finds the other.
    personal_data = PersonalData(vectors=("vector",), not_searched=("code",))

    class Meta:
        db_table = "search_messagevector"
        indexes = [models.Index(fields=["model"], name="messagevector_model_idx")]

    def __str__(self):
        return f"vector of {self.conversation_id} #{self.msg & (POSITION_SPAN - 1)}"
