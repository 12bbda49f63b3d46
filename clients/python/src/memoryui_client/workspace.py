"""Workspace snapshots: the files as they were at a turn, kept in the user's own repository.

Before each turn the harness calls `client.snapshot_workspace(conversation_id, workdir,
position=…)` (`Memoryui` or `AsyncMemoryui`). It takes the working tree with `git stash create` — which writes commit
objects and touches neither the index, the working tree, the branches nor the stash
list — adds the untracked files (not the ignored ones) as the stash's third parent,
the way `git stash --include-untracked` stores them, and keeps the result under
`refs/memoryui/<conversation>/<position>` with `git update-ref`: outside `refs/heads/`,
so `git branch` and `git log` stay the user's, and removing `refs/memoryui/` is a safe
cleanup. Then it records {repo, ref, commit, base, files changed, insertions, deletions}
on the turn through the API.

A turn that changed nothing gets no snapshot: a clean working tree, or the same files
as this conversation's previous snapshot. `git stash apply <ref>` brings the files back
(`restore_snapshot`).

Only git and the standard library here; the client records the result over HTTP.
"""

import os
import re
import shlex
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

REF_NAMESPACE = "refs/memoryui"
_AUTHOR = {
    # stash create needs an identity; a harness on a fresh machine may have none configured.
    "GIT_AUTHOR_NAME": "memoryui", "GIT_AUTHOR_EMAIL": "memoryui@localhost",
    "GIT_COMMITTER_NAME": "memoryui", "GIT_COMMITTER_EMAIL": "memoryui@localhost",
}


class SnapshotError(Exception):
    """git could not take or restore a snapshot (not a repository, no commit yet, …)."""


@dataclass(frozen=True)
class Snapshot:
    repo: str
    ref: str
    commit: str
    base: str
    files_changed: int
    insertions: int
    deletions: int

    def as_record(self, position: int) -> dict:
        """The body of POST /conversations/{id}/snapshots."""
        return {"position": position, "repo": self.repo, "ref": self.ref, "commit": self.commit,
                "base": self.base, "files_changed": self.files_changed, "insertions": self.insertions,
                "deletions": self.deletions}

    @property
    def restore_command(self) -> str:
        return f"git -C {shlex.quote(self.repo)} stash apply {self.ref}"


def snapshot_ref(conversation_id, position: int) -> str:
    return f"{REF_NAMESPACE}/{conversation_id}/{int(position)}"


def _git(cwd, *args, env=None, input=None) -> str:
    full_env = {**os.environ, **_AUTHOR, **(env or {})}
    for name in list(_AUTHOR):
        if os.environ.get(name):  # the user's own identity wins
            full_env[name] = os.environ[name]
    try:
        done = subprocess.run(["git", *args], cwd=cwd, env=full_env, input=input, capture_output=True, check=False)
    except FileNotFoundError:
        raise SnapshotError("git is not installed") from None
    if done.returncode != 0:
        message = done.stderr.decode(errors="replace").strip() or f"exit status {done.returncode}"
        raise SnapshotError(f"git {' '.join(args[:2])}: {message}")
    return done.stdout.decode(errors="surrogateescape")


def _rev(cwd, spec: str) -> str | None:
    try:
        return _git(cwd, "rev-parse", "--verify", "--quiet", spec).strip() or None
    except SnapshotError:
        return None


def _untracked(cwd) -> list[str]:
    out = _git(cwd, "ls-files", "--others", "--exclude-standard", "-z")
    return [p for p in out.split("\0") if p]


def _numstat(cwd, *args) -> tuple[int, int, int]:
    files = insertions = deletions = 0
    for line in _git(cwd, "diff", "--numstat", "--no-renames", *args).splitlines():
        added, deleted, _ = line.split("\t", 2)
        files += 1
        insertions += int(added) if added != "-" else 0  # "-": a binary file
        deletions += int(deleted) if deleted != "-" else 0
    return files, insertions, deletions


def _content(cwd, commit: str) -> tuple:
    """What a snapshot holds: its base, its tracked files, its untracked files."""
    untracked = _rev(cwd, f"{commit}^3^{{tree}}")
    return _rev(cwd, f"{commit}^1"), _rev(cwd, f"{commit}^{{tree}}"), untracked


def _previous(cwd, conversation_id, position: int) -> str | None:
    """This conversation's latest snapshot before `position`, if any."""
    refs = _git(cwd, "for-each-ref", "--format=%(refname) %(objectname)", f"{REF_NAMESPACE}/{conversation_id}/")
    best = None
    for line in refs.splitlines():
        name, oid = line.rsplit(" ", 1)
        tail = name.rsplit("/", 1)[1]
        if tail.isdigit() and int(tail) < position and (best is None or int(tail) > best[0]):
            best = (int(tail), oid)
    return best[1] if best else None


def take_snapshot(workdir, conversation_id, position: int) -> Snapshot | None:
    """Snapshot the working tree of `workdir` for the turn at `position`, or None when
    nothing changed (clean, or the same files as the conversation's last snapshot)."""
    if isinstance(position, bool) or not isinstance(position, int) or position < 0:
        raise ValueError("position must be a whole number ≥ 0")
    cwd = str(workdir)
    top = _git(cwd, "rev-parse", "--show-toplevel").strip()
    base = _rev(top, "HEAD")
    if base is None:
        raise SnapshotError(f"{top} has no commit yet: a snapshot is taken against HEAD")
    tracked = _git(top, "stash", "create", f"memoryui: turn {position} of {conversation_id}").strip()
    untracked = _untracked(top)
    if not tracked and not untracked:
        return None
    with tempfile.TemporaryDirectory(prefix="memoryui-snapshot-") as tmp:
        if untracked:
            # The untracked files go through an index of our own: the user's stays untouched.
            scratch = {"GIT_INDEX_FILE": str(Path(tmp) / "untracked-index")}
            _git(top, "update-index", "--add", "-z", "--stdin", env=scratch, input="\0".join(untracked).encode())
            untracked_tree = _git(top, "write-tree", env=scratch).strip()
            untracked_commit = _git(top, "commit-tree", untracked_tree, "-m",
                                    f"untracked files of turn {position}").strip()
            if tracked:
                index_commit, tree = f"{tracked}^2", f"{tracked}^{{tree}}"
            else:
                index_commit = _git(top, "commit-tree", f"{base}^{{tree}}", "-p", base, "-m",
                                    f"index of turn {position}").strip()
                tree = f"{base}^{{tree}}"
            # The same shape `git stash --include-untracked` stores: HEAD, the index, the untracked files.
            commit = _git(top, "commit-tree", tree, "-p", base, "-p", _rev(top, index_commit), "-p",
                          untracked_commit, "-m", f"memoryui: turn {position} of {conversation_id}").strip()
        else:
            commit = tracked
    ref = snapshot_ref(conversation_id, position)
    content = _content(top, commit)
    existing = _rev(top, ref)
    if existing is not None:
        if _content(top, existing) != content:
            raise SnapshotError(f"{ref} already holds another snapshot ({existing}); snapshots are never replaced")
        commit = existing  # a retry of the same turn: keep the first
    else:
        previous = _previous(top, conversation_id, position)
        if previous is not None and _content(top, previous) == content:
            return None
        # The all-zero old value: create the ref, never move one that appeared meanwhile.
        _git(top, "update-ref", "-m", f"memoryui snapshot: turn {position}", ref, commit, "0" * len(commit))
    files, insertions, deletions = _numstat(top, base, f"{commit}^{{tree}}")
    if content[2] is not None:
        empty = _git(top, "hash-object", "-t", "tree", "--stdin", input=b"").strip()
        more = _numstat(top, empty, content[2])
        files, insertions, deletions = files + more[0], insertions + more[1], deletions + more[2]
    return Snapshot(repo=top, ref=ref, commit=commit, base=base, files_changed=files, insertions=insertions,
                    deletions=deletions)


def restore_snapshot(workdir, ref: str) -> None:
    """Bring the snapshot's files back into the working tree (`git stash apply <ref>`)."""
    if not re.fullmatch(rf"{REF_NAMESPACE}/[0-9a-fA-F-]+/\d+", ref):
        raise ValueError(f"not a memoryui snapshot ref: {ref!r}")
    _git(str(workdir), "stash", "apply", ref)
