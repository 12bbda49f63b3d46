"""The subject access export: everything held about a subject, in one ZIP.

GDPR Art. 15 and 20: a person may ask for everything held about them, in a portable
form. The subject is matched as erasure matches it (NFC, case-folded:
conversations/subjects.py), so the export holds exactly what a deletion request for
the same subject would remove. The ZIP:

    README.txt                      what is in it and how to check it
    conversations.jsonl             one line per conversation: its metadata and checkpoints
    conversations/<id>.jsonl        every row, the ledger lines, the signed head last
    conversations/<id>.md           the same conversation to read
    task_state_and_actions.jsonl    each conversation's task state, its history, actions, snapshots
    facts.jsonl                     each fact with its review decision and its whole history
    access_log.jsonl                who opened the conversations, and the subject's facts
    deletion_receipts.jsonl         receipts of deletion requests for this subject
    erased_rows.jsonl               what those requests kept of the erased rows (commitments, chain
                                    hashes: no content) and the last head signed before the erasure
    manifest.json                   SHA-256 and size of every file above, the signed heads, the keys
    manifest.sig.json               the server's signature over manifest.json

It is written as it is sent (zipstream.py): rows are read in keyset batches, so a
subject with a million messages exports in the memory of one batch. `memoryui-verify`
(clients/python) checks the file offline.
"""

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass

from django.utils import timezone

from conversations import export as conversation_export
from conversations import params, projects, store
from conversations.access.models import ConversationAccess
from conversations.access.store import record_access
from conversations.errors import InvalidInput
from conversations.facts.models import Fact, FactAccess, FactEvent
from conversations.facts.store import record_access as record_fact_access
from conversations.ledger import export as ledger_export
from conversations.models import Conversation, Project
from conversations.retention.models import DeletionReceipt, ErasedRow
from conversations.subjects import normalize_subject

from . import heads, keys
from .encoding import manifest_message
from .models import SignedHead
from .zipstream import ZipStream

FORMAT = "memoryui-subject-export"
VERSION = 1
BATCH = 2000
FACT_BATCH = 500
SUBJECT_MAX = Conversation._meta.get_field("subject").max_length


@dataclass
class SubjectExport:
    subject: str
    conversation_ids: list
    facts: int
    messages: int
    filename: str
    # What it holds: one project's rows (its slug), or every project's (None); read in this scope.
    project: str | None = None
    scope: projects.Scope = projects.EVERY

    def chunks(self) -> Iterator[bytes]:
        """The ZIP, each chunk made in the scope the export was prepared in (a download is read
        after the request that asked for it has returned)."""
        chunks = _zip_chunks(self)
        while True:
            with projects.scoped(self.scope):
                chunk = next(chunks, None)
            if chunk is None:
                return
            yield chunk

    def audit_detail(self, via: str) -> dict:
        """Ids and counts, and the subject as a hash: the audit log holds no personal text."""
        return {"subject_sha256": hashlib.sha256(self.subject.encode("utf-8")).hexdigest(),
                "conversations": len(self.conversation_ids), "messages": self.messages, "facts": self.facts,
                "via": via, "project": self.project, "all_projects": self.project is None}


def clean_subject(subject) -> str:
    if subject is None or (isinstance(subject, str) and not subject.strip()):
        raise InvalidInput("subject is required: whom the export is about", field="subject")
    if not isinstance(subject, str):
        raise InvalidInput("subject must be a string", field="subject")
    subject = subject.strip()
    if len(subject) > SUBJECT_MAX:
        raise InvalidInput(f"subject is {len(subject)} characters; at most {SUBJECT_MAX}", field="subject")
    if not subject.isprintable():
        raise InvalidInput("subject must be printable text (no control characters)", field="subject")
    return subject


def prepare(subject, *, all_projects: bool = False) -> SubjectExport:
    """What the export will hold: the subject's rows in the current project, or in every project
    (`all_projects`, where every project is seen: projects.acting). Checks the subject at once
    (InvalidInput naming the field)."""
    subject = clean_subject(subject)
    keys.active_key()  # SigningUnavailable (503) now, before anything streams, if the key cannot sign
    with projects.acting(all_projects=all_projects) as project_id:
        rows = list(Conversation.objects.live().about(subject).order_by("created_at", "id")
                    .values_list("id", "next_position"))
        norm = normalize_subject(subject)
        facts = Fact.objects.filter(subject_norm=norm).count()
        scope = projects.current()
    digest = hashlib.sha256(norm.encode("utf-8")).hexdigest()[:12]
    slug = Project.objects.get(pk=project_id).slug if project_id is not None else None
    return SubjectExport(subject=subject, conversation_ids=[r[0] for r in rows], facts=facts,
                         messages=sum(r[1] for r in rows), filename=f"subject-export-{digest}.zip",
                         project=slug, scope=scope)


def record_download(export: SubjectExport, *, actor: str, via: str) -> None:
    """The download is a read of the subject's conversations and facts: audited, and in the access
    logs (an export of every project: in each project's, as each conversation's own)."""
    with projects.scoped(export.scope):
        store.record_audit(actor=actor, action="subject.exported", target_type="subject",
                           target_id=export.audit_detail(via)["subject_sha256"][:64], detail=export.audit_detail(via),
                           **({"project_id": None} if export.project is None else {}))
        held: dict[int, list] = {}
        for cid, project_id in Conversation.objects.filter(pk__in=export.conversation_ids).values_list("pk",
                                                                                                        "project_id"):
            held.setdefault(project_id, []).append(cid)
        for project_id in Fact.objects.filter(subject_norm=normalize_subject(export.subject)).values_list(
                "project_id", flat=True).distinct():
            held.setdefault(project_id, [])
    # Each project's access logs get their own rows of the read.
    for project_id, ids in sorted(held.items()):
        with projects.scoped(projects.one(project_id)):
            for cid in ids:
                record_access(conversation_id=cid, actor=actor, via="export", detail="subject zip")
            record_fact_access(actor=actor, subject=export.subject, view="subject access export")


def _dumps(value) -> str:
    return json.dumps(value, ensure_ascii=False, default=str) + "\n"


def _batched(qs, *, key: str = "id") -> Iterator:
    after = None
    while True:
        page = qs.order_by(key) if after is None else qs.filter(**{f"{key}__gt": after}).order_by(key)
        rows = list(page[:BATCH])
        if not rows:
            return
        yield from rows
        after = getattr(rows[-1], key)


def _fact_dict(fact: Fact) -> dict:
    fields = ("id", "subject", "text", "category", "importance", "status", "reviewed_by", "reason",
              "source_position", "created_by", "access_count", "superseded_by_id")
    out = {name: getattr(fact, name) for name in fields}
    for name in ("valid_from", "invalid_at", "recorded_at", "reviewed_at", "invalidated_recorded_at",
                 "superseded_at", "expires_at", "expiry_recorded_at", "last_accessed_at"):
        out[name] = params.iso(getattr(fact, name))
    out["source_conversation_id"] = str(fact.source_conversation_id) if fact.source_conversation_id else None
    out["state"] = fact.state()
    return out


def _facts_chunks(norm: str) -> Iterator[str]:
    """Each fact with its whole history, the history read once per batch of facts."""
    after = 0
    while True:
        facts = list(Fact.objects.filter(subject_norm=norm, id__gt=after).order_by("id")[:FACT_BATCH])
        if not facts:
            return
        history: dict[int, list] = {}
        for e in FactEvent.objects.filter(fact_id__in=[f.id for f in facts]).order_by("at", "id"):
            history.setdefault(e.fact_id, []).append(
                {"id": e.id, "kind": e.kind, "at": params.iso(e.at), "actor": e.actor, "reason": e.reason,
                 "detail": e.detail})
        for fact in facts:
            yield _dumps(_fact_dict(fact) | {"history": history.get(fact.id, [])})
        after = facts[-1].id


def _ledger_chunks(ids: list) -> Iterator[str]:
    for cid in ids:
        yield _dumps({"conversation_id": str(cid), **ledger_export.conversation_ledger(cid)})


def _access_chunks(ids: list, norm: str) -> Iterator[str]:
    for start in range(0, len(ids), 500):
        qs = ConversationAccess.objects.filter(conversation_id__in=ids[start:start + 500])
        for row in _batched(qs):
            yield _dumps({"log": "conversation", "id": row.id, "at": params.iso(row.at), "actor": row.actor,
                          "conversation_id": str(row.conversation_id), "via": row.via, "detail": row.detail})
    for row in _batched(FactAccess.objects.filter(subject_norm=norm)):
        yield _dumps({"log": "facts", "id": row.id, "at": params.iso(row.at), "actor": row.actor,
                      "subject": row.subject, "view": row.view})


def _receipts(subject: str) -> list[DeletionReceipt]:
    """Receipts keep only SHA-256 of the subject as the request typed it: those of the forms
    this subject is likely typed in are found (as given, normal form, lower case)."""
    forms = {subject, normalize_subject(subject), subject.lower()}
    hashes = {hashlib.sha256(f.encode("utf-8")).hexdigest() for f in forms if f}
    return list(DeletionReceipt.objects.filter(subject_sha256__in=hashes).order_by("created_at", "id"))


def _receipt_chunks(receipts: list[DeletionReceipt]) -> Iterator[str]:
    for receipt in receipts:
        yield _dumps(receipt.as_document())


def _erased_chunks(receipts: list[DeletionReceipt]) -> Iterator[str]:
    """What those deletion requests kept of the rows they erased: commitments and chain hashes, no
    content and no salt, so memoryui-verify can show each erased chain still links up (erased, not
    tampered) and ends where the server's last signed head of it said."""
    for receipt in receipts:
        qs = ErasedRow.objects.filter(receipt_id=receipt.pk)
        # In chain order, read in chunks (the unique index on these columns serves the order).
        for row in qs.order_by("conversation_ref", "record_type", "position").iterator(chunk_size=BATCH):
            yield _dumps({"receipt_id": str(row.receipt_id), "conversation_id": row.conversation_ref,
                          "record_type": row.record_type, "position": row.position,
                          "commitment": bytes(row.commitment).hex() if row.commitment is not None else None,
                          "chain_hash": bytes(row.chain_hash).hex() if row.chain_hash is not None else None})
        refs = list(qs.order_by().values_list("conversation_ref", flat=True).distinct())
        for ref in refs:
            head = SignedHead.objects.of(ref).first()
            if head is not None:
                yield _dumps({"receipt_id": str(receipt.pk), "conversation_id": ref,
                              "record_type": "signed_head", **heads.head_dict(head)})


def _conversation_line(conversation: Conversation) -> str:
    return _dumps({**conversation_export.conversation_dict(conversation),
                   "checkpoints": [conversation_export.checkpoint_dict(cp)
                                   for cp in conversation_export.checkpoints_of(conversation)]})


def _readme(export: SubjectExport, when) -> str:
    held = f"the project {export.project}" if export.project else "every project"
    return (
        f"memoryui subject access export\n\nSubject: {export.subject}\nHeld in: {held}\nCreated: {params.iso(when)}\n"
        f"Conversations: {len(export.conversation_ids)}; messages: {export.messages}; facts: {export.facts}\n\n"
        "Everything memoryui held about this subject when the export was made, matched as a deletion\n"
        "request matches it (Unicode NFC, case-folded). See the module docstring of\n"
        "conversations/proofs/bundle.py, or docs/auditors.md (\"Proving the record\"), for each file.\n\n"
        "To check it offline (no server needed):\n\n"
        "    pip install './clients/python[verify]'    # from a memoryui checkout\n"
        "    memoryui-verify THIS.zip --key <public key from the admin page>\n\n"
        "manifest.json names the SHA-256 of every file and the signed head of every conversation;\n"
        "manifest.sig.json is the server's Ed25519 signature over it.\n"
    )


def _zip_chunks(export: SubjectExport) -> Iterator[bytes]:
    when = timezone.now()
    norm = normalize_subject(export.subject)
    zs = ZipStream(when)
    yield from zs.entry("README.txt", [_readme(export, when)])
    conversations, signed = [], []
    for cid in export.conversation_ids:
        conversation = Conversation.objects.live().filter(pk=cid).first()
        if conversation is not None:  # pruned or deleted since the export was asked for
            conversations.append(conversation)
    yield from zs.entry("conversations.jsonl", (_conversation_line(c) for c in conversations))
    for conversation in conversations:
        head = heads.export_head(conversation)
        signed.append(head)
        yield from zs.entry(f"conversations/{conversation.pk}.jsonl",
                            conversation_export.jsonl_chunks(conversation, head))
        yield from zs.entry(f"conversations/{conversation.pk}.md",
                            conversation_export.markdown_chunks(conversation, head))
    yield from zs.entry("task_state_and_actions.jsonl", _ledger_chunks([c.pk for c in conversations]))
    yield from zs.entry("facts.jsonl", _facts_chunks(norm))
    yield from zs.entry("access_log.jsonl", _access_chunks([c.pk for c in conversations], norm))
    receipts = _receipts(export.subject)
    yield from zs.entry("deletion_receipts.jsonl", _receipt_chunks(receipts))
    yield from zs.entry("erased_rows.jsonl", _erased_chunks(receipts))
    key = keys.active_key()
    manifest = {
        "format": FORMAT, "version": VERSION, "created_at": params.iso(when), "subject": export.subject,
        "subject_normalized": norm, "project": export.project, "all_projects": export.project is None,
        "files": list(zs.files),
        "heads": [{k: v for k, v in h.items() if k != "public_key"} for h in signed],
        "keys": heads.keys_document()["keys"],
    }
    manifest_bytes = json.dumps(manifest, ensure_ascii=False, indent=1).encode("utf-8")
    yield from zs.entry("manifest.json", [manifest_bytes])
    signature = {"key_id": key.key_id, "public_key": key.public_b64, "algorithm": "ed25519",
                 "signature": key.sign(manifest_message(manifest_bytes))}
    yield from zs.entry("manifest.sig.json", [json.dumps(signature, indent=1) + "\n"])
    yield from zs.close()
