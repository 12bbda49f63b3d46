"""The data folder and the embedded database's files are the owner's alone.

The folder is 0700 and the SQLite files 0600 (the secret key beside them already
is). SQLite creates the -wal and -shm files with the main file's mode, so it is
enough to create the main file 0600 before the first connection and to tighten
files an older version left looser, by path (os.chmod). Nothing here opens a
database file that a connection of this process may hold: closing any descriptor
of it would drop that connection's locks.
"""

import logging
import os
import stat
from pathlib import Path

log = logging.getLogger("memoryui.files")

DIR_MODE = 0o700
FILE_MODE = 0o600
SQLITE_SUFFIXES = ("", "-wal", "-shm", "-journal")


def _tighten(path: Path, mode: int) -> None:
    try:
        current = stat.S_IMODE(os.stat(path).st_mode)
    except FileNotFoundError:
        return
    if current & ~mode:
        try:
            os.chmod(path, mode)
        except PermissionError:
            log.warning("%s is mode %o and not ours to change; it should be %o", path, current, mode)


def prepare_data_dir(path: Path) -> None:
    """Create the data folder 0700, or tighten it to 0700."""
    path.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
    _tighten(path, DIR_MODE)


def precreate_sqlite_file(name) -> None:
    """Create a missing SQLite main file empty and 0600 (an empty file is an empty
    database). Called from settings, before this process has any connection; a
    file that exists is left alone."""
    if not name or str(name) == ":memory:" or str(name).startswith("file:"):
        return
    try:
        fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
    except (FileExistsError, FileNotFoundError):
        return
    os.close(fd)


def restrict_sqlite_files(sender=None, connection=None, **kwargs) -> None:
    """connection_created: the database's files 0600, by path."""
    if connection is None or connection.vendor != "sqlite":
        return
    name = str(connection.settings_dict.get("NAME") or "")
    if not name or name == ":memory:" or name.startswith("file:"):
        return
    for suffix in SQLITE_SUFFIXES:
        _tighten(Path(name + suffix), FILE_MODE)
