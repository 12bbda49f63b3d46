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

# Positions at or above this are not indexed (a conversation would need four
# billion messages first); the index id would run into the next conversation's.
POSITION_SPAN = 2**32


class ConversationKey(models.Model):
    seq = models.BigAutoField(primary_key=True)
    conversation_id = models.UUIDField(unique=True)

    class Meta:
        db_table = "search_conversationkey"

    def __str__(self):
        return f"{self.conversation_id} → {self.seq}"
