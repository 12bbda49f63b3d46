"""Files outside the database that may hold personal data for a while.

An import page preview keeps the uploaded transcript on disk until it is confirmed
(conversations/imports/uploads.py). Such a file is no row, so neither the deletion
of its conversations nor the search of the database files would reach it: an app
that keeps files like that registers them here from its AppConfig.ready():

    from conversations.retention.leftovers import Leftovers, register
    register(Leftovers(name="uploads", files=..., about=..., remove=..., remove_expired=...))

A prune calls `remove_expired` and reports how many went. A deletion request asks
`about` for the files its own records tie to the subject or to the conversations
being deleted, searches the bytes of all `files` for the texts it deletes, removes
every file that matches either way, searches what is left again, and lists the
removed files on the receipt (erasure.py).
"""

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Leftovers:
    # Shown on receipts and prune notes ("uploads/<file>").
    name: str
    # Every file that may hold personal data now.
    files: Callable[[], list[Path]]
    # about(subject=..., conversation_ids=...): the files known, by their own records, to be about either.
    about: Callable[..., list[Path]]
    # remove(path): removes the file and whatever goes with it; returns the bytes it held.
    remove: Callable[[Path], int]
    # remove_expired(): removes the files past their lifetime; returns how many.
    remove_expired: Callable[[], int]


_REGISTRY: dict[str, Leftovers] = {}


def register(leftovers: Leftovers) -> None:
    _REGISTRY[leftovers.name] = leftovers


def registered() -> list[Leftovers]:
    return list(_REGISTRY.values())
