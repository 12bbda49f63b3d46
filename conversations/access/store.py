"""The one write of the access log."""

from django.db import transaction

from .models import VIA, ConversationAccess


def record_access(*, conversation_id, actor: str, via: str, detail: str = "") -> ConversationAccess:
    """A person opened a conversation (`via` one of VIA). One row, its own transaction."""
    if via not in VIA:
        raise ValueError(f"unknown access kind {via!r}")
    with transaction.atomic():
        return ConversationAccess.objects.create(conversation_id=conversation_id, actor=str(actor)[:200], via=via,
                                                 detail=str(detail)[:40])


def on_conversation_opened(sender, *, conversation_id, actor: str, via: str, detail: str = "", **kwargs) -> None:
    """`plugins.conversation_opened`'s receiver (registered in AccessConfig.ready)."""
    record_access(conversation_id=conversation_id, actor=actor, via=via, detail=detail)
