"""Login throttling: a few failed logins per account and per address, then a pause
with a clear message (429), counted in the database so every worker agrees, and
counted before the password is checked so that concurrent attempts cannot outrun it."""

import http.client
import os
import re
import signal
import threading
from datetime import timedelta
from urllib.parse import urlencode

import pytest
from django.contrib.auth.hashers import PBKDF2PasswordHasher
from django.utils import timezone

from conversations.loginguard import guard
from conversations.loginguard.models import LoginFailure
from tests.retention_support import make_user
from tests.server_support import free_port, start_gunicorn

pytestmark = pytest.mark.django_db
PASSWORD = "pw-123456-right"


@pytest.fixture
def ann():
    return make_user("ann", "auditor", password=PASSWORD)


@pytest.fixture(autouse=True)
def _small_limits(settings):
    settings.MEMORYUI_LOGIN_FAILURES_PER_USER = 3
    settings.MEMORYUI_LOGIN_FAILURES_PER_IP = 5
    settings.MEMORYUI_LOGIN_WINDOW_MINUTES = 15


def attempt(client, username, password, ip="10.0.0.1"):
    return client.post("/login/", {"username": username, "password": password}, REMOTE_ADDR=ip)


def test_an_account_is_paused_after_its_failures_even_for_the_right_password(client, ann):
    for _ in range(3):
        assert attempt(client, "ann", "wrong").status_code == 200
    blocked = attempt(client, "ann", PASSWORD)
    assert blocked.status_code == 429
    assert "Too many failed logins" in blocked.content.decode() and int(blocked["Retry-After"]) > 800
    assert "_auth_user_id" not in client.session
    # Typed differently, still the same account.
    assert attempt(client, "  ANN ", PASSWORD, ip="10.0.0.2").status_code == 429


def test_the_pause_ends_when_the_failures_age_out(client, ann):
    for _ in range(3):
        attempt(client, "ann", "wrong")
    LoginFailure.objects.update(at=timezone.now() - timedelta(minutes=16))
    assert attempt(client, "ann", PASSWORD).status_code == 302
    assert not LoginFailure.objects.filter(username_key=guard.username_key("ann")).exists()


def test_an_address_is_paused_after_failures_for_many_accounts(client, ann):
    for i in range(5):
        attempt(client, f"nobody{i}", "wrong", ip="10.9.9.9")
    assert attempt(client, "ann", PASSWORD, ip="10.9.9.9").status_code == 429
    assert attempt(client, "ann", PASSWORD, ip="10.9.9.10").status_code == 302


def test_failures_keep_no_username_in_the_clear(client):
    attempt(client, "my-secret-password-typed-as-name", "x")
    row = LoginFailure.objects.get()
    assert "secret" not in row.username_key and len(row.username_key) == 64 and row.ip == "10.0.0.1"


def test_behind_a_proxy_the_address_it_appended_counts(client, ann, settings):
    settings.MEMORYUI_CLIENT_IP_HEADER = "X-Forwarded-For"
    for _ in range(5):
        client.post("/login/", {"username": "x", "password": "y"}, REMOTE_ADDR="10.0.0.254",
                    HTTP_X_FORWARDED_FOR="1.2.3.4, 192.0.2.7")
    assert set(LoginFailure.objects.values_list("ip", flat=True)) == {"192.0.2.7"}
    other = client.post("/login/", {"username": "ann", "password": PASSWORD}, REMOTE_ADDR="10.0.0.254",
                        HTTP_X_FORWARDED_FOR="192.0.2.8")
    assert other.status_code == 302


@pytest.mark.parametrize("username", ["a\x00b", "x" * 5000, "٣²"])
def test_hostile_usernames_are_failures_not_errors(client, username):
    assert client.post("/login/", {"username": username, "password": "x"}).status_code == 200
    assert LoginFailure.objects.count() == 1


STORM = 40


def _login_form(port: int) -> tuple[str, str]:
    """(the csrftoken cookie, the form's token), from GET /login/."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    conn.request("GET", "/login/")
    response = conn.getresponse()
    page = response.read().decode()
    conn.close()
    cookies = response.getheader("Set-Cookie") or ""
    assert response.status == 200 and "csrftoken=" in cookies, (response.status, response.getheaders(), page[:500])
    cookie = re.search(r"csrftoken=([^;]+)", cookies).group(1)
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)
    return cookie, token


@pytest.mark.django_db(transaction=True)
@pytest.mark.slow
def test_concurrent_wrong_passwords_across_workers_get_exactly_the_limit_checked(tmp_path):
    # The password hashed as production hashes it, so each check takes as long as it
    # does there and the attempts really overlap.
    user = make_user("ann", "auditor")
    hasher = PBKDF2PasswordHasher()
    user.password = hasher.encode(PASSWORD, hasher.salt())
    user.save(update_fields=["password"])
    port = free_port()
    server = start_gunicorn(port, tmp_path / "gunicorn.log", workers=3, threads=4,
                            MEMORYUI_LOGIN_FAILURES_PER_USER="10", MEMORYUI_LOGIN_FAILURES_PER_IP="1000",
                            MEMORYUI_LOGIN_WINDOW_MINUTES="15")
    answers, lock = [], threading.Lock()
    try:
        cookie, token = _login_form(port)
        start = threading.Barrier(STORM)

        def attempt_once(n, password=None):
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
            body = urlencode({"username": "ann", "password": password or f"wrong-{n}",
                              "csrfmiddlewaretoken": token})
            headers = {"Content-Type": "application/x-www-form-urlencoded", "Cookie": f"csrftoken={cookie}"}
            if password is None:
                start.wait(60)
            try:
                conn.request("POST", "/login/", body=body, headers=headers)
                response = conn.getresponse()
                text = response.read().decode()
                outcome = (response.status, "Too many failed logins" in text)
            except Exception as exc:  # reported below, so none can hide
                outcome = (None, repr(exc))
            finally:
                conn.close()
            return outcome

        def storm(n):
            outcome = attempt_once(n)
            with lock:
                answers.append(outcome)

        threads = [threading.Thread(target=storm, args=(n,)) for n in range(STORM)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(300)
        assert not any(t.is_alive() for t in threads), "a login attempt hung"
        # The right password now is refused too: the account is paused, not checked.
        right = attempt_once(-1, PASSWORD)
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=60)

    checked = [a for a in answers if a == (200, False)]  # the form again: a wrong password
    throttled = [a for a in answers if a == (429, True)]
    assert len(checked) == 10 and len(throttled) == STORM - 10, sorted(answers, key=str)
    assert LoginFailure.objects.filter(username_key=guard.username_key("ann")).count() == 10
    assert right == (429, True)
    log = (tmp_path / "gunicorn.log").read_text()
    assert "Traceback" not in log, log[-3000:]
