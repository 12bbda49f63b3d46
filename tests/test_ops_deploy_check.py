"""`manage.py check --deploy` is clean under the production settings the README documents
(README, "Running it in production"); without them Django names what is missing, and on
PostgreSQL it warns when row-level security would not apply to the application's role."""

import os
import secrets
import subprocess
import sys

import pytest
from django.db import connection

from conversations import deploy_checks
from tests.retention_support import ROOT, subprocess_env
from tests.rls_support import django_connection_as_app_role

# The README's production block, as environment variables.
PRODUCTION = {
    "DEBUG": "0",
    "SECRET_KEY": secrets.token_urlsafe(50),
    "ALLOWED_HOSTS": "memory.example.org",
    "CSRF_TRUSTED_ORIGINS": "https://memory.example.org",
    "MEMORYUI_HTTPS": "1",
    "MEMORYUI_HSTS_INCLUDE_SUBDOMAINS": "1",
    "MEMORYUI_HSTS_PRELOAD": "1",
    "MEMORYUI_PROXY_SSL_HEADER": "X-Forwarded-Proto",
    "MEMORYUI_CLIENT_IP_HEADER": "X-Forwarded-For",
    "MEMORYUI_LOG_FORMAT": "json",
    "MEMORYUI_METRICS_TOKEN": secrets.token_urlsafe(32),
}


def check_deploy(tmp_path, **env) -> subprocess.CompletedProcess:
    # A production environment: nothing of the test run's own (DJANGO_ALLOW_ASYNC_UNSAFE, …).
    base = {k: v for k, v in subprocess_env().items()
            if k in ("PATH", "HOME", "LANG", "DJANGO_SETTINGS_MODULE", "PYTHONPATH")}
    base.update(MEMORYUI_DATA_DIR=str(tmp_path), **env)
    return subprocess.run([sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
                          cwd=ROOT, env=base, capture_output=True, text=True, timeout=120)


def test_it_is_clean_under_the_documented_production_settings(tmp_path):
    done = check_deploy(tmp_path, **PRODUCTION)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "System check identified no issues" in done.stdout, done.stdout + done.stderr


def test_it_names_what_is_missing_without_them(tmp_path):
    done = check_deploy(tmp_path)
    assert done.returncode != 0
    for check in ("security.W004", "security.W008", "security.W012", "security.W016"):
        assert check in done.stderr, done.stderr


@pytest.mark.postgresql_only
@pytest.mark.django_db
def test_it_warns_when_the_application_connects_to_postgresql_as_a_superuser(tmp_path):
    # The tests connect as a superuser: the very setup the check is there to catch.
    settings = connection.settings_dict
    url = f"postgres://{settings.get('USER') or ''}@{settings.get('HOST') or ''}/{settings['NAME']}"
    done = check_deploy(tmp_path, **PRODUCTION, DATABASE_URL=url,
                        **{k: os.environ[k] for k in ("PGPORT", "PGHOST", "PGUSER") if k in os.environ})
    assert done.returncode != 0
    assert "memoryui.W001" in done.stderr and "docs/OPERATIONS.md" in done.stderr, done.stderr
    assert "security.W" not in done.stderr  # nothing else: the documented settings stay clean


@pytest.mark.postgresql_only
@pytest.mark.django_db
def test_it_says_nothing_of_a_role_row_level_security_applies_to():
    assert [w.id for w in deploy_checks.check_row_level_security_applies()] == [deploy_checks.W001]
    with django_connection_as_app_role():
        assert deploy_checks.check_row_level_security_applies() == []


@pytest.mark.postgresql_only
@pytest.mark.django_db
def test_under_the_policies_a_search_for_a_word_reads_the_fulltext_index():
    """Search migration 0009 declares `tsvector @@ tsquery` leak-proof (the tests migrate as a
    superuser): under row-level security the planner may then use the index on the words
    instead of reading every row of the project. Without it, --deploy says so (W002)."""
    assert deploy_checks.check_fulltext_search_uses_its_index() == []
    with django_connection_as_app_role(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL memoryui.project = '1'")
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("EXPLAIN SELECT 1 FROM conversations_message m "
                       "WHERE m.search_tsv @@ to_tsquery('simple', 'kumquat')")
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "search_tsv" in plan and "Index" in plan, plan
    with connection.cursor() as cursor:
        cursor.execute("ALTER FUNCTION pg_catalog.ts_match_vq(tsvector, tsquery) NOT LEAKPROOF")
    assert [w.id for w in deploy_checks.check_fulltext_search_uses_its_index()] == [deploy_checks.W002]


@pytest.mark.postgresql_only
@pytest.mark.django_db
def test_it_asks_for_old_wal_segments_to_be_removed_not_recycled(monkeypatch):
    """PostgreSQL's default keeps old WAL segments with their contents (this cluster's too):
    --deploy says so (W003), and says nothing once they are removed at each checkpoint."""
    with connection.cursor() as cursor:
        cursor.execute("SHOW wal_recycle")
        recycled = cursor.fetchone()[0] == "on"
    assert deploy_checks.wal_recycled() is recycled
    assert [w.id for w in deploy_checks.check_old_wal_is_removed()] == ([deploy_checks.W003] if recycled else [])
    monkeypatch.setattr(deploy_checks, "wal_recycled", lambda: False)
    assert deploy_checks.check_old_wal_is_removed() == []
    monkeypatch.setattr(deploy_checks, "wal_recycled", lambda: True)
    warning, = deploy_checks.check_old_wal_is_removed()
    assert "wal_recycle = off" in warning.hint and "docs/operators.md" in warning.hint
