"""Login throttling: a few failed logins per account and per address, then a pause.

Counted in the database, so every gunicorn worker (and every server behind one
database) sees the same counts. While an account or an address is over its limit
no password is checked for it, the right one included; the pause ends when the
oldest failure inside the window ages out. A successful login clears the
account's failures (not the address's).

An attempt is counted before its password is checked, not after: counting after
let concurrent attempts all read "under the limit" and all be checked (17 of 40
against a limit of 10). `reserve_attempt` counts and records the attempt as a
failure in one transaction that no other reservation overlaps (SQLite's write
lock, taken at BEGIN IMMEDIATE; on PostgreSQL a transaction-level advisory lock),
so at most the limit's worth of passwords is ever checked. The slow password
hash runs after that transaction, holding no lock; a success then clears the
account, its own reservation included.

Limits (settings, from the environment): MEMORYUI_LOGIN_FAILURES_PER_USER (10),
MEMORYUI_LOGIN_FAILURES_PER_IP (30: offices share an address) within
MEMORYUI_LOGIN_WINDOW_MINUTES (15).
"""

import hashlib
import hmac
import math
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from conversations.db import advisory_lock

from .models import LoginFailure


def _limits() -> tuple[int, int, timedelta]:
    return (settings.MEMORYUI_LOGIN_FAILURES_PER_USER, settings.MEMORYUI_LOGIN_FAILURES_PER_IP,
            timedelta(minutes=settings.MEMORYUI_LOGIN_WINDOW_MINUTES))


def username_key(username: str) -> str:
    normal = " ".join(str(username).split()).casefold()
    return hmac.new(settings.SECRET_KEY.encode(), normal.encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()


def client_ip(request) -> str:
    """REMOTE_ADDR, or behind a proxy the address it appended to the header named by
    MEMORYUI_CLIENT_IP_HEADER (the last entry: the one the proxy itself wrote)."""
    header = settings.MEMORYUI_CLIENT_IP_HEADER
    if header:
        forwarded = request.META.get("HTTP_" + header.upper().replace("-", "_"), "")
        last = forwarded.split(",")[-1].strip()
        if last:
            return last[:64]
    return (request.META.get("REMOTE_ADDR") or "unknown")[:64]


# The PostgreSQL advisory lock that queues reservations (any constant no other code uses).
_RESERVATION_LOCK = 0x6C6F67696E67  # "loging"


def reserve_attempt(*, username: str, ip: str) -> int:
    """0 when this attempt may check its password, and it is then already counted as a
    failure (a success clears it); otherwise the seconds until one may be tried, and
    nothing is counted."""
    per_user, per_ip, window = _limits()
    key = username_key(username)
    with transaction.atomic():
        advisory_lock(_RESERVATION_LOCK)
        now = timezone.now()
        LoginFailure.objects.filter(at__lt=now - window).delete()
        recent = LoginFailure.objects.filter(at__gte=now - window)
        waits = []
        for rows, limit in ((recent.filter(username_key=key), per_user), (recent.filter(ip=ip[:64]), per_ip)):
            times = list(rows.order_by("-at").values_list("at", flat=True)[:limit])
            if len(times) >= limit:
                waits.append((times[-1] + window - now).total_seconds())
        if waits:
            return max(1, math.ceil(max(waits)))
        LoginFailure.objects.create(at=now, username_key=key, ip=ip[:64])
    return 0


def clear_account(*, username: str) -> None:
    with transaction.atomic():
        LoginFailure.objects.filter(username_key=username_key(username)).delete()
