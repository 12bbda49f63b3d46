"""A zip of a project folder, taken apart for the import page, and nothing else.

The upload page takes a .zip of a Claude Code project folder (sessions, their
subagents/ folders) beside plain files. A zip is untrusted input that can say
anything about itself, so before one byte of it is written:

- it must open as a zip, unencrypted, with at most MAX_MEMBERS members;
- every member name is a relative path inside the archive: no absolute path, no
  drive, no backslash, no "..", no NUL, no symlink (refused as a whole: 422);
- the sizes its members declare add up to at most the upload limit (413);

and while each transcript is copied out (to an upload file of its own, 0600, with
the upload lifetime of uploads.py), the bytes really read are counted against the
same limit: a member that inflates past what it declared, or past the limit, stops
the copy, and the view removes what the batch wrote (413). Members that are not
transcripts (.jsonl/.json, an Aider history, a database) or read with one (a
`.meta.json`, a Cline task's `ui_messages.json`) are skipped, and so is a zip inside the
zip; containers.py puts together what belongs together.
"""

import zipfile
from dataclasses import dataclass
from pathlib import PurePosixPath

from conversations.errors import BodyTooLarge as ArchiveTooLarge  # 413 body_too_large: one code for "too big"
from conversations.errors import InvalidInput

from .containers import is_candidate

MAX_MEMBERS = 2000
READ_BLOCK = 1024 * 1024
# The command reads zips the operator gives it: no upload limit.
NO_LIMIT = 1 << 62


@dataclass
class Member:
    name: str  # the path inside the archive, as the importer's namespace rule reads it
    info: zipfile.ZipInfo


def is_zip(upload) -> bool:
    name = (getattr(upload, "name", "") or "").lower()
    if name.endswith(".zip"):
        return True
    try:
        found = zipfile.is_zipfile(upload)
    finally:
        upload.seek(0)
    return found


def _refuse(reason: str) -> InvalidInput:
    return InvalidInput(f"the zip {reason}; nothing of it was imported", field="file")


def _safe_name(name: str) -> str:
    if not name or "\x00" in name or "\\" in name or name.startswith("/"):
        raise _refuse(f"holds a member whose path is not inside the archive ({name[:80]!r})")
    parts = PurePosixPath(name).parts
    if any(p == ".." for p in parts) or (parts and ":" in parts[0]):
        raise _refuse(f"holds a member whose path is not inside the archive ({name[:80]!r})")
    return name


def _is_symlink(info: zipfile.ZipInfo) -> bool:
    return (info.external_attr >> 16) & 0o170000 == 0o120000


def _transcript(name: str) -> bool:
    return is_candidate(name)


def open_archive(upload, *, max_bytes: int) -> tuple[zipfile.ZipFile, list[Member]]:
    """The archive and its transcripts (and the sidecars read with them), in path order (a
    session's file before its folder), or a 4xx naming `file` before anything is written."""
    try:
        archive = zipfile.ZipFile(upload)
        infos = archive.infolist()
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, ValueError, EOFError):
        raise _refuse("cannot be read as a zip file") from None
    if len(infos) > MAX_MEMBERS and max_bytes != NO_LIMIT:
        raise _refuse(f"has {len(infos)} members; at most {MAX_MEMBERS} are taken")
    declared = 0
    members = []
    for info in infos:
        name = _safe_name(info.filename)
        if _is_symlink(info):
            raise _refuse(f"holds a symbolic link ({name[:80]!r})")
        if info.flag_bits & 0x1:
            raise _refuse("is encrypted")
        declared += info.file_size
        if not info.is_dir() and _transcript(name):
            members.append(Member(name=name, info=info))
    if declared > max_bytes:
        raise ArchiveTooLarge(f"the zip unpacks to {declared:,} bytes; at most {max_bytes:,} are taken, nothing of it "
                              "was imported", field="file")
    # Sessions at the archive's root (zipped from inside the project folder): the zip's own
    # name stands for the folder, so the namespace is the project's, as for the folder itself.
    stem = PurePosixPath(getattr(upload, "name", "") or "project.zip").stem
    if any("/" not in m.name for m in members):
        for m in members:
            m.name = f"{stem}/{m.name}"
    members.sort(key=lambda m: m.name)
    return archive, members


class Budget:
    """The bytes a batch of uploads may still write (the upload limit, shared)."""

    def __init__(self, max_bytes: int):
        self.left = max_bytes

    def take(self, n: int) -> None:
        self.left -= n
        if self.left < 0:
            raise ArchiveTooLarge("the files unpack to more than the upload limit; nothing of them was imported",
                                  field="file")


def read_member(archive: zipfile.ZipFile, member: Member, budget: Budget):
    """The member's bytes, a block at a time, counted against the budget and its declared size."""
    read = 0
    try:
        with archive.open(member.info) as f:
            while block := f.read(READ_BLOCK):
                read += len(block)
                if read > member.info.file_size:
                    raise ArchiveTooLarge("a zip member unpacks to more than it declares; nothing of the zip was "
                                          "imported", field="file")
                budget.take(len(block))
                yield block
    except (zipfile.BadZipFile, EOFError, OSError, ValueError, NotImplementedError) as exc:
        # NotImplementedError: a compression method this Python cannot read.
        raise _refuse(f"has a member that cannot be read ({member.name[:80]!r}: {exc})") from None
