"""A transcript's text, read line by line without holding it.

A 100 MB session file read into one `str` costs 100 MB (more with non-ASCII text)
on top of its bytes; the importer instead reads a file a block at a time (or takes
the bytes or text it was given) and decodes one line at a time, keeping only where
each line starts and ends, and reads a line again by its offsets when it needs it. The lines are exactly those of
`conversations.formats.base.split_lines`, the length is counted in characters and
the hash is SHA-256 of the UTF-8 text, as the rest of the importer counts them.
"""

import hashlib
import os
from array import array

from conversations.formats.base import FormatError, decode_text

HEAD = 1024 * 1024
SMALL_FILE = 1024 * 1024
BLOCK = 1024 * 1024


class Text:
    def __init__(self, data):
        if isinstance(data, (bytearray, memoryview)):
            data = bytes(data)
        self.data = data
        self.is_str = isinstance(data, str)
        self._file = None
        self._size = 0
        self._borrowed = False
        self.chars: int | None = None
        self.sha256: str | None = None
        self.prefix_sha256: str | None = None
        self.starts = array("q")
        self.lengths = array("i")

    @classmethod
    def open(cls, path: str) -> "Text":
        """A file: small ones are read whole, larger ones a block at a time when needed."""
        f = open(path, "rb")
        try:
            size = f.seek(0, 2)
            f.seek(0)
            if size < SMALL_FILE:
                return cls(f.read())
            text = cls(b"")
            text._file, text._size = f, size
            f = None
            return text
        finally:
            if f is not None:
                f.close()

    @classmethod
    def of_file(cls, f, size: int) -> "Text":
        """An open binary file (a spooled request body): small ones read whole, larger ones a block
        at a time through its descriptor. Closing the Text does not close the file."""
        f.seek(0)
        if size < SMALL_FILE:
            return cls(f.read())
        text = cls(b"")
        text._file, text._size, text._borrowed = f, size, True
        return text

    def close(self) -> None:
        if self._file is not None:
            if not self._borrowed:
                self._file.close()
            self._file = None

    def __len__(self) -> int:
        return self._size if self._file is not None else len(self.data)

    def _read(self, start: int, end: int) -> bytes:
        if self._file is None:
            return self.data[start:end]
        return os.pread(self._file.fileno(), end - start, start)

    def whole(self) -> str:
        """All of it, decoded (for the formats that parse a whole document)."""
        return decode_text(self.data if self.is_str else self._read(0, len(self)))

    def head(self) -> str:
        """Enough of the beginning to tell the format: up to HEAD bytes, cut at a line end."""
        if len(self) <= HEAD:
            return self.whole()
        piece = self.data[:HEAD] if self.is_str else self._read(0, HEAD)
        cut = piece.rfind("\n" if self.is_str else b"\n")
        if cut <= 0:
            return self.whole()  # one long line: a JSON document
        piece = piece[:cut]
        return piece if self.is_str else self._decode(piece, 0)

    def _decode(self, piece: bytes, offset: int) -> str:
        try:
            return piece.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise FormatError(f"the file is not UTF-8 text (byte {offset + exc.start} cannot be decoded)",
                              field="file") from None

    def line(self, index: int) -> str:
        """The text of the index-th non-blank line that `lines()` yielded."""
        start = self.starts[index]
        end = start + self.lengths[index]
        piece = self.data[start:end] if self.is_str else self._read(start, end)
        text = piece if self.is_str else self._decode(piece, start)
        return text.rstrip("\r")

    def _segments(self):
        """(start, stop, piece, last) for each piece between newlines."""
        data = self.data
        if self._file is None:
            nl = "\n" if self.is_str else b"\n"
            start, length = 0, len(data)
            while start < length:
                end = data.find(nl, start)
                if end == -1:
                    yield start, length, data[start:], True
                    return
                yield start, end, data[start:end], False
                start = end + 1
            return
        offset, rest, size = 0, b"", self._size  # offset: where `rest` starts in the file
        while True:
            block = self._read(offset + len(rest), min(offset + len(rest) + BLOCK, size))
            if not block:
                if rest:
                    yield offset, offset + len(rest), rest, True
                return
            buf = rest + block
            pos = 0
            while True:
                end = buf.find(b"\n", pos)
                if end == -1:
                    break
                yield offset + pos, offset + end, buf[pos:end], False
                pos = end + 1
            offset += pos
            rest = buf[pos:]

    def lines(self, *, prefix_chars: int = 0):
        """(line number, text, is_last) of each non-blank line, as split_lines gives them,
        remembering where each starts and ends; at the end `chars` and `sha256` are the
        whole text's, and `prefix_sha256` that of its first `prefix_chars` characters."""
        is_str = self.is_str
        hasher = hashlib.sha256()
        # A file under 4 GiB (an API import is at most MEMORYUI_MAX_IMPORT_BYTES) needs 4 bytes a start.
        self.starts, self.lengths = array("I" if len(self) < 1 << 32 else "q"), array("i")
        starts, lengths = self.starts, self.lengths
        chars, number = 0, 0
        self.prefix_sha256 = None
        for start, stop, piece, last in self._segments():
            text = piece if is_str else self._decode(piece, start)
            raw = piece.encode("utf-8", "surrogatepass") if is_str else piece
            before = chars
            chars += len(text) + (0 if last else 1)
            if prefix_chars and self.prefix_sha256 is None and chars >= prefix_chars:
                head = hasher.copy()
                head.update((text + ("" if last else "\n"))[:prefix_chars - before].encode("utf-8", "surrogatepass"))
                self.prefix_sha256 = head.hexdigest()
            hasher.update(raw)
            if not last:
                hasher.update(b"\n")
            number += 1
            line = text.rstrip("\r")
            if line.strip():
                starts.append(start)
                lengths.append(stop - start)
                yield number, line, last
        self.chars = chars
        self.sha256 = hasher.hexdigest()
