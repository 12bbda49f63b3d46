"""The admin page to import a transcript: upload, see what it would create, confirm.

The preview is a dry run of the real import (same parser, same store calls, rolled
back), so what it shows is what confirming writes. The uploaded file waits in the
data folder under a random token between preview and confirm, for a limited time
(uploads.py). Works without JavaScript; with htmx the preview replaces only its panel.
"""

from django.conf import settings
from django.shortcuts import render
from django.urls import reverse
from django.utils.cache import patch_vary_headers
from django.views.decorators.http import require_http_methods

from conversations.errors import StoreError
from conversations.formats import CHOICES
from conversations.retention.views import admin_required

from . import importer, uploads
from .textfile import Text

MAX_UPLOAD = settings.MEMORYUI_MAX_UPLOAD_BYTES


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
        path = uploads.find(token)
        if path is None:
            return _page(request, {"values": values, "error": "That upload has expired or was already imported; "
                                                                "upload the file again."}, status=422)
        text = Text.open(str(path))
        retry_after = None
        try:
            result = importer.import_text(text, format=fmt, namespace=values["namespace"] or None,
                                          subject=values["subject"], actor=actor, path=request.POST.get("name"))
        except StoreError as exc:
            response = _page(request, {"values": values, "error": exc.message}, status=exc.status)
            retry_after = exc.retry_after  # the same file is being imported right now: confirming later works
            if retry_after:
                response["Retry-After"] = str(retry_after)
            return response
        finally:
            text.close()
            if not retry_after:
                uploads.remove(path)  # the import has it (or refused it): the file's purpose is over
        return _page(request, {"values": values, "result": result, "done": True,
                               "links": _links(result)})
    upload = request.FILES.get("file")
    if upload is None:
        return _page(request, {"values": values, "error": "Choose a file to import."}, status=422)
    if upload.size > MAX_UPLOAD:
        return _page(request, {"values": values, "error": f"The file is larger than {MAX_UPLOAD // 2**20} MB."}, status=413)
    # Each preview also clears the uploads nobody confirmed in time, so they never pile up between prunes.
    uploads.remove_expired()
    # Kept on disk between preview and confirm, and read from there a block at a time.
    token, path = uploads.save(upload.chunks())
    text = Text.open(str(path))
    try:
        result = importer.import_text(text, format=fmt, namespace=values["namespace"] or None,
                                      subject=values["subject"], actor=actor, dry_run=True, path=upload.name)
        touched = [c.get("id") for c in result.created + result.appended + result.present]
        uploads.record(token, subject=values["subject"], conversation_ids=touched + [result.conversation_id])
    except StoreError as exc:
        uploads.remove(path)
        return _page(request, {"values": values, "error": exc.message}, status=exc.status)
    except BaseException:
        uploads.remove(path)  # a failed preview has nothing to confirm
        raise
    finally:
        text.close()
    if result.unchanged:
        # Nothing to confirm (the page offers no button): the file has served its purpose.
        uploads.remove(path)
        token = ""
    return _page(request, {"values": {**values, "format": result.format}, "result": result, "token": token,
                           "name": upload.name})


def _links(result):
    return [{"title": c["title"] or "Untitled", "url": reverse("conversation", args=[c["id"]]), **c}
            for c in result.created + result.appended]
