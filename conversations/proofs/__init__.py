"""Proof of the record: the server's Ed25519 signing keys, signed heads of the
conversations' chains, and the subject access export (a ZIP that `memoryui-verify`
checks offline)."""
