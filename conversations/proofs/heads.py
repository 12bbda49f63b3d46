"""Signed heads: (conversation id, position, chain hash, time), signed with the server's key.

A head is produced on request (the API), attached to every export (`for_export`), and
written for every conversation changed since the last `manage.py sign_heads` run (cron).
Each is kept (SignedHead), so the heads of a conversation are a dated record of what
its chain was, that no later rewrite of the database can move without breaking a
signature made with a key the rewriter does not hold.
"""

import logging
from dataclasses import dataclass
from datetime import datetime

from django.utils import timezone

from conversations import params
from conversations.models import Conversation

from . import chainview, keys
from .encoding import head_message
from .models import SignedHead, SignHeadsRun, SigningKey

log = logging.getLogger("memoryui.proofs")


def head_dict(head: SignedHead) -> dict:
    return {
        "conversation_id": str(head.conversation_id), "position": head.position, "chain_hash": head.chain_hash,
        "checkpoints": head.checkpoints, "checkpoint_chain_hash": head.checkpoint_chain_hash,
        "ledger_chains": head.ledger_chains,
        "signed_at": params.iso(head.signed_at, timespec="microseconds"), "key_id": head.key_id,
        "signature": head.signature,
    }


def sign(conversation: Conversation, *, reason: str, upto: int | None = None) -> SignedHead:
    """Sign the conversation's chain as it stands at `upto` (default: its last row) and keep the head."""
    state = chainview.head_at(conversation, upto)
    key = keys.active_key()
    head = SignedHead(conversation_id=str(conversation.pk), signed_at=timezone.now(), key_id=key.key_id, reason=reason,
                      **state)
    head.signature = key.sign(head_message(head_dict(head)))
    head.save()
    return head


def verify_head(head: dict, public_keys: dict[str, str]) -> bool:
    public = public_keys.get(head.get("key_id"))
    return bool(public) and keys.verify(public, head_message(head), head.get("signature", ""))


def public_keys() -> list[SigningKey]:
    keys.active_key()  # the current key is on record before anyone asks for the list
    return list(SigningKey.objects.all())


def keys_document() -> dict:
    current = keys.load_active().key_id
    return {"algorithm": "ed25519", "current_key_id": current,
            "keys": [k.as_dict(current_id=current) for k in public_keys()]}


@dataclass
class SignRunResult:
    signed: int
    unchanged: int
    since: datetime | None


def sign_changed(*, batch: int = 500) -> SignRunResult:
    """One head for every conversation changed since the last finished run (every conversation on
    the first): received a row since that run started. A run that stopped half-way is not
    finished, so the next one starts again from the same point. A conversation whose newest head
    already names its current chains is counted as unchanged and not signed again."""
    previous = SignHeadsRun.objects.filter(finished_at__isnull=False).order_by("-started_at").first()
    run = SignHeadsRun.objects.create(started_at=timezone.now())
    since = previous.started_at if previous else None
    qs = Conversation.objects.live()
    if since is not None:
        qs = qs.filter(received_at__gte=since)
    signed = unchanged = 0
    after = None
    while True:
        page = qs.order_by("pk")
        if after is not None:
            page = page.filter(pk__gt=after)
        rows = list(page[:batch])
        if not rows:
            break
        for conversation in rows:
            latest = SignedHead.objects.of(conversation.pk).first()
            state = chainview.head_at(conversation, None)
            if latest is not None and all(getattr(latest, name) == value for name, value in state.items()):
                unchanged += 1
                continue
            sign(conversation, reason="cron")
            signed += 1
        after = rows[-1].pk
    run.signed, run.unchanged, run.finished_at = signed, unchanged, timezone.now()
    run.save(update_fields=["signed", "unchanged", "finished_at"])
    return SignRunResult(signed=signed, unchanged=unchanged, since=since)


def export_head(conversation: Conversation) -> dict:
    """The head an export carries: signed over the export's snapshot (the rows below the
    conversation's `next_position` as read), with the signing key's public half beside it
    (not covered by the signature: a verifier pins the key it trusts with --key)."""
    head = sign(conversation, reason="export", upto=conversation.next_position - 1)
    return head_dict(head) | {"public_key": keys.active_key().public_b64}


def export_head_or_none(conversation: Conversation) -> dict | None:
    """export_head for the plain exports: with the key unusable they still download (an auditor
    needs them), without a head, and the error is logged; memoryui-verify then says no head."""
    try:
        return export_head(conversation)
    except keys.SigningUnavailable as exc:
        log.error("export of %s without a signed head: %s", conversation.pk, exc.message)
        return None


def markdown_section(head: dict) -> str:
    return (
        "\n---\n\n## Signed head\n\n"
        f"The server signed this conversation's chain as exported: position {head['position']}, "
        f"chain hash `{head['chain_hash']}`, at {head['signed_at']}, with key `{head['key_id']}` "
        f"(Ed25519 public key `{head['public_key']}`).\n\n"
        f"Signature: `{head['signature']}`\n\n"
        "Check it, with the rows, on the JSON or JSONL export: `memoryui-verify FILE`.\n"
    )
