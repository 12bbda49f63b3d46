"""Streamed downloads: many small strings sent as fewer, larger chunks."""

from collections.abc import Iterator

# Chunks are flushed at about this size: small enough to stream, large enough
# that a million rows are not a million writes to the socket.
FLUSH_CHARS = 64 * 1024


def buffered(parts: Iterator[str]) -> Iterator[str]:
    buf, size = [], 0
    for part in parts:
        buf.append(part)
        size += len(part)
        if size >= FLUSH_CHARS:
            yield "".join(buf)
            buf, size = [], 0
    if buf:
        yield "".join(buf)
