"""Subjects (whom a conversation or a fact is about) as erasure compares them.

People type a subject the way it comes to them: `Cust:42`, `cust:42`, or with an
accent composed differently by another keyboard. A deletion request must find
all of them, so the store keeps beside every subject its normal form (Unicode NFC
after case folding) and erasure matches on that; pages show the subject as stored.
"""

import unicodedata


def normalize_subject(subject: str) -> str:
    """NFC, case-folded, NFC again (folding can decompose: 'ǰ' → 'ǰ')."""
    if not subject:
        return ""
    folded = unicodedata.normalize("NFC", subject.strip()).casefold()
    return unicodedata.normalize("NFC", folded)
