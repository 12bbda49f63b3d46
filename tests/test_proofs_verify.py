"""memoryui-verify: exports checked offline, and every kind of tampering caught with its position."""

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from django.db import connection
from memoryui_verify import chain as client_chain
from memoryui_verify import cli, verify_path
from memoryui_verify import encoding as client_encoding

from conversations import chain, export, store
from conversations.proofs import bundle, encoding, keys
from tests.conftest import skip_or_fail

pytestmark = pytest.mark.django_db
ROOT = Path(__file__).resolve().parent.parent
CLIENT = ROOT / "clients" / "python"


@pytest.fixture(autouse=True)
def own_key_dir(settings, tmp_path):
    settings.DATA_DIR = tmp_path
    settings.MEMORYUI_SIGNING_KEY_FILE = ""


@pytest.fixture
def convo():
    c = store.create_conversation(title="Refund", subject="customer:42")
    for i in range(6):
        store.append_message(conversation_id=c.pk, message={"kind": "user", "content": f"message {i} ünïcode"})
    store.checkpoint_at(conversation_id=c.pk, position=2, summary="Asked three times.")
    store.checkpoint_at(conversation_id=c.pk, position=4, summary="Asked five times.")
    c.refresh_from_db()
    return c


def _write(tmp_path, convo, fmt: str) -> Path:
    path = tmp_path / f"export.{fmt}"
    path.write_text("".join(export.export_stream(convo.pk, fmt).chunks))
    return path


def _pinned() -> list[str]:
    return [keys.active_key().public_b64]


def _problems(report) -> str:
    return " | ".join(report.problems + [p for c in report.conversations for p in c.problems])


def _edit_jsonl(path: Path, edit) -> None:
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    path.write_text("".join(json.dumps(line, ensure_ascii=False) + "\n" for line in edit(lines)))


# -- the encodings agree ---------------------------------------------------------------------------


@pytest.mark.database_independent
def test_the_client_carries_the_servers_encodings_exactly():
    assert (CLIENT / "src/memoryui_verify/chain.py").read_bytes() == (ROOT / "conversations/chain.py").read_bytes()
    assert ((CLIENT / "src/memoryui_verify/encoding.py").read_bytes()
            == (ROOT / "conversations/proofs/encoding.py").read_bytes())
    values = [7, "assistant", '{"kind":"assistant","content":"é\\u0000"}', "2026-01-02T03:04:05.000006Z"]
    assert client_chain.message_payload(*values) == chain.message_payload(*values) == chain.payload("message", values)
    head = {"chain_hash": "ab" * 32, "checkpoint_chain_hash": "00" * 32, "checkpoints": 0, "key_id": "0" * 16,
            "conversation_id": "c", "position": -1, "signed_at": "2026-01-01T00:00:00.000000Z", "extra": "x",
            "ledger_chains": {"action": {"rows": 1, "chain_hash": "cd" * 32}}}
    assert client_encoding.head_message(head) == encoding.head_message(head)


# -- whole exports verify --------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["json", "jsonl"])
def test_a_conversation_export_verifies_with_the_pinned_key(tmp_path, convo, fmt):
    report = verify_path(_write(tmp_path, convo, fmt), pinned_keys=_pinned())
    assert report.ok, _problems(report)
    [result] = report.conversations
    assert (result.messages, result.checkpoints, result.head["position"]) == (6, 2, 5)
    assert report.keys_used == {keys.active_key().key_id} and not report.warnings


def test_a_fork_verifies_on_its_own(tmp_path, convo):
    child = store.fork_conversation(conversation_id=convo.pk, position=3)
    store.append_message(conversation_id=child.pk, message={"kind": "note", "text": "after the fork"})
    child.refresh_from_db()
    report = verify_path(_write(tmp_path, child, "jsonl"), pinned_keys=_pinned())
    assert report.ok, _problems(report)
    assert (report.conversations[0].messages, report.conversations[0].checkpoints) == (5, 1)


def test_without_a_pinned_key_it_says_the_key_came_from_the_file(tmp_path, convo):
    report = verify_path(_write(tmp_path, convo, "jsonl"))
    assert report.ok and "public key carried in the file" in report.warnings[0]


def test_a_subject_bundle_verifies(tmp_path, convo):
    path = tmp_path / "bundle.zip"
    path.write_bytes(b"".join(bundle.prepare("Customer:42").chunks()))
    report = verify_path(path, pinned_keys=_pinned())
    assert report.ok, _problems(report)
    assert report.kind == "bundle" and report.files_checked == 9 and len(report.conversations) == 1


# -- attacks on the file ---------------------------------------------------------------------------


def _swap(lines, a, b):
    lines[a], lines[b] = lines[b], lines[a]
    return lines


def _set(lines, index, **changes):
    lines[index] = {**lines[index], **changes}
    return lines


def _edit_checkpoint(lines):
    i = next(i for i, line in enumerate(lines) if line.get("record") == "checkpoint")
    return _set(lines, i, summary="Nothing was asked.")


ATTACKS = {
    "edit a row's stored text": (lambda ls: _set(ls, 3, stored=ls[3]["stored"].replace("message 3", "message X")),
                                 "row #3 was changed"),
    "edit a row's message only": (lambda ls: _set(ls, 2, message={"kind": "user", "content": "forged"}),
                                  "row #2 was changed"),
    "delete a row": (lambda ls: ls[:2] + ls[3:], "row #2 is missing"),
    "swap two rows": (lambda ls: _swap(ls, 1, 4), "row #1 is out of order"),
    "truncate the tail": (lambda ls: ls[:4] + ls[6:], "rows from #4 on are missing"),
    "change a checkpoint summary": (_edit_checkpoint, "was changed"),
    "drop a checkpoint": (lambda ls: [x for x in ls if x.get("summary") != "Asked five times."],
                          "signed checkpoints are missing"),
    "move the head": (lambda ls: _set(ls, len(ls) - 1, position=3), "signature does not verify"),
}


@pytest.mark.parametrize("attack", ATTACKS)
def test_tampering_with_an_export_is_caught_with_its_position(tmp_path, convo, attack):
    edit, expected = ATTACKS[attack]
    path = _write(tmp_path, convo, "jsonl")
    _edit_jsonl(path, edit)
    report = verify_path(path, pinned_keys=_pinned())
    assert not report.ok
    assert expected in _problems(report)


@pytest.fixture
def with_ledger(convo):
    from conversations.ledger import store as ledger

    ledger.set_state(conversation_id=convo.pk, state={"decision": "refund"}, expected_version=0, actor="bot")
    ledger.record_action(conversation_id=convo.pk, idempotency_key="refund-7", name="issue_refund",
                         arguments={"order": 7}, result={"refunded": 30})
    ledger.record_action(conversation_id=convo.pk, idempotency_key="mail-7", name="send_mail",
                         arguments={"to": "c@example.com"}, result={"sent": True})
    ledger.record_snapshot(conversation_id=convo.pk, position=3, repo="/srv/app", commit="a" * 40)
    convo.refresh_from_db()
    return convo


def _action_lines(lines):
    return [i for i, line in enumerate(lines) if line.get("record") == "action"]


LEDGER_ATTACKS = {
    "change an action's result": (lambda ls: _set(ls, _action_lines(ls)[0], result={"refunded": 3000}),
                                  "action entry"),
    "change it in its chain fields too": (
        lambda ls: _set(ls, _action_lines(ls)[0], chain={**ls[_action_lines(ls)[0]]["chain"], "fields": {
            **ls[_action_lines(ls)[0]]["chain"]["fields"], "result": '{"refunded":3000}'}}),
        "was changed: its content does not match its commitment"),
    "drop an action": (lambda ls: [x for i, x in enumerate(ls) if i != _action_lines(ls)[1]],
                       "1 of the 2 signed action entries are missing"),
    "drop the task state": (lambda ls: [x for x in ls if x.get("record") != "task_state_event"],
                            "signed state entries are missing"),
}


@pytest.mark.parametrize("fmt", ["json", "jsonl"])
def test_a_conversation_with_its_ledger_verifies(tmp_path, with_ledger, fmt):
    report = verify_path(_write(tmp_path, with_ledger, fmt), pinned_keys=_pinned())
    assert report.ok, _problems(report)
    assert report.conversations[0].head["ledger_chains"]["action"]["rows"] == 2


def test_a_ledger_row_changed_in_the_database_is_caught_offline(tmp_path, with_ledger):
    pk = with_ledger._meta.pk.get_db_prep_value(with_ledger.pk, connection)
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            for (name,) in cursor.execute("SELECT name FROM sqlite_master WHERE type = 'trigger' "
                                          "AND tbl_name = 'ledger_action'").fetchall():
                cursor.execute(f'DROP TRIGGER "{name}"')
        else:
            cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
            cursor.execute("ALTER TABLE ledger_action DISABLE TRIGGER USER")
        cursor.execute("UPDATE ledger_action SET result = %s WHERE conversation_id = %s AND name = 'issue_refund'",
                       ['{"refunded": 3000}', pk])
    report = verify_path(_write(tmp_path, with_ledger, "jsonl"), pinned_keys=_pinned())
    assert "action chain: row #" in _problems(report) and "does not match its commitment" in _problems(report)


@pytest.mark.parametrize("attack", LEDGER_ATTACKS)
def test_tampering_with_the_ledger_in_an_export_is_caught(tmp_path, with_ledger, attack):
    edit, expected = LEDGER_ATTACKS[attack]
    path = _write(tmp_path, with_ledger, "jsonl")
    _edit_jsonl(path, edit)
    report = verify_path(path, pinned_keys=_pinned())
    assert not report.ok and expected in _problems(report)


def test_a_head_forged_with_another_key_is_refused(tmp_path, convo):
    path = _write(tmp_path, convo, "jsonl").rename(tmp_path / "genuine.jsonl")
    real = keys.active_key().public_b64
    keys.rotate()  # stands for an attacker's key: the file is re-signed with a key that is not pinned
    forged = _write(tmp_path, convo, "jsonl")
    report = verify_path(forged, pinned_keys=[real])
    assert not report.ok and "not a key you trust" in _problems(report)
    assert verify_path(path, pinned_keys=[real]).ok


def test_rows_changed_in_the_database_behind_the_triggers_are_caught_offline(tmp_path, convo):
    table, pk = "conversations_message", convo._meta.pk.get_db_prep_value(convo.pk, connection)
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute("DROP TRIGGER message_no_update")
        else:
            cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")  # no deferred checks pending before the ALTER
            cursor.execute(f"ALTER TABLE {table} DISABLE TRIGGER USER")
        cursor.execute(f"UPDATE {table} SET content = %s WHERE conversation_id = %s AND position = 4",
                       ['{"kind":"user","content":"I never said that"}', pk])
    report = verify_path(_write(tmp_path, convo, "json"), pinned_keys=_pinned())
    assert "row #4 was changed: its content does not match its commitment" in _problems(report)


def _bundle(tmp_path, convo) -> Path:
    path = tmp_path / "bundle.zip"
    path.write_bytes(b"".join(bundle.prepare("customer:42").chunks()))
    return path


def _rewrite_zip(path: Path, edit) -> None:
    with zipfile.ZipFile(path) as zf:
        members = {n: zf.read(n) for n in zf.namelist()}
    members = edit(members)
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)


@pytest.mark.parametrize("edit, expected", [
    (lambda m: {**m, "facts.jsonl": m["facts.jsonl"] + b'{"text": "added"}\n'}, "facts.jsonl was changed"),
    (lambda m: {**m, "extra.txt": b"x"}, "extra.txt is not in the manifest"),
    (lambda m: {n: d for n, d in m.items() if n != "access_log.jsonl"}, "access_log.jsonl is in the manifest but"),
    (lambda m: {**m, "manifest.json": m["manifest.json"].replace(b'"version": 1', b'"version": 2')},
     "manifest: the signature does not verify"),
])
def test_tampering_with_a_bundle_is_caught(tmp_path, convo, edit, expected):
    path = _bundle(tmp_path, convo)
    _rewrite_zip(path, edit)
    report = verify_path(path, pinned_keys=_pinned())
    assert not report.ok and expected in _problems(report)


@pytest.mark.parametrize("folder", ["", "subject-export/"])
def test_a_bundle_unpacked_and_zipped_again_still_verifies(tmp_path, convo, folder):
    """Zip tools add an entry for each folder they pack, and a bundle zipped again from the folder
    it was unpacked into has every file under that folder: neither is a file added to the export."""
    path = _bundle(tmp_path, convo)

    def repack(members):
        out = {f"{folder}conversations/": b""} if not folder else {folder: b"", f"{folder}conversations/": b""}
        out.update({folder + name: data for name, data in members.items()})
        return out

    _rewrite_zip(path, repack)
    report = verify_path(path, pinned_keys=_pinned())
    assert report.ok, _problems(report)
    assert report.files_checked == 9


def test_the_command_line_answers_in_words_json_and_exit_status(tmp_path, convo, capsys):
    path = _write(tmp_path, convo, "jsonl")
    key_file = tmp_path / "key.txt"
    key_file.write_text(keys.active_key().public_b64)
    assert cli.main([str(path), "--key", str(key_file)]) == 0
    assert "VERIFIED" in capsys.readouterr().out
    _edit_jsonl(path, lambda ls: ls[:2] + ls[3:])
    assert cli.main([str(path), "--json", "--key", str(key_file)]) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["ok"] is False and "row #2 is missing" in out["conversations"][0]["problems"][0]
    assert cli.main([str(tmp_path / "missing.jsonl")]) == 2


# -- in a fresh virtualenv, as a person receiving the file would run it ----------------------------


@pytest.mark.slow
def test_memoryui_verify_checks_a_bundle_in_a_fresh_virtualenv(tmp_path, convo):
    path = _bundle(tmp_path, convo)
    tampered = tmp_path / "tampered.zip"
    shutil.copy(path, tampered)
    _rewrite_zip(tampered, lambda m: {**m, "facts.jsonl": b"{}\n"})
    venv = tmp_path / "venv"
    # Without pip of its own (bootstrapping one costs seconds): this suite's pip installs into it.
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    pip = [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install", "--quiet",
           "--disable-pip-version-check"]
    env = {**os.environ, "PIP_NO_INPUT": "1"}
    # The client without its HTTP dependencies (the verifier needs none), then only what signatures need.
    steps = [pip + ["--no-deps", str(CLIENT)], pip + ["cryptography==50.0.2"]]
    for step in steps:
        done = subprocess.run(step, capture_output=True, text=True, env=env, timeout=300)
        if done.returncode != 0:
            skip_or_fail(f"cannot install into a fresh virtualenv (no package index?): {done.stderr[-400:]}")
    script = str(venv / "bin" / "memoryui-verify")
    key = keys.active_key().public_b64
    good = subprocess.run([script, str(path), "--key", key], capture_output=True, text=True, timeout=120)
    assert good.returncode == 0, good.stdout + good.stderr
    assert "VERIFIED" in good.stdout
    bad = subprocess.run([script, str(tampered), "--key", key], capture_output=True, text=True, timeout=120)
    assert bad.returncode == 1 and "facts.jsonl was changed" in bad.stdout
    # No Django and no server in that environment: the verifier stood on its own.
    probe = subprocess.run([str(venv / "bin" / "python"), "-c", "import django"], capture_output=True)
    assert probe.returncode != 0


# -- erased conversations in a subject export -------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_an_erased_conversation_verifies_as_erased_and_as_signed(tmp_path, settings):
    from conversations.retention import erasure

    convo = store.create_conversation(title="Gone", subject="customer:99")
    for i in range(4):
        store.append_message(conversation_id=convo.pk, message={"kind": "user", "content": f"my email is x{i}@y.z"})
    store.checkpoint_at(conversation_id=convo.pk, position=1, summary="Gave an email.")
    heads_signed = verify_cron_run()
    receipt = erasure.execute_deletion(subject="customer:99", actor="user:boss")
    # The heads kept of it do not stop the receipt from checking that its id is gone from the files
    # (a check made on SQLite, which stores ids as text).
    if connection.vendor == "sqlite":
        assert receipt.verification["conversation_ids_checked"] == 1, receipt.verification
    path = tmp_path / "erased.zip"
    path.write_bytes(b"".join(bundle.prepare("customer:99").chunks()))
    report = verify_path(path, pinned_keys=_pinned())
    assert report.ok, _problems(report)
    [erased] = [c for c in report.conversations if c.erased_by]
    assert (erased.erased_by, erased.conversation_id) == (str(receipt.pk), str(convo.pk))
    assert (erased.messages, erased.checkpoints) == (4, 1) and erased.head["signature"] == heads_signed
    assert b"x0@y.z" not in path.read_bytes()
    # A forged chain hash in what the request kept is a break, not an erasure.
    _rewrite_zip(path, lambda m: {**m, "erased_rows.jsonl": m["erased_rows.jsonl"].replace(
        b'"position": 2, "commitment": "', b'"position": 2, "commitment": "00')})
    assert "the erased message chain breaks at #2" in _problems(verify_path(path, pinned_keys=_pinned()))


def verify_cron_run() -> str:
    from django.core.management import call_command

    from conversations.proofs.models import SignedHead

    call_command("sign_heads", "--quiet")
    return SignedHead.objects.order_by("-id").values_list("signature", flat=True).first()
