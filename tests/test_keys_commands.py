"""manage.py create_api_key and revoke_api_key."""

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from conversations import api_keys
from conversations.models import ApiKey

pytestmark = pytest.mark.django_db


def _run(*args) -> str:
    out = StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def test_it_creates_a_key_and_prints_the_secret_once():
    out = _run("create_api_key", "support-agent", "--scopes", "read,write")
    key = ApiKey.objects.get(name="support-agent")
    assert key.scopes == ["read", "write"]
    secret = out.strip().splitlines()[-1]
    assert secret.startswith(f"mui_{key.prefix}_")
    assert api_keys.authenticate_api_key(secret) == key
    assert secret not in str(ApiKey.objects.values().get())


def test_it_defaults_to_read_and_write():
    _run("create_api_key", "agent")
    assert ApiKey.objects.get().scopes == ["read", "write"]


@pytest.mark.parametrize("args, words", [
    (["x", "--scopes", "read,root"], "unknown scope root"),
    (["x", "--scopes", ""], "at least one scope"),
    (["  ", "--scopes", "read"], "name must not be blank"),
])
def test_it_refuses_bad_arguments(args, words):
    with pytest.raises(CommandError, match=words):
        _run("create_api_key", *args)
    assert ApiKey.objects.count() == 0


def test_it_revokes_by_prefix_id_or_secret():
    a, _ = api_keys.create_api_key(name="a", scopes=["read"])
    b, _ = api_keys.create_api_key(name="b", scopes=["read"])
    c, secret_c = api_keys.create_api_key(name="c", scopes=["read"])
    assert "Revoked API key 'a'" in _run("revoke_api_key", a.prefix)
    _run("revoke_api_key", str(b.pk))
    _run("revoke_api_key", secret_c)
    assert ApiKey.objects.filter(revoked_at__isnull=True).count() == 0
    assert api_keys.authenticate_api_key(secret_c) is None


def test_revoking_twice_says_so():
    a, _ = api_keys.create_api_key(name="a", scopes=["read"])
    _run("revoke_api_key", a.prefix)
    assert "already revoked" in _run("revoke_api_key", a.prefix)


@pytest.mark.parametrize("given", ["nope", "12345", "9" * 40])
def test_revoking_an_unknown_key_fails_clearly(given):
    with pytest.raises(CommandError, match="no API key"):
        _run("revoke_api_key", given)
