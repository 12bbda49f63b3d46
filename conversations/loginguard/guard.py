"""Login throttling: a few failed logins per account and per address, then a pause.

Counted in the database, so every gunicorn worker (and every server behind one
database) sees the same counts. While an account or an address is over its limit
no password is checked for it, the right one included; the pause ends when the
oldest failure inside the window ages out. A successful login clears the
account's failures (not the address's).

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

from .models import LoginFailure


def _limits() -> tuple[int, int, timedelta]:
    return (int(getattr(settings, "MEMORYUI_LOGIN_FAILURES_PER_USER", 10)),
            int(getattr(settings, "MEMORYUI_LOGIN_FAILURES_PER_IP", 30)),
            timedelta(minutes=float(getattr(settings, "MEMORYUI_LOGIN_WINDOW_MINUTES", 15))))


def username_key(username: str) -> str:
    normal = " ".join(str(username).split()).casefold()
    return hmac.new(settings.SECRET_KEY.encode(), normal.encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()


def client_ip(request) -> str:
    """REMOTE_ADDR, or behind a proxy the address it appended to the header named by
    MEMORYUI_CLIENT_IP_HEADER (the last entry: the one the proxy itself wrote)."""
    header = getattr(settings, "MEMORYUI_CLIENT_IP_HEADER", "")
    if header:
        forwarded = request.META.get("HTTP_" + header.upper().replace("-", "_"), "")
        last = forwarded.split(",")[-1].strip()
        if last:
            return last[:64]
    return (request.META.get("REMOTE_ADDR") or "unknown")[:64]


def seconds_blocked(*, username: str, ip: str) -> int:
    """0 when a login may be tried; otherwise how long until it may."""
    per_user, per_ip, window = _limits()
    now = timezone.now()
    recent = LoginFailure.objects.filter(at__gte=now - window)
    waits = []
    for rows, limit in ((recent.filter(username_key=username_key(username)), per_user),
                        (recent.filter(ip=ip), per_ip)):
        times = list(rows.order_by("-at").values_list("at", flat=True)[:limit])
        if len(times) >= limit:
            waits.append((times[-1] + window - now).total_seconds())
    return max(1, math.ceil(max(waits))) if waits else 0


def record_failure(*, username: str, ip: str) -> None:
    _, _, window = _limits()
    now = timezone.now()
    with transaction.atomic():
        LoginFailure.objects.filter(at__lt=now - window).delete()
        LoginFailure.objects.create(at=now, username_key=username_key(username), ip=ip[:64])


def clear_account(*, username: str) -> None:
    with transaction.atomic():
        LoginFailure.objects.filter(username_key=username_key(username)).delete()
