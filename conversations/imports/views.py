"""The admin page to import a transcript: upload, see what it would create, confirm.

The preview is a dry run of the real import (same parser, same store calls, rolled
back), so what it shows is what confirming writes. The uploaded file waits in the
data folder under a random token between preview and confirm. Works without
JavaScript; with htmx the preview replaces only its panel.
"""

import secrets
from pathlib import Path

from django.conf import settings
from django.shortcuts import render
from django.urls import reverse
from django.utils.cache import patch_vary_headers
from django.views.decorators.http import require_http_methods

from conversations.errors import StoreError
from conversations.formats import CHOICES
from conversations.retention.views import admin_required

from . import importer
from .textfile import Text

MAX_UPLOAD = 512 * 1024 * 1024


def _folder() -> Path:
    folder = Path(settings.DATA_DIR) / "uploads"
    folder.mkdir(exist_ok=True, mode=0o700)
    return folder


def _token_path(token: str) -> Path | None:
    if not token or len(token) != 32 or not all(c in "0123456789abcdef" for c in token):
        return None
    path = _folder() / f"{token}.upload"
    return path if path.exists() else None


def _page(request, context, status=200):
    name = "imports/import.html#import-result" if request.htmx and request.htmx.target == "import-result" \
        else "imports/import.html"
    response = render(request, name, {"formats": CHOICES, **context}, status=status)
    patch_vary_headers(response, ("HX-Request", "HX-Target"))
    return response


@require_http_methods(["GET", "POST"])
@admin_required
def import_page(request):
    if request.method == "GET":
        return _page(request, {"values": {"format": "auto"}})
    values = {k: request.POST.get(k, "").strip()[:200] for k in ("format", "namespace", "subject")}
    fmt = values["format"] or "auto"
    if fmt not in CHOICES:
        return _page(request, {"values": values, "error": "Choose one of the listed formats."}, status=422)
    actor = f"user:{request.user.get_username()}"
    token = request.POST.get("token", "")
    if request.POST.get("confirm") == "1":
        path = _token_path(token)
        if path is None:
            return _page(request, {"values": values, "error": "That upload has expired or was already imported; "
                                                                "upload the file again."}, status=422)
        text = Text.open(str(path))
        try:
            result = importer.import_text(text, format=fmt, namespace=values["namespace"] or None,
                                          subject=values["subject"], actor=actor, path=request.POST.get("name"))
        except StoreError as exc:
            return _page(request, {"values": values, "error": exc.message}, status=exc.status)
        finally:
            text.close()
            path.unlink(missing_ok=True)
        return _page(request, {"values": values, "result": result, "done": True,
                               "links": _links(result)})
    upload = request.FILES.get("file")
    if upload is None:
        return _page(request, {"values": values, "error": "Choose a file to import."}, status=422)
    if upload.size > MAX_UPLOAD:
        return _page(request, {"values": values, "error": "The file is larger than 512 MB."}, status=413)
    # Kept on disk between preview and confirm, and read from there a block at a time.
    token = secrets.token_hex(16)
    path = _folder() / f"{token}.upload"
    with path.open("wb") as f:
        for piece in upload.chunks():
            f.write(piece)
    text = Text.open(str(path))
    try:
        result = importer.import_text(text, format=fmt, namespace=values["namespace"] or None,
                                      subject=values["subject"], actor=actor, dry_run=True, path=upload.name)
    except StoreError as exc:
        path.unlink(missing_ok=True)
        return _page(request, {"values": values, "error": exc.message}, status=exc.status)
    finally:
        text.close()
    return _page(request, {"values": {**values, "format": result.format}, "result": result, "token": token,
                           "name": upload.name})


def _links(result):
    return [{"title": c["title"] or "Untitled", "url": reverse("conversation", args=[c["id"]]), **c}
            for c in result.created + result.appended]
