"""Checking an export file offline: what `memoryui-verify` runs.

Each problem is named with the file and the row (`#N`) it was found at. The rows are read
as they come (a JSONL file or a ZIP member line by line), so a conversation of a million
messages is checked in constant memory.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import zipfile
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from . import chain
from .encoding import head_message, manifest_message


@dataclass
class Conversation:
    """One conversation's verdict."""

    file: str
    conversation_id: str = ""
    messages: int = 0
    checkpoints: int = 0
    erased: list[int] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    head: dict | None = None
    # An erased conversation: the deletion request (receipt id) that erased it.
    erased_by: str = ""
    ledger: int = 0

    @property
    def ok(self) -> bool:
        return not self.problems


@dataclass
class Report:
    path: str
    kind: str = ""  # "json", "jsonl" or "bundle"
    conversations: list[Conversation] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    keys_used: set[str] = field(default_factory=set)
    files_checked: int = 0

    @property
    def ok(self) -> bool:
        return not self.problems and all(c.ok for c in self.conversations)

    def as_dict(self) -> dict:
        return {
            "path": self.path, "kind": self.kind, "ok": self.ok, "problems": self.problems,
            "warnings": self.warnings, "keys_used": sorted(self.keys_used), "files_checked": self.files_checked,
            "conversations": [
                {"file": c.file, "conversation_id": c.conversation_id, "ok": c.ok, "messages": c.messages,
                 "checkpoints": c.checkpoints, "ledger_entries": c.ledger, "erased_positions": c.erased,
                 "erased_by": c.erased_by or None, "problems": c.problems,
                 "head": {k: c.head.get(k) for k in ("position", "chain_hash", "signed_at", "key_id")}
                 if c.head else None}
                for c in self.conversations
            ],
        }


class Keys:
    """The public keys a signature may be checked with: pinned by the user (`--key`), or
    taken from the file itself (which proves only that the file is self-consistent)."""

    def __init__(self, pinned: list[str] | None = None):
        self.pinned = {key_id(p): p for p in (pinned or [])}
        self.found: dict[str, str] = {}

    def learn(self, public_b64: str | None, claimed_id: str | None, report: Report, where: str) -> None:
        if not public_b64:
            return
        try:
            real = key_id(public_b64)
        except ValueError:
            report.problems.append(f"{where}: the public key is not 32 bytes of base64")
            return
        if claimed_id and real != claimed_id:
            report.problems.append(f"{where}: key id {claimed_id} does not belong to the public key beside it")
            return
        self.found.setdefault(real, public_b64)

    def check(self, key: str, message: bytes, signature: str, report: Report) -> str:
        """'' when the signature is good, else what is wrong."""
        public = self.pinned.get(key) if self.pinned else self.found.get(key)
        if public is None:
            return (f"signed with key {key}, which is not a key you trust (--key)" if self.pinned
                    else f"signed with key {key}, whose public key is not in the file")
        if not ed25519_verify(public, message, signature):
            return f"the signature does not verify with key {key}"
        report.keys_used.add(key)
        return ""


def key_id(public_b64: str) -> str:
    raw = base64.b64decode(public_b64, validate=True)
    if len(raw) != 32:
        raise ValueError("an Ed25519 public key is 32 bytes")
    return hashlib.sha256(raw).hexdigest()[:16]


def ed25519_verify(public_b64: str, message: bytes, signature_b64: str) -> bool:
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    try:
        public = Ed25519PublicKey.from_public_bytes(base64.b64decode(public_b64, validate=True))
        public.verify(base64.b64decode(signature_b64, validate=True), message)
    except (InvalidSignature, ValueError, TypeError):
        return False
    return True


def _canonical_time(text: str) -> str:
    value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    if value.tzinfo is None:
        value = value.replace(tzinfo=timezone.utc)  # noqa: UP017 (the client runs on Python 3.10)
    return chain.canonical_time(value)


# -- one conversation -----------------------------------------------------------------------------


class _Walk:
    """Feeds one conversation's rows, as they come, into the chain walk and keeps the rest."""

    def __init__(self, result: Conversation):
        self.result = result
        self.checkpoints: list[dict] = []
        self.ledger: list[dict] = []
        self.head: dict | None = None
        self._seen = bytearray()  # one bit per position met, to tell a reordered row from a missing one

    def seen(self, position: int) -> bool:
        return 0 <= position < len(self._seen) * 8 and bool(self._seen[position >> 3] & (1 << (position & 7)))

    def _mark(self, position) -> None:
        if isinstance(position, int) and 0 <= position < 1 << 40:
            if position >> 3 >= len(self._seen):
                self._seen.extend(bytes((position >> 3) + 1 - len(self._seen)))
            self._seen[position >> 3] |= 1 << (position & 7)

    def message_records(self, rows):
        for row in rows:
            record = row.get("record")
            if record == "checkpoint":
                self.checkpoints.append(row)
                continue
            if record == "signed_head":
                self.head = row
                continue
            if record is not None:
                self.ledger.append(row)  # task state versions, actions, workspace snapshots
                continue
            yield self._message_record(row)

    def _message_record(self, row: dict):
        position = row.get("position")
        self._mark(position)
        stored = row.get("stored")
        body = None
        if stored is not None and row.get("salt"):
            body = chain.message_payload(position, row.get("kind", ""), stored, _canonical_time(row["created_at"]))
            if row.get("message") is not None and json.loads(stored) != row["message"]:
                self.result.problems.append(f"row #{position} was changed: its message is not its stored text")
        return position, "message", row.get("salt"), row.get("commitment"), row.get("chain_hash"), body


def _check_conversation(rows, result: Conversation, keys: Keys, report: Report) -> None:
    walk = _Walk(result)
    records = walk.message_records(rows)
    try:
        verdict = chain.verify_rows(records)
        for _ in records:  # past a break: read on for the checkpoints and the head
            pass
    except (KeyError, TypeError, ValueError) as exc:
        result.problems.append(f"a row is not in the export's shape ({exc.__class__.__name__}: {exc})")
        return
    head = walk.head
    result.messages, result.erased, result.head = verdict.rows, verdict.erased, head
    if not verdict.ok:
        reason = verdict.reason
        if reason == f"row #{verdict.broken_at} is missing" and walk.seen(verdict.broken_at):
            reason = f"row #{verdict.broken_at} is out of order (it comes later in the file)"
        result.problems.append(reason)
    if head is None:
        result.problems.append("no signed head: the file cannot be tied to the server's record")
        return
    result.conversation_id = str(head.get("conversation_id", ""))
    keys.learn(head.get("public_key"), head.get("key_id"), report, result.file)
    bad = keys.check(head.get("key_id", ""), head_message(head), head.get("signature", ""), report)
    if bad:
        result.problems.append(f"signed head: {bad}")
    if verdict.ok:
        _compare_head(verdict, head, result)
    _check_checkpoints(walk.checkpoints, head, result)
    _check_ledger(walk.ledger, head, result)


def _compare_head(verdict: chain.Verdict, head: dict, result: Conversation) -> None:
    position = head.get("position")
    last = verdict.last_position if verdict.last_position is not None else -1
    if last < position:
        result.problems.append(f"rows from #{last + 1} on are missing (the signed head covers #0–#{position})")
    elif last > position:
        result.problems.append(f"rows #{position + 1}–#{last} are not covered by the signed head")
    elif verdict.head.hex() != head.get("chain_hash"):
        result.problems.append(f"the chain at #{position} is not the one the server signed")


def _check_checkpoints(rows: list[dict], head: dict, result: Conversation) -> None:
    records = []
    for row in sorted(rows, key=lambda r: r.get("id", 0)):
        body = None
        if row.get("salt") and row.get("summary") is not None:
            body = chain.payload("checkpoint", [row["message_position"], row["summary"],
                                                _canonical_time(row["created_at"]), row.get("created_by", "")])
        records.append((row.get("id"), "checkpoint", row.get("salt"), row.get("commitment"), row.get("chain_hash"),
                        body))
    signed = int(head.get("checkpoints") or 0)
    verdict = chain.verify_rows(records[:signed], record_type="checkpoint", first_position=None)
    result.checkpoints = verdict.rows
    if not verdict.ok:
        result.problems.append(f"checkpoint {verdict.reason}")
    elif len(records) < signed:
        result.problems.append(f"{signed - len(records)} of the {signed} signed checkpoints are missing")
    elif verdict.head.hex() != head.get("checkpoint_chain_hash", chain.GENESIS.hex()):
        result.problems.append("the checkpoints are not the ones the server signed (changed, dropped or reordered)")


# What a ledger line shows beside its chain fields, and which chain field it must equal
# (parsed as JSON where the stored field is JSON text).
_SHOWN = {"version": "version", "position": "position", "actor": "actor", "name": "name", "status": "status",
          "idempotency_key": "idempotency_key", "namespace": "namespace", "repo": "repo", "ref": "ref",
          "commit": "commit_sha", "files_changed": "files_changed", "insertions": "insertions",
          "deletions": "deletions"}
_SHOWN_JSON = ("state", "changes", "arguments", "result")
LEDGER_TYPES = ("state", "action", "snapshot")


def _shown_matches(row: dict, fields: dict) -> bool:
    for shown, name in _SHOWN.items():
        if shown in row and name in fields and chain.field_text(row[shown]) != fields[name]:
            return False
    for name in _SHOWN_JSON:
        if name in row and name in fields and fields[name] is not None and json.loads(fields[name]) != row[name]:
            return False
    return True


def _check_ledger(rows: list[dict], head: dict, result: Conversation) -> None:
    signed = head.get("ledger_chains") or {}
    by_type: dict[str, list] = {t: [] for t in LEDGER_TYPES}
    for row in rows:
        entry = row.get("chain") or {}
        chain_type = entry.get("type")
        if chain_type not in by_type:
            result.problems.append(f"a {row.get('record')} line carries no chain values")
            continue
        fields = entry.get("fields") or {}
        body = None
        if entry.get("salt"):
            body = chain.payload(chain_type, [fields.get(n) for n in chain.FIELDS[chain_type]])
            if not _shown_matches(row, fields):
                result.problems.append(f"{chain_type} entry {entry.get('id')} was changed: what it shows is not "
                                       "what its chain fields hold")
        by_type[chain_type].append((entry.get("id"), chain_type, entry.get("salt"), entry.get("commitment"),
                                    entry.get("chain_hash"), body))
    for chain_type, records in by_type.items():
        expected = signed.get(chain_type) or {"rows": 0, "chain_hash": chain.GENESIS.hex()}
        records.sort(key=lambda r: r[0] or 0)
        verdict = chain.verify_rows(records[:expected["rows"]], record_type=chain_type, first_position=None)
        if not verdict.ok:
            result.problems.append(f"{chain_type} chain: {verdict.reason}")
        elif len(records) < expected["rows"]:
            result.problems.append(f"{expected['rows'] - len(records)} of the {expected['rows']} signed {chain_type} "
                                   "entries are missing")
        elif verdict.head.hex() != expected["chain_hash"]:
            result.problems.append(f"the {chain_type} entries are not the ones the server signed "
                                   "(changed, dropped or reordered)")


# -- files ----------------------------------------------------------------------------------------------------


def _jsonl_rows(lines, where: str, result: Conversation):
    for number, line in enumerate(lines, 1):
        if isinstance(line, bytes):
            line = line.decode("utf-8")
        if not line.strip():
            continue
        try:
            yield json.loads(line)
        except ValueError:
            result.problems.append(f"{where} line {number} is not JSON")


def verify_json(data: dict, name: str, keys: Keys, report: Report) -> Conversation:
    result = Conversation(file=name)
    rows = [*data.get("messages", []), *({"record": "checkpoint", **c} for c in data.get("checkpoints", []))]
    for key, record in (("task_state_events", "task_state_event"), ("actions", "action"),
                        ("workspace_snapshots", "workspace_snapshot")):
        rows += [{"record": record, **row} for row in data.get(key, [])]
    if data.get("signed_head"):
        rows.append({"record": "signed_head", **data["signed_head"]})
    _check_conversation(iter(rows), result, keys, report)
    report.conversations.append(result)
    return result


def verify_jsonl(lines, name: str, keys: Keys, report: Report) -> Conversation:
    result = Conversation(file=name)
    _check_conversation(_jsonl_rows(lines, name, result), result, keys, report)
    report.conversations.append(result)
    return result


def _bundle_names(zf: zipfile.ZipFile) -> tuple[str, set[str]]:
    """The bundle's root inside the zip ("", or the one folder it was unpacked into and zipped
    again from) and its file names under it. A folder's own entry ("conversations/"), which zip
    tools add when they pack a folder, is no file of the export and is left out."""
    files = {n for n in zf.namelist() if not n.endswith("/")}
    if "manifest.json" in files:
        return "", files
    roots = {n[: -len("manifest.json")] for n in files if n.endswith("/manifest.json") and n.count("/") == 1}
    if len(roots) == 1:
        root = roots.pop()
        if all(n.startswith(root) for n in files):
            return root, {n[len(root):] for n in files}
    return "", files


def verify_bundle(zf: zipfile.ZipFile, keys: Keys, report: Report) -> None:
    root, names = _bundle_names(zf)
    if "manifest.json" not in names or "manifest.sig.json" not in names:
        report.problems.append("not a memoryui subject export: manifest.json or manifest.sig.json is missing")
        return
    manifest_bytes = zf.read(root + "manifest.json")
    manifest = json.loads(manifest_bytes)
    signature = json.loads(zf.read(root + "manifest.sig.json"))
    for k in manifest.get("keys", []):
        keys.learn(k.get("public_key"), k.get("key_id"), report, "manifest.json")
    keys.learn(signature.get("public_key"), signature.get("key_id"), report, "manifest.sig.json")
    bad = keys.check(signature.get("key_id", ""), manifest_message(manifest_bytes), signature.get("signature", ""),
                     report)
    if bad:
        report.problems.append(f"manifest: {bad}")
    listed = {f["path"]: f for f in manifest.get("files", [])}
    for extra in sorted(names - set(listed) - {"manifest.json", "manifest.sig.json"}):
        report.problems.append(f"{extra} is not in the manifest (added after the export)")
    for path, entry in listed.items():
        if path not in names:
            report.problems.append(f"{path} is in the manifest but not in the file (removed)")
            continue
        digest, size = hashlib.sha256(), 0
        with zf.open(root + path) as member:
            for block in iter(lambda: member.read(1 << 16), b""):
                digest.update(block)
                size += len(block)
        report.files_checked += 1
        if digest.hexdigest() != entry.get("sha256") or size != entry.get("bytes"):
            report.problems.append(f"{path} was changed: its SHA-256 is not the one in the signed manifest")
    heads = {h.get("conversation_id"): h for h in manifest.get("heads", [])}
    for path in sorted(p for p in listed if p.startswith("conversations/") and p.endswith(".jsonl")):
        if path not in names:
            continue
        with zf.open(root + path) as member:
            result = verify_jsonl(io.TextIOWrapper(member, encoding="utf-8"), path, keys, report)
        expected = heads.pop(result.conversation_id, None)
        if expected is None:
            result.problems.append("its signed head is not in the manifest")
        elif result.head and expected.get("signature") != result.head.get("signature"):
            result.problems.append("its signed head is not the one in the manifest")
    for cid in heads:
        report.problems.append(f"conversation {cid} is in the manifest but its file is missing")
    if "erased_rows.jsonl" in listed and "erased_rows.jsonl" in names:
        with zf.open(root + "erased_rows.jsonl") as member:
            verify_erased(io.TextIOWrapper(member, encoding="utf-8"), keys, report)


def verify_erased(lines, keys: Keys, report: Report) -> None:
    """Each erased conversation of the bundle (what deletion requests kept: commitments and chain
    hashes, no content): its chains must still link up, and end where its last signed head says."""
    current: Conversation | None = None
    chains: dict[str, list[bytes]] = {}
    for row in _jsonl_rows(lines, "erased_rows.jsonl", Conversation(file="erased_rows.jsonl")):
        key = (row.get("receipt_id"), row.get("conversation_id"))
        if current is None or (current.erased_by, current.conversation_id) != key:
            current = Conversation(file="erased_rows.jsonl", conversation_id=key[1], erased_by=key[0])
            chains = {}
            report.conversations.append(current)
        if row.get("record_type") == "signed_head":
            _check_erased_head(row, chains, current, keys, report)
            continue
        _walk_erased(row, chains, current)


def _walk_erased(row: dict, chains: dict[str, list[str]], result: Conversation) -> None:
    """Checks one erased row's link to the row before it in its chain, as the rows come."""
    record_type, position = row.get("record_type"), row.get("position")
    hashes = chains.setdefault(record_type, [])
    prev = bytes.fromhex(hashes[-1]) if hashes else chain.GENESIS
    index = len(hashes)
    try:
        commitment, chain_hash = bytes.fromhex(row["commitment"]), bytes.fromhex(row["chain_hash"])
    except (KeyError, TypeError, ValueError):
        result.problems.append(f"erased {record_type} #{position} has no commitment or chain hash")
        hashes.append("")
        return
    if not result.problems:
        if record_type == "message" and position != index:
            result.problems.append(f"erased row #{index} is missing")
        elif chain.link(prev, commitment) != chain_hash:
            result.problems.append(f"the erased {record_type} chain breaks at #{position}")
    hashes.append(row["chain_hash"])
    if record_type == "message":
        result.messages += 1
    elif record_type == "checkpoint":
        result.checkpoints += 1
    else:
        result.ledger += 1


def _check_erased_head(head: dict, chains: dict, result: Conversation, keys: Keys, report: Report) -> None:
    bad = keys.check(head.get("key_id", ""), head_message(head), head.get("signature", ""), report)
    if bad:
        result.problems.append(f"signed head: {bad}")
        return
    result.head = head
    expected = [("message", head.get("position", -1) + 1, head.get("chain_hash")),
                ("checkpoint", head.get("checkpoints", 0), head.get("checkpoint_chain_hash"))]
    expected += [(t, c.get("rows", 0), c.get("chain_hash")) for t, c in (head.get("ledger_chains") or {}).items()]
    for record_type, count, chain_hash in expected:
        rows = chains.get(record_type, [])
        if count == 0:
            continue
        if len(rows) < count:
            result.problems.append(f"the erased {record_type} chain has {len(rows)} rows; the head signed before "
                                   f"the erasure covers {count}")
        elif rows[count - 1] != chain_hash:
            result.problems.append(f"the erased {record_type} chain is not the one the server signed")


def verify_path(path: str | Path, *, pinned_keys: list[str] | None = None) -> Report:
    path = Path(path)
    report = Report(path=str(path))
    keys = Keys(pinned_keys)
    if zipfile.is_zipfile(path):
        report.kind = "bundle"
        with zipfile.ZipFile(path) as zf:
            verify_bundle(zf, keys, report)
    else:
        with open(path, "rb") as f:
            first_line = f.readline()
        try:  # a JSONL export is a JSON object on every line; a JSON export's first line is not whole
            json.loads(first_line)
            whole = None
        except ValueError:
            try:
                whole = json.loads(path.read_bytes())
            except ValueError:
                report.problems.append("the file is neither a memoryui JSON, JSONL nor ZIP export")
                return report
        if isinstance(whole, dict):
            report.kind = "json"
            verify_json(whole, path.name, keys, report)
        else:
            report.kind = "jsonl"
            with open(path, encoding="utf-8") as f:
                verify_jsonl(f, path.name, keys, report)
    if not pinned_keys and report.keys_used:
        report.warnings.append(
            "signatures checked with the public key carried in the file: this shows the file is whole, not that "
            "the server you trust signed it. Pass --key with the public key from the server's Signing keys page.")
    return report
