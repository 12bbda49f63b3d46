#!/usr/bin/env python3
"""Commit messages say what changed in a short subject and why in the body.

Every commit after the one named in .ci/commits-checked-since (the commit that made this
the rule; older history is left as it was written) must have a subject of at most 72
characters and a body: a blank line, then at least one line of text. Merge commits are
left out (git writes their subjects). Run by `make lint`; prints each offender and exits 1.
Outside a git checkout it says so and passes, unless CI=true (CI always has the history).
"""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SINCE = ROOT / ".ci" / "commits-checked-since"
SUBJECT_MAX = 72


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout


def problems(messages: dict[str, str]) -> list[str]:
    """For {commit: whole message}, what is wrong with each."""
    found = []
    for commit, message in messages.items():
        subject, _, body = message.strip("\n").partition("\n")
        if len(subject) > SUBJECT_MAX:
            found.append(f"{commit[:10]}: the subject is {len(subject)} characters "
                         f"(at most {SUBJECT_MAX}): {subject[:80]}")
        if not body.startswith("\n") or not body.strip():
            found.append(f"{commit[:10]}: no body after a blank line to say why: {subject[:80]}")
    return found


def main() -> int:
    base = SINCE.read_text().split()[0]
    try:
        commits = git("rev-list", "--no-merges", f"{base}..HEAD").split()
    except (OSError, subprocess.CalledProcessError) as exc:
        print(f"commit messages not checked: {exc}", file=sys.stderr)
        return 1 if os.environ.get("CI") == "true" else 0
    messages = {c: git("log", "-1", "--format=%B", c) for c in commits}
    found = problems(messages)
    for line in found:
        print(line, file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
