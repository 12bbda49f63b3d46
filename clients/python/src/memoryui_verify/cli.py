"""memoryui-verify FILE [FILE …] [--key PUBLIC_KEY] [--json]

Exit status: 0 every file verified, 1 a problem was found, 2 the command could not run.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

NEEDS_CRYPTOGRAPHY = ("memoryui-verify needs the 'cryptography' package: pip install cryptography "
                      "(or install the client as './clients/python[verify]')")


def _keys(values: list[str]) -> list[str]:
    """--key takes a base64 public key, or a file holding one, or the server's /signing-keys JSON."""
    out = []
    for value in values:
        path = Path(value)
        text = path.read_text().strip() if path.is_file() else value.strip()
        if text.startswith("{"):
            out += [k["public_key"] for k in json.loads(text).get("keys", [])]
        else:
            out.append(text)
    return out


def _describe(report) -> str:
    lines = [f"{report.path}: {'VERIFIED' if report.ok else 'FAILED'} ({report.kind})"]
    if report.files_checked:
        lines.append(f"  {report.files_checked} files checked against the signed manifest")
    for problem in report.problems:
        lines.append(f"  PROBLEM: {problem}")
    for c in report.conversations:
        head = c.head or {}
        if c.erased_by:
            state = "chain verified without their content" if c.ok else "FAILED"
            signed = f"; ends where head #{head.get('position')} signed {head.get('signed_at')} said" if head else ""
            lines.append(f"  conversation {c.conversation_id}: erased by deletion request {c.erased_by}: "
                         f"{c.messages} messages, {c.checkpoints} checkpoints, {c.ledger} ledger entries; "
                         f"{state}{signed if c.ok else ''}")
            lines += [f"    PROBLEM: {p}" for p in c.problems]
            continue
        state = "verified" if c.ok else "FAILED"
        erased = f", {len(c.erased)} erased rows" if c.erased else ""
        lines.append(f"  {c.file}: {state}: {c.messages} messages, {c.checkpoints} checkpoints{erased}; "
                     f"head #{head.get('position')} signed {head.get('signed_at')} by key {head.get('key_id')}")
        lines += [f"    PROBLEM: {p}" for p in c.problems]
    if report.keys_used:
        lines.append(f"  signatures checked with key{'s' if len(report.keys_used) > 1 else ''} "
                     f"{', '.join(sorted(report.keys_used))}")
    lines += [f"  note: {w}" for w in report.warnings]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="memoryui-verify",
        description="Check a memoryui export (JSON, JSONL) or subject access export (ZIP) offline: rows against "
                    "their commitments and hash chains, chains against the signed heads, signatures, manifest.")
    parser.add_argument("files", nargs="+", help="export files to check")
    parser.add_argument("--key", action="append", default=[],
                        help="a public key you trust (base64, a file holding it, or the server's /api/v1/signing-keys "
                             "JSON); repeat for several. Without it, the key carried in the file is used.")
    parser.add_argument("--json", action="store_true", help="print one JSON report per file")
    args = parser.parse_args(argv)
    try:
        from .verify import verify_path

        pinned = _keys(args.key)
    except ImportError as exc:
        print(f"{NEEDS_CRYPTOGRAPHY} ({exc})", file=sys.stderr)
        return 2
    except (OSError, ValueError, KeyError) as exc:
        print(f"memoryui-verify: --key: {exc}", file=sys.stderr)
        return 2
    ok = True
    for name in args.files:
        if not Path(name).is_file():
            print(f"memoryui-verify: {name}: no such file", file=sys.stderr)
            return 2
        try:
            report = verify_path(name, pinned_keys=pinned)
        except ImportError as exc:
            print(f"{NEEDS_CRYPTOGRAPHY} ({exc})", file=sys.stderr)
            return 2
        ok = ok and report.ok
        print(json.dumps(report.as_dict()) if args.json else _describe(report))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
