"""Workspace snapshots (memoryui_client.workspace) against a real git repository in a temporary directory."""

import shutil
import subprocess

import pytest

from memoryui_client.workspace import SnapshotError, restore_snapshot, take_snapshot
from tests.conftest import skip_or_fail

CID = "3f1c2a9e-8d4b-4c61-9a57-0b7e6f2d1c88"


def git(repo, *args, check=True):
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=check).stdout


@pytest.fixture
def repo(tmp_path):
    if shutil.which("git") is None:
        skip_or_fail("git is not installed")
    root = tmp_path / "shop"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    git(root, "config", "user.email", "dev@example.com")
    git(root, "config", "user.name", "Dev")
    (root / ".gitignore").write_text("*.log\n")
    (root / "invoice.py").write_text("def total(lines):\n    return sum(lines)\n")
    (root / "tax.py").write_text("RATE = 0.19\n")
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "first")
    git(root, "branch", "feature")
    return root


def user_view(repo):
    """Everything of the user's that a snapshot must leave as it was."""
    files = {p.relative_to(repo).as_posix(): p.read_bytes() for p in repo.rglob("*")
             if p.is_file() and ".git" not in p.parts}
    return {
        "status": git(repo, "status", "--porcelain=v1", "--untracked-files=all"),
        "index": git(repo, "ls-files", "--stage"),
        "staged": git(repo, "diff", "--cached"),
        "unstaged": git(repo, "diff"),
        "branches": git(repo, "for-each-ref", "refs/heads", "refs/tags"),
        "head": git(repo, "rev-parse", "HEAD"),
        "symbolic": git(repo, "symbolic-ref", "HEAD"),
        "log": git(repo, "log", "--oneline"),
        "stash": git(repo, "stash", "list"),
        "files": files,
    }


def change_everything(repo):
    (repo / "invoice.py").write_text("def total(lines):\n    return round(sum(lines), 2)\n# vat\n")
    (repo / "tax.py").write_text("RATE = 0.20\n")
    git(repo, "add", "tax.py")  # one change staged, one not
    (repo / "money.py").write_text("from decimal import Decimal\nZERO = Decimal(0)\n")  # untracked
    (repo / "debug.log").write_text("ignored\n")


def test_a_clean_tree_gets_no_snapshot(repo):
    assert take_snapshot(repo, CID, 3) is None
    assert git(repo, "for-each-ref", "refs/memoryui") == ""


def test_it_snapshots_without_touching_the_users_branches_index_or_files(repo):
    change_everything(repo)
    before = user_view(repo)
    snap = take_snapshot(repo, CID, 4)
    assert user_view(repo) == before
    assert snap.ref == f"refs/memoryui/{CID}/4"
    assert git(repo, "rev-parse", snap.ref).strip() == snap.commit
    assert snap.base == before["head"].strip()
    assert snap.repo == str(repo.resolve())
    # invoice.py: +2 -1; tax.py: +1 -1; money.py (untracked): +2. The ignored log is not taken.
    assert (snap.files_changed, snap.insertions, snap.deletions) == (3, 5, 2)
    assert "debug.log" not in git(repo, "ls-tree", "-r", "--name-only", f"{snap.commit}^3")
    assert git(repo, "branch", "--list").split() == ["feature", "*", "main"]


def test_restoring_brings_the_files_back(repo):
    change_everything(repo)
    wanted = {name: (repo / name).read_text() for name in ("invoice.py", "tax.py", "money.py")}
    snap = take_snapshot(repo, CID, 4)
    # The agent's next turn goes wrong; the user throws its changes away.
    git(repo, "reset", "-q", "--hard")
    (repo / "money.py").unlink()
    assert (repo / "tax.py").read_text() == "RATE = 0.19\n"
    restore_snapshot(repo, snap.ref)
    assert {name: (repo / name).read_text() for name in wanted} == wanted


def test_only_untracked_files_still_make_a_snapshot(repo):
    (repo / "notes.md").write_text("plan\n")
    before = user_view(repo)
    snap = take_snapshot(repo, CID, 1)
    assert user_view(repo) == before
    assert (snap.files_changed, snap.insertions, snap.deletions) == (1, 1, 0)
    (repo / "notes.md").unlink()
    restore_snapshot(repo, snap.ref)
    assert (repo / "notes.md").read_text() == "plan\n"


def test_a_turn_that_changed_nothing_since_the_last_snapshot_gets_none(repo):
    change_everything(repo)
    first = take_snapshot(repo, CID, 4)
    assert take_snapshot(repo, CID, 5) is None
    (repo / "money.py").write_text("ZERO = 0\n")
    second = take_snapshot(repo, CID, 6)
    assert second is not None and second.commit != first.commit
    assert sorted(git(repo, "for-each-ref", "--format=%(refname)", "refs/memoryui").split()) == [
        f"refs/memoryui/{CID}/4", f"refs/memoryui/{CID}/6"]


def test_the_same_turn_again_keeps_its_first_snapshot_and_never_replaces_it(repo):
    change_everything(repo)
    first = take_snapshot(repo, CID, 4)
    assert take_snapshot(repo, CID, 4).commit == first.commit
    (repo / "tax.py").write_text("RATE = 0.07\n")
    with pytest.raises(SnapshotError, match="never replaced"):
        take_snapshot(repo, CID, 4)
    assert git(repo, "rev-parse", first.ref).strip() == first.commit


def test_a_repository_without_a_commit_is_refused(tmp_path):
    git(tmp_path, "init", "-q")
    (tmp_path / "a.txt").write_text("x")
    with pytest.raises(SnapshotError, match="no commit yet"):
        take_snapshot(tmp_path, CID, 0)


def test_a_directory_outside_git_is_refused(tmp_path):
    with pytest.raises(SnapshotError):
        take_snapshot(tmp_path, CID, 0)


# -- through the client, against a live server ------------------------------------------


@pytest.fixture
def mui(live_server, transactional_db):
    from memoryui_client import Memoryui
    from tests.api_support import make_key

    with Memoryui(live_server.url, api_key=make_key(["read", "write"], name="harness")) as client:
        yield client


def test_the_client_snapshots_before_a_turn_and_records_it_on_the_turn(mui, repo):
    from conversations.ledger.models import WorkspaceSnapshot

    conversation = mui.create(title="Fix the VAT rounding")
    cid = conversation["id"]
    mui.append(cid, {"kind": "user", "content": "Round VAT once per invoice."})
    assert mui.snapshot_workspace(cid, repo, position=1) is None  # nothing changed yet: no snapshot
    change_everything(repo)
    before = user_view(repo)
    recorded = mui.snapshot_workspace(cid, repo, position=1)
    assert user_view(repo) == before
    assert recorded["ref"] == f"refs/memoryui/{cid}/1"
    assert recorded["commit"] == git(repo, "rev-parse", recorded["ref"]).strip()
    assert (recorded["files_changed"], recorded["insertions"], recorded["deletions"]) == (3, 5, 2)
    assert recorded["restore"] == f"git -C {repo.resolve()} stash apply refs/memoryui/{cid}/1"
    row = WorkspaceSnapshot.objects.get()
    assert (str(row.conversation_id), row.position, row.commit_sha) == (cid, 1, recorded["commit"])
    # Restoring with the command the page shows brings the files back.
    git(repo, "reset", "-q", "--hard")
    (repo / "money.py").unlink()
    subprocess.run(recorded["restore"], shell=True, check=True, capture_output=True)
    assert (repo / "money.py").read_text().startswith("from decimal import Decimal")
    assert (repo / "tax.py").read_text() == "RATE = 0.20\n"


def test_the_client_records_task_state_and_a_retried_action(mui):
    from memoryui_client import Conflict

    cid = mui.create(title="Refund")["id"]
    state = mui.set_state(cid, {"order": "SU-88421", "decision": "refund"}, expected_version=0)
    assert state["version"] == 1
    assert mui.set_state(cid, {"order": "SU-88421", "decision": "refund"}, expected_version=0)["changed"] is False
    with pytest.raises(Conflict) as exc:
        mui.set_state(cid, {"order": "SU-88421", "decision": "replace"}, expected_version=0)
    assert exc.value.code == "version_conflict"
    key = "refund:T-40219:SU-88421:11800"
    assert mui.find_action(key)["performed"] is False
    first = mui.record_action(cid, key=key, name="issue_refund", result={"refund_id": "RF-77120"})
    retry = mui.record_action(cid, key=key, name="issue_refund", result={"status": "already_performed"})
    assert (first["status"], retry["status"]) == ("performed", "already_performed")
    assert retry["action"]["id"] == first["action"]["id"]
    assert mui.find_action(key, conversation_id=cid)["action"]["id"] == first["action"]["id"]
