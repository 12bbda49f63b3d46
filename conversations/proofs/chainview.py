"""The one place the proofs read the conversations' hash chain.

INTERIM: until conversations/chain.py and the chain columns land (issue 23.1, another
engineer), the head is computed here at signing time over the stored message rows:
h(-1) = SHA-256("memoryui interim chain v0"), h(n) = SHA-256(h(n-1) ‖ SHA-256(content bytes of row n)).
It proves the export matches what the server held when it signed, not that the row
was unchanged since it was written; the write-transaction chain replaces it.
"""

import hashlib

from conversations.models import Conversation, Message

GENESIS = hashlib.sha256(b"memoryui interim chain v0").hexdigest()
BATCH = 2000


def step(previous_hex: str, content: str) -> str:
    return hashlib.sha256(bytes.fromhex(previous_hex) + hashlib.sha256(content.encode("utf-8")).digest()).hexdigest()


def head_at(conversation: Conversation, upto: int | None) -> tuple[int, str]:
    """(last position covered, chain hash there); position -1 and the genesis hash when empty."""
    last = conversation.next_position - 1 if upto is None else min(upto, conversation.next_position - 1)
    chain, after = GENESIS, -1
    while after < last:
        rows = list(Message.objects.page(conversation.pk, after=after, until=last, limit=BATCH)
                    .values_list("position", "content"))
        if not rows:
            break
        for position, content in rows:
            chain = step(chain, content)
        after = rows[-1][0]
    return last, chain
