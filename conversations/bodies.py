"""Request bodies that may be large: read once, a block at a time, never held whole.

Every API body is one JSON object of a few messages, held in memory and limited to
DATA_UPLOAD_MAX_MEMORY_SIZE (about two messages' worth). A transcript is not: a Claude
Code main session measures megabytes, an archive hundreds of them. So for the paths in
STREAMED_PATHS (`POST /api/v1/imports`) the limit is MEMORYUI_MAX_IMPORT_BYTES (default
256 MiB), and the body is read here into a spooled file (in memory up to
SPOOL_IN_MEMORY bytes, past it in an unnamed temporary file, gone when closed), once:
the idempotency fingerprint and the import handler both read that file, so a body of
any size costs the same memory.

An answer refusing a body over the limit (413) says how much is taken and the ways in
that take more: `manage.py import` (no limit) and the import page (a zip of a folder).
"""

import tempfile
from dataclasses import dataclass

from django.conf import settings

from .errors import BodyTooLarge

STREAMED_PATHS = frozenset({"/api/v1/imports"})
BLOCK = 64 * 1024
SPOOL_IN_MEMORY = 1024 * 1024


def streamed(request) -> bool:
    return request.method == "POST" and request.path in STREAMED_PATHS


def limit_of(request) -> int:
    """The most bytes a body of this request may hold."""
    return settings.MEMORYUI_MAX_IMPORT_BYTES if streamed(request) else settings.DATA_UPLOAD_MAX_MEMORY_SIZE


def too_large_message(request) -> str:
    limit = limit_of(request)
    if not streamed(request):
        return f"the request body is larger than this server accepts ({limit} bytes)"
    return (f"the request body is larger than this server accepts for an import ({limit:,} bytes, "
            f"MEMORYUI_MAX_IMPORT_BYTES); import larger files with `manage.py import` on the server (no limit), or "
            f"on the import page (/admin/import/, up to {settings.MEMORYUI_MAX_UPLOAD_BYTES:,} bytes, a zip of a "
            "folder too)")


@dataclass
class Spooled:
    file: object  # a binary file at its start
    size: int

    def blocks(self):
        self.file.seek(0)
        while block := self.file.read(BLOCK):
            yield block
        self.file.seek(0)


def spool(request) -> Spooled:
    """The body of a streamed request, read once into a spooled file (BodyTooLarge past the limit)."""
    found = getattr(request, "_memoryui_spooled", None)
    if found is not None:
        return found
    limit = limit_of(request)
    body = tempfile.SpooledTemporaryFile(max_size=SPOOL_IN_MEMORY)
    size = 0
    try:
        while True:
            block = request.read(min(BLOCK, limit + 1 - size))
            if not block:
                break
            body.write(block)
            size += len(block)
            if size > limit:
                raise BodyTooLarge(too_large_message(request), field="body")
    except BaseException:
        body.close()
        raise
    body.seek(0)
    request._memoryui_spooled = Spooled(body, size)
    request._memoryui_close = body.close
    return request._memoryui_spooled


def close(request) -> None:
    """Give back the spooled body's memory or disk (the response is made)."""
    closing = getattr(request, "_memoryui_close", None)
    if closing is not None:
        closing()
        request._memoryui_close = None


def digest_of(request, digest) -> None:
    """Feed the body to `digest`: a streamed request's from its spool, any other's as Django holds it."""
    if streamed(request):
        for block in spool(request).blocks():
            digest.update(block)
    else:
        digest.update(request.body)
