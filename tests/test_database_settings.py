"""The embedded SQLite database is opened with the durability and reclaim settings of docs/DESIGN.md."""

import sqlite3
import subprocess
import sys


def sqlite_env(tmp_path, **extra):
    """An environment for a child process using the embedded SQLite database in tmp_path,
    whatever database this test run uses."""
    return {"MEMORYUI_DATA_DIR": str(tmp_path), "PATH": "/usr/bin:/bin",
            "DJANGO_SETTINGS_MODULE": "memoryui.settings", **extra}


def test_the_embedded_database_runs_wal_full_sync_immediate_and_secure_delete(tmp_path):
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], env=sqlite_env(tmp_path), check=True)
    code = (
        "import django; django.setup(); from django.db import connection; c = connection.cursor(); "
        "print(*[c.execute('PRAGMA ' + p).fetchone()[0] for p in "
        "('journal_mode', 'synchronous', 'foreign_keys', 'secure_delete', 'busy_timeout', 'auto_vacuum')], "
        "connection.transaction_mode)"
    )
    out = subprocess.run([sys.executable, "-c", code], env=sqlite_env(tmp_path), capture_output=True, text=True,
                         check=True).stdout.split()
    journal, synchronous, foreign_keys, secure_delete, busy_timeout, auto_vacuum, mode = out
    assert journal == "wal"
    assert synchronous == "2"  # FULL: a returned append survives power loss
    assert foreign_keys == "1" and secure_delete == "1"
    assert int(busy_timeout) >= 5000
    assert auto_vacuum == "2"  # INCREMENTAL, set before the first table was created
    assert mode == "IMMEDIATE"


def test_a_fresh_data_folder_gets_a_private_secret_key_and_database(tmp_path):
    env = sqlite_env(tmp_path)
    code = (
        "import django; django.setup(); from django.conf import settings; "
        "print(settings.SECRET_KEY); print(settings.DEBUG); print(settings.DATABASES['default']['NAME'])"
    )
    first = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    second = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    key, debug, name = first.split()
    assert len(key) > 40 and first == second  # kept, not regenerated
    assert debug == "False"
    assert name == str(tmp_path / "memoryui.sqlite3")
    assert (tmp_path / "secret_key").stat().st_mode & 0o077 == 0


def test_database_url_selects_postgresql(tmp_path):
    env = sqlite_env(tmp_path, DATABASE_URL="postgres:///somewhere", SECRET_KEY="x" * 50,
                     ALLOWED_HOSTS="a.example,b.example")
    code = ("import django; django.setup(); from django.conf import settings; d = settings.DATABASES['default']; "
            "print(d['ENGINE'], d['NAME'], ','.join(settings.ALLOWED_HOSTS))")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    # Django's backend with a health check that makes no round trip (memoryui/postgresql/base.py).
    assert out.split() == ["memoryui.postgresql", "somewhere", "a.example,b.example"]


def test_pragmas_apply_to_a_raw_file_created_by_the_app(tmp_path):
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], env=sqlite_env(tmp_path), check=True)
    db = sqlite3.connect(tmp_path / "memoryui.sqlite3")
    assert db.execute("PRAGMA auto_vacuum").fetchone()[0] == 2
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    triggers = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")}
    assert {"message_no_update", "message_guard_delete", "checkpoint_no_update"} <= triggers
