"""Proofs over JSON: the public signing keys, signed heads on request, the subject access export."""

from contextlib import nullcontext
from typing import Any

from django.http import StreamingHttpResponse
from ninja import Field, Path, Query, Router, Schema, Status

from conversations import keyset
from conversations.api_schemas import ListOut, errors_doc
from conversations.apiauth import actor_of, public, scope
from conversations.models import Conversation, parse_conversation_id
from conversations.project_http import every_project

from . import bundle, heads
from .models import SignedHead

router = Router(tags=["proofs"])
HEAD_LIST_MAX = 100


class SigningKeyOut(Schema):
    key_id: str
    algorithm: str
    public_key: str
    created_at: str
    retired_at: str | None
    current: bool


class SigningKeysOut(Schema):
    algorithm: str
    current_key_id: str
    keys: list[SigningKeyOut]


class SignedHeadOut(Schema):
    conversation_id: str
    position: int
    chain_hash: str
    checkpoints: int = Field(..., description="How many checkpoints the checkpoint chain covers.")
    checkpoint_chain_hash: str = Field(..., description="The checkpoint chain's last hash (empty: none).")
    ledger_chains: dict[str, Any] | None = Field(
        ..., description='The ledger chains: {"state"|"action"|"snapshot": {"rows": n, "chain_hash": hex}}.')
    # Text, not a datetime: it is signed as written (microseconds always present).
    signed_at: str
    key_id: str
    signature: str
    public_key: str


class SignedHeadList(ListOut):
    items: list[SignedHeadOut]


@router.get("/signing-keys", operation_id="signing_keys", summary="The server's public signing keys", auth=None,
            response={200: SigningKeysOut})
@public
def signing_keys(request):
    """Every Ed25519 public key the server has signed heads with, the retired ones too, so that a
    head signed before a rotation still verifies. Public: no key needed. A key's id is the first
    16 hex digits of SHA-256 over its 32 raw bytes (the base64 `public_key`)."""
    return heads.keys_document()


def _head_out(head: SignedHead, public: dict[str, str]) -> dict:
    return heads.head_dict(head) | {"public_key": public.get(head.key_id, "")}


@router.post("/conversations/{conversation_id}/signed-heads", operation_id="sign_head",
             summary="Sign the conversation's chain head now", response={201: SignedHeadOut, **errors_doc(404)})
@scope("read")
def sign_head(request, conversation_id: str = Path(..., description="The conversation's id (a UUID).")):
    """Signs (conversation id, last position, chain hash, time) with the server's current key and keeps
    the head. Needs `read`. Check it offline against an export of the same conversation."""
    conversation = Conversation.objects.get_live(parse_conversation_id(conversation_id))
    head = heads.sign(conversation, reason="request")
    public = {k.key_id: k.public_key for k in heads.public_keys()}
    return Status(201, _head_out(head, public))


@router.get("/conversations/{conversation_id}/signed-heads", operation_id="list_signed_heads",
            summary="The conversation's signed heads, newest first", response={200: SignedHeadList, **errors_doc(404)})
@scope("read")
def list_signed_heads(request, conversation_id: str = Path(..., description="The conversation's id (a UUID).")):
    """Up to 100 heads signed for this conversation (on request, with exports, by `sign_heads`). Needs `read`."""
    conversation = Conversation.objects.get_live(parse_conversation_id(conversation_id))
    public = {k.key_id: k.public_key for k in heads.public_keys()}
    items = [_head_out(h, public) for h in SignedHead.objects.of(conversation.pk)[:HEAD_LIST_MAX]]
    # Not paged: the newest HEAD_LIST_MAX heads.
    return keyset.listing(items, None)


@router.get(
    "/subject-export", operation_id="export_subject", summary="Everything held about a subject, as one ZIP",
    response={200: None, **errors_doc(422)},
    openapi_extra={"responses": {200: {
        "description": "A ZIP streamed as a download: conversations (JSONL and Markdown), facts with history, "
                       "task state and actions, access-log rows, deletion receipts, a signed manifest.",
        "content": {"application/zip": {"schema": {"type": "string", "format": "binary"}}},
    }}},
)
@scope("admin")
def export_subject(request, subject: str = Query(..., description="Whom the export is about; matched as a "
                                                                   "deletion request matches it (NFC, case-folded)."),
                   all_projects: bool = Query(False, description="Every project's rows, not only the key's: an "
                                                                  "all-projects key only; recorded in the audit log.")):
    """GDPR Art. 15 and 20. Needs `admin`. Holds the key's project's rows, or every project's with
    `all_projects`; the manifest says which. Recorded in the audit log and the access logs; the audit
    event names the subject by its SHA-256 only. Check the file offline with `memoryui-verify`."""
    acting = every_project(request, reason="subject export for every project") if all_projects else nullcontext()
    with acting:
        export = bundle.prepare(subject, all_projects=all_projects)
    bundle.record_download(export, actor=actor_of(request), via="api")
    response = StreamingHttpResponse(export.chunks(), content_type="application/zip")
    response["Content-Disposition"] = f'attachment; filename="{export.filename}"'
    return response
