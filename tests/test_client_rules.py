"""Both clients carry the server's message kinds and request limits as tools/client_rules.py
writes them from conversations/message_schema.py: a hand edit, or a server change without
a re-run of the generator, fails here (and `make lint`'s `--check`)."""

import shutil
import sys
from pathlib import Path

import pytest

from conversations.message_schema import CHAT_KINDS, JOURNAL_KINDS, KINDS

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import client_rules  # noqa: E402

pytestmark = pytest.mark.database_independent


@pytest.fixture(scope="module")
def rules():
    return client_rules.server_rules()


@pytest.mark.parametrize("name", sorted(client_rules.CLIENTS))
def test_each_clients_generated_block_is_what_the_server_defines(name, rules):
    comment, render = client_rules.CLIENTS[name]
    stale = client_rules.update(ROOT / name, comment, render(rules), write=False)
    assert not stale, f"{name}: its generated block differs from the server's; run python tools/client_rules.py"


def test_the_python_client_uses_the_servers_kinds():
    from memoryui_client import formats

    assert (formats.CHAT_KINDS, formats.JOURNAL_KINDS, formats.KINDS) == (CHAT_KINDS, JOURNAL_KINDS, KINDS)


@pytest.mark.parametrize("name", sorted(client_rules.CLIENTS))
def test_the_generator_rewrites_a_block_edited_by_hand(name, rules, tmp_path):
    comment, render = client_rules.CLIENTS[name]
    committed = (ROOT / name).read_text()
    edited = tmp_path / Path(name).name
    edited.write_text(committed.replace('"woke"]' if name.endswith(".ts") else '"woke")', '"slept"', 1))
    assert edited.read_text() != committed

    assert client_rules.update(edited, comment, render(rules), write=True)
    assert edited.read_text() == committed


def test_the_check_names_the_stale_client_and_fails(tmp_path, monkeypatch, capsys):
    for name in client_rules.CLIENTS:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / name, tmp_path / name)
    stale = tmp_path / client_rules.TYPESCRIPT
    stale.write_text(stale.read_text().replace("export const BATCH_MAX = ", "export const BATCH_MAX = 1"))
    monkeypatch.setattr(client_rules, "ROOT", tmp_path)

    assert client_rules.main(["--check"]) == 1
    assert capsys.readouterr().out.startswith(client_rules.TYPESCRIPT + ": its generated block differs")
    assert client_rules.main([]) == 0
    assert client_rules.main(["--check"]) == 0
