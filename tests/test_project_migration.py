"""The projects migration on a copy of a 100,000-message database, on the database this run uses.

A database at the state before projects (tests/project_migration_support.py: migrated
there from empty with Django's MigrationExecutor and filled as the code of that time left
it: messages with their hash chains, checkpoints, facts, keys, people in the role groups,
audit events, receipts, import sources, LangGraph threads, the ledger) is migrated forward
in a process of its own, on a throw-away SQLite file or PostgreSQL database beside the
suite's. Everything lands in `default`, untouched: every row, each person's strongest
role as a membership, the old key acting there; the append-only guards still refuse raw
SQL; ids are unique per project afterwards; every chain still verifies.
"""

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from urllib.parse import urlsplit

import psycopg
import pytest
from django.db import connection

from tests.conftest import skip_or_fail

ROOT = Path(__file__).resolve().parent.parent
MESSAGES = 100_000
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("before-projects")


@pytest.fixture(scope="module")
def copy_url(folder):
    """Where the copy lives: a new file beside the suite's SQLite, or a new database on the
    suite's PostgreSQL server, dropped afterwards."""
    if connection.vendor == "sqlite":
        yield f"sqlite:///{folder / 'before-projects.sqlite3'}"
        return
    settings = connection.settings_dict
    name = f"mui_before_projects_{uuid.uuid4().hex[:10]}"
    server = {"dbname": "postgres", "host": settings["HOST"] or None, "port": settings["PORT"] or None,
              "user": settings["USER"] or None, "password": settings["PASSWORD"] or None}
    try:
        with psycopg.connect(**{k: v for k, v in server.items() if v}, autocommit=True) as admin:
            admin.execute(f'CREATE DATABASE "{name}"')
    except psycopg.Error as exc:
        skip_or_fail(f"cannot create a database beside the suite's: {exc}")
    url = os.environ.get("DATABASE_URL", "postgres:///")
    yield urlsplit(url)._replace(path=f"/{name}").geturl()
    with psycopg.connect(**{k: v for k, v in server.items() if v}, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="module")
def migrated(copy_url, folder) -> dict:
    """The migration run once, in its own process; what it saw."""
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "DJANGO_SETTINGS_MODULE")}
    env.update(DATABASE_URL=copy_url, DJANGO_SETTINGS_MODULE="memoryui.settings", MEMORYUI_LOG_LEVEL="ERROR",
               MEMORYUI_DATA_DIR=str(folder / "data"), PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-m", "tests.project_migration_support", "--messages", str(MESSAGES)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-5000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["vendor"] == connection.vendor
    return seen


def test_the_projects_migration_puts_everything_into_default_and_keeps_every_guard(migrated):
    made, before, after = migrated["made"], migrated["before"], migrated["after"]
    old_ids = made["conversations"]
    assert made["messages"] == MESSAGES == before["counts"]["conversations_message"]

    # Every row is still there, and in `default`.
    assert migrated["projects"] == [[1, "default"]]
    for table, count in before["counts"].items():
        assert after["counts"][table] == count, table
    filled = [table for table, count in before["counts"].items() if count]
    for table, held in migrated["outside_default"].items():
        assert held["outside"] == 0, table
        if table in filled:
            assert held["in_default"] == before["counts"][table], table
    assert set(filled) >= {"conversations_conversation", "conversations_apikey", "conversations_auditevent",
                           "facts_fact", "facts_factaccess", "retention_deletionreceipt",
                           "access_conversationaccess", "imports_importsource", "frameworks_sessionsummary",
                           "langgraph_langgraphcheckpoint", "langgraph_langgraphwrite", "langgraph_langchainhistory"}

    # Whoever held a role holds it in `default` (the strongest, for two groups); a superuser is an admin.
    assert migrated["memberships"]["held"] == {"ann": ["default", "auditor"], "rev": ["default", "reviewer"],
                                               "boss": ["default", "admin"]}
    roles = migrated["memberships"]["roles_in_default"]
    assert roles["nobody"] == [] and "admin" in roles["root"]

    # The guards and triggers of before are all there, and refuse as before.
    assert set(before["triggers"]) <= set(after["triggers"])
    assert "conversation_project_immutable" in after["triggers"]
    for what, refusal in migrated["refused"].items():
        assert refusal is not None and refusal != "no row touched", what

    # The hash chains: the same bytes, and they verify (every conversation, the audit log).
    assert after["chains"] == before["chains"]
    verified = migrated["verified"]
    assert verified["ok"] and verified["counts"]["tampered"] == 0
    assert verified["counts"]["verified"] == len(old_ids) + 1  # and the other project's, made afterwards
    assert verified["rows"]["messages"] == MESSAGES + 1  # and the one appended through the old key
    assert verified["audit"][0] == "verified"


def test_the_old_key_acts_in_default_and_ids_are_unique_per_project_afterwards(migrated):
    old_ids = migrated["made"]["conversations"]
    assert migrated["key_project"] == 1
    assert migrated["listed"] == sorted(old_ids, reverse=True)[:len(migrated["listed"])]
    assert migrated["other_conversation"] not in migrated["listed"]
    assert migrated["search_hits"] == [[old_ids[0], 8]]
    assert migrated["recalled"] == ["Prefers email 0.", "Prefers email 1."]
    assert migrated["appended"] == [201, 500]  # the chain and the positions continue

    per_project = migrated["per_project"]
    assert per_project["default_again"] == [old_ids[0], False]  # in `default`: the old conversation
    assert migrated["other_conversation"] != old_ids[0]  # in another project: a new one
    for kind in ("import source", "langgraph checkpoint", "langchain history"):
        assert per_project[kind] == {"other": "created", "default": "refused"}, kind
