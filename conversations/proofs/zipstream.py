"""A ZIP written as it is sent: entries are compressed and yielded piece by piece.

`zipfile` writes to a stream it cannot seek in by putting each entry's sizes and CRC
in a data descriptor after the entry, so nothing but the current compressor's window
and the central directory (one small record per entry) is held in memory.
"""

import hashlib
import zipfile
from collections.abc import Iterable, Iterator
from datetime import datetime

LEVEL = 1
BLOCK = 64 * 1024


class _Sink:
    """What zipfile writes to: collected until the generator hands it on."""

    def __init__(self):
        self._parts: list[bytes] = []

    def write(self, data) -> int:
        self._parts.append(bytes(data))
        return len(data)

    def flush(self) -> None:
        pass

    def drain(self) -> bytes:
        out = b"".join(self._parts)
        self._parts.clear()
        return out


class ZipStream:
    """Add entries with `entry(name, chunks)` (a generator of ZIP bytes); `close()` ends the file.

    Every entry's SHA-256 and size are kept in `files`, in the order written."""

    def __init__(self, when: datetime):
        self._sink = _Sink()
        # Level 1: deflate's fastest; at 6 compressing took a third of a large export's time.
        self._zip = zipfile.ZipFile(self._sink, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=LEVEL)
        self._date_time = (when.year, when.month, when.day, when.hour, when.minute, when.second)
        self.files: list[dict] = []

    def entry(self, name: str, chunks: Iterable[str | bytes]) -> Iterator[bytes]:
        info = zipfile.ZipInfo(name, date_time=self._date_time)
        info.compress_type = zipfile.ZIP_DEFLATED
        info._compresslevel = LEVEL
        info.external_attr = 0o600 << 16
        digest, size = hashlib.sha256(), 0
        with self._zip.open(info, "w", force_zip64=True) as out:
            # Rows come one by one; they are hashed and compressed in blocks of ~64 KiB.
            block, held = [], 0
            for chunk in chunks:
                data = chunk.encode("utf-8") if isinstance(chunk, str) else chunk
                block.append(data)
                held += len(data)
                if held < BLOCK:
                    continue
                size += self._write(out, digest, b"".join(block))
                block, held = [], 0
                pending = self._sink.drain()
                if pending:
                    yield pending
            size += self._write(out, digest, b"".join(block))
        self.files.append({"path": name, "sha256": digest.hexdigest(), "bytes": size})
        pending = self._sink.drain()
        if pending:
            yield pending

    @staticmethod
    def _write(out, digest, data: bytes) -> int:
        if data:
            digest.update(data)
            out.write(data)
        return len(data)

    def close(self) -> Iterator[bytes]:
        self._zip.close()
        yield self._sink.drain()
