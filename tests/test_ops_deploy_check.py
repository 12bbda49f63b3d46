"""`manage.py check --deploy` is clean under the production settings the README documents
(README, "Running it in production"); without them Django names what is missing."""

import secrets
import subprocess
import sys

from tests.retention_support import ROOT, subprocess_env

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
