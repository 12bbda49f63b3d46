"""What the backup and restore tests share: `manage` (a manage.py command in a subprocess, over
a database URL and a data folder), `need_pg_tools`, and the `fresh_database` fixture.

Registered for every test module by tests/conftest.py (`pytest_plugins`), like tests/helpers.py.
"""

import shutil
import subprocess
import sys
import uuid

import pytest
from django.db import connection

from tests.conftest import skip_or_fail
from tests.retention_support import ROOT, database_url, subprocess_env


def manage(*args, url: str, data_dir, **env) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=600, env=subprocess_env(DATABASE_URL=url, MEMORYUI_DATA_DIR=str(data_dir), **env))


def need_pg_tools():
    if connection.vendor != "sqlite":
        for tool in ("pg_dump", "pg_restore", "psql"):
            if not shutil.which(tool):
                skip_or_fail(f"{tool} is not installed")


@pytest.fixture
def fresh_database(tmp_path):
    """`fresh_database()`: an empty database of the kind under test, its URL; dropped afterwards on PostgreSQL."""
    made = []

    def make() -> str:
        if connection.vendor == "sqlite":
            return f"sqlite:///{tmp_path / f'restored-{len(made)}-{uuid.uuid4().hex[:6]}.sqlite3'}"
        name = f"{connection.settings_dict['NAME']}_restored_{uuid.uuid4().hex[:8]}"
        with connection.cursor() as cursor:
            cursor.execute(f'CREATE DATABASE "{name}"')
        made.append(name)
        return database_url().rsplit("/", 1)[0] + "/" + name

    yield make
    for name in made:
        with connection.cursor() as cursor:
            cursor.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
