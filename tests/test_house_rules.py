"""Habits a machine can keep: no comment cites an issue number (the tracker is not in the
repository, so the reference leads nowhere), and commit messages are a short subject and a
body (tools/check_commits.py, run by `make lint`)."""

import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CODE = ("conversations", "memoryui", "clients/python/src", "clients/typescript/src", "clients/typescript/test",
        "tests", "bench", "tools", "static/js", "static/css", "templates", ".ci")
_ISSUE = re.compile(r"\b[Ii]ssues? ?#?\d")

pytestmark = pytest.mark.database_independent


def test_no_code_cites_an_issue_number():
    found = []
    for top in CODE:
        for path in sorted((ROOT / top).rglob("*")):
            if path.suffix not in (".py", ".js", ".mjs", ".ts", ".css", ".html", "") or not path.is_file() \
                    or "node_modules" in path.parts or path.name == Path(__file__).name:
                continue
            for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
                if _ISSUE.search(line):
                    found.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()[:100]}")
    assert not found, "say what the code does and why, not which issue asked for it:\n" + "\n".join(found)


def test_the_commit_check_finds_a_long_subject_and_a_missing_body():
    sys.path.insert(0, str(ROOT / "tools"))
    import check_commits

    good = "A short subject\n\nWhy it changed.\n"
    assert check_commits.problems({"a" * 40: good}) == []
    found = check_commits.problems({"b" * 40: "x" * 73 + "\n\nWhy.\n", "c" * 40: "Subject alone\n",
                                    "d" * 40: "Subject\nno blank line\n"})
    assert [f[:10] for f in found] == ["bbbbbbbbbb", "cccccccccc", "dddddddddd"]
