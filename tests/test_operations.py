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


def settings_in_a_fresh_process(tmp_path, **env) -> dict:
    result = run_python("""
        import json
        import django
        django.setup()
        from django.conf import settings
        names = ["SESSION_COOKIE_AGE", "SESSION_COOKIE_SECURE", "CSRF_COOKIE_SECURE", "SECURE_SSL_REDIRECT",
                 "SECURE_HSTS_SECONDS", "SECURE_HSTS_INCLUDE_SUBDOMAINS", "SECURE_PROXY_SSL_HEADER"]
        print(json.dumps({n: getattr(settings, n) for n in names}))
    """, tmp_path, **env)
    assert result.returncode == 0, result.stderr
    import json

    return json.loads(result.stdout)


def test_by_default_a_login_lasts_twelve_hours_and_cookies_are_not_https_only(tmp_path):
    found = settings_in_a_fresh_process(tmp_path)
    assert found["SESSION_COOKIE_AGE"] == 12 * 3600
    assert not found["SESSION_COOKIE_SECURE"] and not found["SECURE_SSL_REDIRECT"]
    assert found["SECURE_HSTS_SECONDS"] == 0 and found["SECURE_PROXY_SSL_HEADER"] is None


def test_behind_tls_one_switch_turns_on_secure_cookies_redirects_and_hsts(tmp_path):
    found = settings_in_a_fresh_process(tmp_path, MEMORYUI_HTTPS="1", MEMORYUI_PROXY_SSL_HEADER="X-Forwarded-Proto",
                                        MEMORYUI_SESSION_HOURS="1.5", MEMORYUI_HSTS_INCLUDE_SUBDOMAINS="1")
    assert found["SESSION_COOKIE_SECURE"] and found["CSRF_COOKIE_SECURE"] and found["SECURE_SSL_REDIRECT"]
    assert found["SECURE_HSTS_SECONDS"] == 31536000 and found["SECURE_HSTS_INCLUDE_SUBDOMAINS"]
    assert found["SECURE_PROXY_SSL_HEADER"] == ["HTTP_X_FORWARDED_PROTO", "https"]
    assert found["SESSION_COOKIE_AGE"] == 5400


def test_each_tls_setting_can_be_set_on_its_own(tmp_path):
    found = settings_in_a_fresh_process(tmp_path, MEMORYUI_HTTPS="1", MEMORYUI_SSL_REDIRECT="0",
                                        MEMORYUI_HSTS_SECONDS="0")
    assert found["SESSION_COOKIE_SECURE"] and not found["SECURE_SSL_REDIRECT"] and found["SECURE_HSTS_SECONDS"] == 0


@pytest.mark.django_db
def test_behind_a_tls_proxy_the_app_sends_hsts_and_a_secure_session_cookie(client, settings):
    from tests.retention_support import make_user

    settings.SECURE_HSTS_SECONDS = 31536000
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    settings.SESSION_COOKIE_SECURE = True
    settings.SECURE_SSL_REDIRECT = True
    assert client.get("/login/").status_code == 301  # plain HTTP goes to https
    page = client.get("/login/", headers={"X-Forwarded-Proto": "https"})
    assert page.status_code == 200 and page["Strict-Transport-Security"].startswith("max-age=31536000")
    make_user("ann", "auditor", password="pw-123456-x")
    login = client.post("/login/", {"username": "ann", "password": "pw-123456-x"},
                        headers={"X-Forwarded-Proto": "https"})
    assert login.status_code == 302
    assert login.cookies["sessionid"]["secure"] and login.cookies["sessionid"]["httponly"]


@pytest.mark.django_db
def test_pages_and_the_api_carry_the_content_security_policy(client):
    from conversations.middleware import CONTENT_SECURITY_POLICY

    for url in ("/login/", "/api/v1/conversations"):
        response = client.get(url)
        assert response["Content-Security-Policy"] == CONTENT_SECURITY_POLICY
    assert "script-src 'self'" in CONTENT_SECURITY_POLICY and "unsafe" not in CONTENT_SECURITY_POLICY


@pytest.mark.django_db
def test_exports_and_the_api_key_page_are_never_stored_by_a_cache(client):
    from conversations import api_keys, store
    from tests.retention_support import make_user

    client.force_login(make_user("boss", "admin"))
    convo = store.create_conversation(title="t", subject="cust:1")
    store.append_message(conversation_id=convo.pk, message={"kind": "user", "content": "hi"})
    _, secret = api_keys.create_api_key(name="k", scopes=["read"])
    downloads = [f"/conversations/{convo.pk}/export.{fmt}" for fmt in ("json", "jsonl", "markdown")]
    downloads += ["/admin/audit/export.jsonl"]
    for url in downloads:
        response = client.get(url)
        assert response.status_code == 200 and response["Cache-Control"] == "no-store", url
    api = client.get(f"/api/v1/conversations/{convo.pk}/export", headers={"Authorization": f"Bearer {secret}"})
    assert api.status_code == 200 and api["Cache-Control"] == "no-store"
    created = client.post("/keys/create", {"name": "agent", "scopes": ["read"]})
    assert created.status_code == 200 and b"mui_" in created.content
    assert "no-store" in created["Cache-Control"] and "no-store" in client.get("/keys/")["Cache-Control"]
