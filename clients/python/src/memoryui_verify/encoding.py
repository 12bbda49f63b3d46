"""The bytes a signature covers: pure Python, no Django.

The offline verifier's copy (clients/python/src/memoryui_verify/encoding.py) and this
module (conversations/proofs/encoding.py) are the same bytes; tests/test_proofs_verify.py
checks the two agree. Documented in
docs/auditors.md, "Proving the record".

A signed head signs  b"memoryui signed head v1\\n" + canonical_json(payload)  where the
payload is {"chain_hash", "checkpoint_chain_hash", "checkpoints", "conversation_id", "key_id", "ledger_chains",
"position", "signed_at"}: the message chain's last position and hash, the checkpoint chain's length and
hash, and {"state"|"action"|"snapshot": {"rows", "chain_hash"}} for the ledger chains.
A bundle's manifest signs  b"memoryui manifest v1\\n" + sha256(manifest.json bytes) (hex, ASCII).
canonical_json: keys sorted, no spaces, ASCII only (\\u escapes), UTF-8.
"""

import hashlib
import json

HEAD_DOMAIN = b"memoryui signed head v1\n"
MANIFEST_DOMAIN = b"memoryui manifest v1\n"
HEAD_FIELDS = ("chain_hash", "checkpoint_chain_hash", "checkpoints", "conversation_id", "key_id", "ledger_chains",
               "position", "signed_at")


def canonical_json(value) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode("ascii")


def head_payload(head: dict) -> dict:
    return {name: head[name] for name in HEAD_FIELDS}


def head_message(head: dict) -> bytes:
    return HEAD_DOMAIN + canonical_json(head_payload(head))


def manifest_message(manifest_bytes: bytes) -> bytes:
    return MANIFEST_DOMAIN + hashlib.sha256(manifest_bytes).hexdigest().encode("ascii")
