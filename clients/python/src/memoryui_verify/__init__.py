"""memoryui-verify: check a memoryui export offline (no Django, no server, no httpx).

A conversation export (JSON or JSONL) or a subject access export (ZIP): the rows against
their commitments and hash chains, the chains against the server's signed heads, the
heads and the manifest against the server's Ed25519 key, and every file of a ZIP against
the SHA-256 its signed manifest names. `chain.py` and `encoding.py` are exact copies of
the server's conversations/chain.py and conversations/proofs/encoding.py (a test in the
server's suite checks they are identical).
"""

from .verify import Report, verify_path

__all__ = ["Report", "verify_path"]
