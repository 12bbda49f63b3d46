"""What an operator relies on around the app: tracebacks in the log, private files,
cookie and transport settings. Run in subprocesses where the behaviour is the
process's own (logging set up from settings, files created by a fresh start)."""

import os
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def run_python(code: str, tmp_path, **env) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "DEBUG")}
    environment.update({"DJANGO_SETTINGS_MODULE": "memoryui.settings", "PYTHONPATH": str(ROOT),
                        "MEMORYUI_DATA_DIR": str(tmp_path / "data"), **env})
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT, env=environment,
                          capture_output=True, text=True, timeout=120)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_an_unhandled_exception_is_logged_with_its_traceback_to_stderr(tmp_path):
    result = run_python("""
        import sys, types
        import django
        django.setup()
        from django.conf import settings
        from django.test import Client
        from django.urls import path

        def boom(request):
            raise RuntimeError("boom-7f3a")

        urls = types.ModuleType("boom_urls")
        urls.urlpatterns = [path("boom/", boom)]
        sys.modules["boom_urls"] = urls
        settings.ROOT_URLCONF = "boom_urls"
        settings.ALLOWED_HOSTS = ["testserver"]
        print(Client(raise_request_exception=False).get("/boom/?subject=cust-secret-42").status_code)
    """, tmp_path)
    assert result.stdout.strip() == "500", result.stderr
    assert "Traceback (most recent call last)" in result.stderr
    assert "RuntimeError: boom-7f3a" in result.stderr and "/boom/" in result.stderr
    # The log names the path, never the query string (it can hold a subject).
    assert "cust-secret-42" not in result.stderr


def test_the_data_folder_and_the_database_files_are_the_owners_alone(tmp_path):
    data = tmp_path / "data"
    data.mkdir(mode=0o755)
    os.chmod(data, 0o755)
    result = run_python("""
        import django
        django.setup()
        from django.db import connection
        with connection.cursor() as cursor:
            cursor.execute("CREATE TABLE t (x TEXT)")
            cursor.execute("INSERT INTO t VALUES ('hello')")
        import os, stat
        from django.conf import settings
        name = str(settings.DATABASES["default"]["NAME"])
        for suffix in ("", "-wal", "-shm"):
            print(suffix or "main", oct(stat.S_IMODE(os.stat(name + suffix).st_mode)))
    """, tmp_path)
    assert result.returncode == 0, result.stderr
    modes = dict(line.split() for line in result.stdout.split("\n") if line)
    assert modes == {"main": "0o600", "-wal": "0o600", "-shm": "0o600"}
    assert mode(data) == 0o700
    assert mode(data / "secret_key") == 0o600


def test_database_files_an_older_version_left_readable_are_tightened(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    old = data / "memoryui.sqlite3"
    import sqlite3

    db = sqlite3.connect(old)
    db.execute("CREATE TABLE t (x)")
    db.commit()
    db.close()
    os.chmod(old, 0o644)
    result = run_python("""
        import django
        django.setup()
        from django.db import connection
        connection.ensure_connection()
    """, tmp_path)
    assert result.returncode == 0, result.stderr
    assert mode(old) == 0o600


@pytest.mark.parametrize("name", ["gunicorn_conf.py"])
def test_the_server_access_log_leaves_out_query_strings_and_referers(name):
    namespace: dict = {}
    exec((ROOT / "memoryui" / name).read_text(), namespace)
    fmt = namespace["access_log_format"]
    assert "%(U)s" in fmt
    for leaky in ("%(r)s", "%(q)s", "%(f)s", "%({"):
        assert leaky not in fmt
    assert namespace["limit_request_line"] > 4096
