"""The record's hash chains: the canonical encoding, commitments, links and verification.

Pure Python (hashlib, os, json, datetime): no Django, so the offline verifier
(`memoryui-verify` in clients/python) can carry an exact copy and check an export
without a server. docs/auditors.md, "Proving the record", says the same in prose.

Chains
------
Every chained row belongs to exactly one chain, and a chain is a sequence of rows
of one record type:

=============  ==========================================  ===========================
record type    one chain per                               order of the chain
=============  ==========================================  ===========================
``message``    conversation                                ``position`` 0, 1, 2, …
``checkpoint`` conversation                                row id (creation order)
``state``      conversation (task-state versions)          row id
``action``     conversation (ledger actions)               row id
``snapshot``   conversation (workspace snapshots)          row id
``audit``      the whole database (the audit log)          row id
=============  ==========================================  ===========================

A row stores three values beside its content:

- ``salt``: 16 random bytes, made for this row alone (``NULL`` once erased);
- ``commitment`` = SHA-256(salt ‖ payload), 32 bytes;
- ``chain_hash`` = SHA-256(previous row's chain_hash ‖ commitment), 32 bytes.

The first row of a chain links to ``GENESIS``, 32 zero bytes. The last row's
chain hash is the chain's *head*: it stands for every row before it.

A fork copies its parent's message rows 0..N with their salts, commitments and
chain hashes unchanged, so the copied prefix verifies on its own and the fork's
row N carries the parent's chain hash at N (the fork also records it as
``forked_from_chain_hash``). Its checkpoint and ledger chains start again at
``GENESIS``.

Erasure removes the content and the salt and keeps the commitment and chain hash.
Without the salt the commitment says nothing about the content, even content with
little entropy (an email address): guessing it means guessing 128 random bits too.
The links still verify, so an erased row is reported as *erased*, not as tampered.

Payload (the canonical encoding)
--------------------------------
``payload(record_type, values)`` is::

    b"memoryui-chain-v1" 0x00 record_type(ASCII) 0x00  field_1 field_2 … field_n

over the fields of ``FIELDS[record_type]`` in that order. Each field is either

- ``0x00`` for a NULL (``None``), or
- ``0x01``, then the length of the field's text in UTF-8 bytes as a 4-byte
  big-endian unsigned integer, then those bytes.

A field's text (``field_text``):

- a string is itself (exactly as stored: message content is the stored JSON text,
  byte for byte);
- an integer is its decimal form (``-1``, ``0``, ``42``); a boolean is ``true``/``false``;
- a time is UTC as ``YYYY-MM-DDTHH:MM:SS.ffffffZ``, always six digits of
  microseconds (``canonical_time``);
- a JSON object or array (the audit log's ``detail``) is its canonical JSON: keys
  sorted, separators ``,`` and ``:`` with no spaces, non-ASCII characters written
  as themselves (not ``\\u`` escapes), as Python's ``json.dumps(value,
  sort_keys=True, separators=(",", ":"), ensure_ascii=False)`` writes it.

Verification
------------
``verify_rows`` walks one chain: for each row it recomputes the commitment (when the
content and salt are there) and the link, and reports the first break with its
position and reason, the erased positions, and the head.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
from dataclasses import dataclass
from dataclasses import field as dc_field
from datetime import datetime, timezone

VERSION = b"memoryui-chain-v1"
SALT_BYTES = 16
HASH_BYTES = 32
GENESIS = bytes(HASH_BYTES)

# The fields of each record type, in payload order (see the module docstring).
FIELDS = {
    "message": ("position", "kind", "content", "created_at"),
    "checkpoint": ("message_position", "summary", "created_at", "created_by"),
    "state": ("version", "position", "state", "changes", "actor", "created_at"),
    "action": ("position", "namespace", "idempotency_key", "name", "arguments", "result", "status",
               "original_id", "actor", "created_at"),
    "snapshot": ("position", "repo", "ref", "commit_sha", "base_sha", "files_changed", "insertions",
                 "deletions", "actor", "created_at"),
    "audit": ("at", "actor", "action", "target_type", "target_id", "detail"),
}

_NULL = b"\x00"
_PRESENT = b"\x01"
_LENGTH = struct.Struct(">I")
_SHA = hashlib.sha256


def new_salt() -> bytes:
    return os.urandom(SALT_BYTES)


def canonical_time(value) -> str:
    """A time as the payload writes it: UTC, microseconds, `Z`. A naive time is taken as UTC;
    a string already in this form is returned unchanged."""
    if isinstance(value, str):
        return value
    if value.tzinfo is not None:
        # timezone.utc, not datetime.UTC: the offline verifier's copy runs on Python 3.10.
        value = value.astimezone(timezone.utc).replace(tzinfo=None)  # noqa: UP017
    return value.isoformat(timespec="microseconds") + "Z"


def canonical_json(value) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def field_text(value) -> str | None:
    """The text a field is encoded as (None for NULL)."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, datetime):
        return canonical_time(value)
    if isinstance(value, (dict, list)):
        return canonical_json(value)
    raise TypeError(f"cannot encode a {type(value).__name__} in a chain payload")


def _encode_field(value) -> bytes:
    text = field_text(value)
    if text is None:
        return _NULL
    data = text.encode("utf-8")
    return _PRESENT + _LENGTH.pack(len(data)) + data


def payload(record_type: str, values) -> bytes:
    """The canonical bytes of one row. `values` is a mapping with every field of
    FIELDS[record_type], or a sequence of the values in that order."""
    names = FIELDS[record_type]
    if isinstance(values, dict):
        values = [values[name] for name in names]
    elif len(values) != len(names):
        raise ValueError(f"a {record_type} payload has {len(names)} fields, got {len(values)}")
    head = VERSION + b"\x00" + record_type.encode("ascii") + b"\x00"
    return head + b"".join(_encode_field(v) for v in values)


_MESSAGE_HEAD = VERSION + b"\x00message\x00"


def message_payload(position: int, kind: str, content: str, created_at) -> bytes:
    """payload("message", …), written out for the append path (the same bytes)."""
    p = str(position).encode()
    k = kind.encode()
    c = content.encode("utf-8")
    t = canonical_time(created_at).encode()
    pack = _LENGTH.pack
    return b"".join((_MESSAGE_HEAD, _PRESENT, pack(len(p)), p, _PRESENT, pack(len(k)), k,
                     _PRESENT, pack(len(c)), c, _PRESENT, pack(len(t)), t))


def commitment(salt: bytes, payload_bytes: bytes) -> bytes:
    """SHA-256(salt ‖ payload)."""
    return _SHA(salt + payload_bytes).digest()


def link(prev_chain_hash: bytes, commitment_bytes: bytes) -> bytes:
    """SHA-256(previous chain hash ‖ commitment); the first row's previous is GENESIS."""
    return _SHA(prev_chain_hash + commitment_bytes).digest()


def seal(prev_chain_hash: bytes, payload_bytes: bytes, salt: bytes | None = None) -> tuple[bytes, bytes, bytes]:
    """(salt, commitment, chain_hash) for a new row after `prev_chain_hash`."""
    salt = salt if salt is not None else new_salt()
    c = commitment(salt, payload_bytes)
    return salt, c, link(prev_chain_hash, c)


@dataclass
class Verdict:
    """The outcome of walking one chain."""

    ok: bool = True
    rows: int = 0
    head: bytes = GENESIS
    # The position (or row id) of the last row walked, None for an empty chain.
    last_position: int | None = None
    erased: list[int] = dc_field(default_factory=list)
    broken_at: int | None = None
    reason: str = ""

    def fail(self, position: int, reason: str) -> Verdict:
        self.ok, self.broken_at, self.reason = False, position, reason
        return self


def _bytes(value) -> bytes | None:
    if value is None:
        return None
    if isinstance(value, str):
        return bytes.fromhex(value)
    return bytes(value)


def verify_rows(rows, *, record_type: str = "message", genesis: bytes = GENESIS,
                first_position: int | None = 0, expected_rows: int | None = None) -> Verdict:
    """Walk one chain and return its Verdict; stops at the first break.

    `rows` yields (position, record_type, salt, commitment, chain_hash, payload)
    records in chain order. Hashes and salts are bytes (or hex strings); `salt` and
    `payload` are None for an erased row, which is then checked by its link only.
    With `first_position` (messages: 0), positions must run first_position,
    first_position+1, … with no gap; otherwise they must only increase (row ids).
    With `expected_rows` (messages: the conversation's next position), fewer rows
    means the tail was cut.
    """
    verdict = Verdict()
    prev = genesis
    expected = first_position
    sha = _SHA  # commitment() and link(), inlined: this loop runs once per row
    for position, kind, salt, stored_commitment, stored_chain, body in rows:
        if kind != record_type:
            return verdict.fail(position, f"#{position} is a {kind} row in the {record_type} chain")
        if expected is not None and position != expected:
            if position > expected:
                return verdict.fail(expected, f"row #{expected} is missing")
            return verdict.fail(position, f"row #{position} is out of order (expected #{expected})")
        if expected is None and verdict.last_position is not None and position <= verdict.last_position:
            return verdict.fail(position, f"row #{position} is out of order (after #{verdict.last_position})")
        if type(stored_commitment) is not bytes or type(stored_chain) is not bytes:
            stored_commitment, stored_chain = _bytes(stored_commitment), _bytes(stored_chain)
        if salt is not None and type(salt) is not bytes:
            salt = _bytes(salt)
        if stored_commitment is None or stored_chain is None:
            return verdict.fail(position, f"row #{position} has no commitment or chain hash")
        if salt is None or body is None:
            verdict.erased.append(position)
        elif sha(salt + body).digest() != stored_commitment:
            return verdict.fail(position, f"row #{position} was changed: its content does not match its commitment")
        if sha(prev + stored_commitment).digest() != stored_chain:
            return verdict.fail(position, f"the chain breaks at #{position}: its chain hash does not follow "
                                          "from the row before it")
        prev = stored_chain
        verdict.rows += 1
        verdict.head = prev
        verdict.last_position = position
        if expected is not None:
            expected += 1
    if expected_rows is not None and verdict.rows < expected_rows and expected is not None:
        return verdict.fail(expected, f"rows from #{expected} on are missing "
                                      f"({expected_rows - verdict.rows} of {expected_rows} rows)")
    return verdict
