"""The admin page to import a transcript: upload, see what it would create, confirm.

The preview is a dry run of the real import (same parser, same store calls, rolled
back), so what it shows is what confirming writes. The uploaded file waits in the
data folder under a random token between preview and confirm, for a limited time
(uploads.py). Several files may come at once, or a zip of a project folder (archives.py):
each transcript is an upload of its own, previewed in order and confirmed together.
Works without JavaScript; with htmx the preview replaces only its panel.
"""

import json
from dataclasses import dataclass

from django.conf import settings
from django.shortcuts import render
from django.utils.cache import patch_vary_headers
from django.views.decorators.http import require_http_methods

from conversations.errors import InvalidInput, StoreError
from conversations.formats import CHOICES
from conversations.formats.base import Problem
from conversations.retention.pruning import default_retention_days
from conversations.roles import admin_required

from . import archives, containers, importer, subagents, uploads
from .result import ImportResult
from .textfile import Text

MAX_UPLOAD = settings.MEMORYUI_MAX_UPLOAD_BYTES


def _page(request, context, status=200):
    name = "imports/import.html#import-result" if request.htmx and request.htmx.target == "import-result" \
        else "imports/import.html"
    response = render(request, name, {"formats": CHOICES, **context}, status=status)
    patch_vary_headers(response, ("HX-Request", "HX-Target"))
    return response


MAX_FILES = archives.MAX_MEMBERS


@dataclass
class FileResult:
    """One file of a batch: its name (a zip member's path inside the zip), token, result."""

    name: str
    token: str = ""
    result: ImportResult | None = None
    sidecar: dict | None = None  # a Claude Code subagent's .meta.json, read with it


def _totals(files: list[FileResult]) -> dict:
    results = [f.result for f in files if f.result is not None]
    return {
        "created": sum(len(r.created) for r in results), "appended": sum(len(r.appended) for r in results),
        "messages": sum(r.messages for r in results), "checkpoints": sum(r.checkpoints for r in results),
        "entries": sum(r.entries_added for r in results), "problems": sum(len(r.problems) for r in results),
        "unchanged": all(r.unchanged or r.empty for r in results),
        "formats": sorted({r.format for r in results if r.format}),
        "empty": sum(r.empty for r in results),
        "older": sum(len(r.older_than_retention) for r in results),
        "pinned": sum(len(r.pinned) for r in results),
    }


def _context(values, files: list[FileResult], **extra) -> dict:
    one = files[0].result if len(files) == 1 else None
    return {"values": values, "files": files, "totals": _totals(files), "result": one,
            "name": files[0].name if len(files) == 1 else "", "retention_days": default_retention_days(), **extra}


@require_http_methods(["GET", "POST"])
@admin_required
def import_page(request):
    if request.method == "GET":
        return _page(request, {"values": {"format": "auto"}})
    values = {k: request.POST.get(k, "").strip()[:200] for k in ("format", "namespace", "subject")}
    values["allow_empty"] = request.POST.get("allow_empty") == "1"
    fmt = values["format"] or "auto"
    if fmt not in CHOICES:
        return _page(request, {"values": values, "error": "Choose one of the listed formats."}, status=422)
    actor = f"user:{request.user.get_username()}"
    if request.POST.get("confirm") == "1":
        return _confirm(request, values, fmt, actor)
    given = request.FILES.getlist("file")
    if not given:
        return _page(request, {"values": values, "error": "Choose a file to import."}, status=422)
    if sum(u.size for u in given) > MAX_UPLOAD:
        return _page(request, {"values": values, "error": "The files are larger than 512 MB."}, status=413)
    # Each preview also clears the uploads nobody confirmed in time, so they never pile up between prunes.
    uploads.remove_expired()
    # Kept on disk between preview and confirm, one upload per transcript, read from there a block at a time.
    try:
        files = _save_all(given)
    except StoreError as exc:
        return _page(request, {"values": values, "error": exc.message}, status=exc.status)
    if not files:
        return _page(request, {"values": values, "error": "The zip holds no transcript (.jsonl, .json, an Aider "
                                                            "history or an OpenCode database)."},
                     status=422)
    for f in files:
        if f.result is not None:
            continue  # left out when the zip was taken apart, with why
        try:
            f.result = _preview_one(f, fmt=fmt, values=values, actor=actor)
        except StoreError as exc:
            _remove(files)
            where = f"{f.name}: " if len(files) > 1 else ""
            return _page(request, {"values": values, "error": where + exc.message}, status=exc.status)
        except BaseException:
            _remove(files)  # a failed preview has nothing to confirm
            raise
    for f in files:
        if f.result.unchanged or f.result.empty:
            # Nothing to confirm in it: the file has served its purpose.
            uploads.remove(uploads.folder() / f"{f.token}{uploads.UPLOAD}")
            f.token = ""
    _mark_batch_parents(files)
    formats = _totals(files)["formats"]
    return _page(request, _context({**values, "format": formats[0] if len(formats) == 1 else fmt}, files))


def _save_all(given) -> list[FileResult]:
    """Every upload, a zip taken apart (archives.py), what belongs together put together and
    a database taken apart (containers.py), saved as one upload per transcript; a refused zip
    or a batch over the limit leaves none of them."""
    files: list[FileResult] = []
    budget = archives.Budget(MAX_UPLOAD)
    try:
        plain = {}
        for upload in given:
            if archives.is_zip(upload):
                archive, members = archives.open_archive(upload, max_bytes=MAX_UPLOAD)
                with archive:
                    for name, body, sidecar in containers.pieces_of_archive(
                            archive, members, lambda m, archive=archive: archives.read_member(archive, m, budget)):
                        _save_piece(files, name, body, sidecar)
            else:
                budget.take(upload.size)
                plain[upload.name] = upload
            if len(files) > MAX_FILES:
                raise InvalidInput(f"at most {MAX_FILES} files are taken at once", field="file")
        for name, upload in plain.items():
            if containers.is_sidecar(name):
                continue  # read with the transcript it belongs to, below
            if name == containers.CLINE_HISTORY and "ui_messages.json" in plain:
                body = containers.cline_bundle(upload.read(), plain["ui_messages.json"].read(), None)
                _save_piece(files, name, body, None)
                continue
            sidecar = None
            if name.endswith(".jsonl") and name[: -len(".jsonl")] + ".meta.json" in plain:
                sidecar = _json_object(plain[name[: -len(".jsonl")] + ".meta.json"].read())
            _save_piece(files, name, upload.chunks(), sidecar)
            if len(files) > MAX_FILES:
                raise InvalidInput(f"at most {MAX_FILES} files are taken at once", field="file")
    except BaseException:
        _remove(files)
        raise
    return files


def _json_object(raw: bytes) -> dict | None:
    try:
        obj = json.loads(raw)
    except ValueError:
        return None
    return obj if isinstance(obj, dict) else None


def _save_piece(files: list[FileResult], name: str, body, sidecar: dict | None) -> None:
    """One transcript saved as an upload; a database (an OpenCode one) as one upload per session;
    a file left out, with why."""
    if sidecar and sidecar.get("skipped"):
        files.append(FileResult(name=name, result=ImportResult(format="", source_key="", unchanged=True, problems=[
            Problem(None, f"skipped: {sidecar['skipped']}")])))
        return
    files.append(FileResult(name=name, sidecar=sidecar if sidecar and "database" not in sidecar else None))
    files[-1].token, path = uploads.save([body] if isinstance(body, bytes) else body)
    if (sidecar and sidecar.get("database")) or containers.is_sqlite(path):
        database = files.pop()
        try:
            for doc in containers.opencode_database(path):
                sid = json.loads(doc)["info"]["id"]
                files.append(FileResult(name=f"{name}/{sid}.json"))
                files[-1].token, _path = uploads.save([doc])
        finally:
            uploads.remove(path)
            database.token = ""


def _remove(files: list[FileResult]) -> None:
    for f in files:
        if f.token:
            uploads.remove(uploads.folder() / f"{f.token}{uploads.UPLOAD}")


def _preview_one(f: FileResult, *, fmt: str, values: dict, actor: str) -> ImportResult:
    text = Text.open(str(uploads.folder() / f"{f.token}{uploads.UPLOAD}"))
    try:
        result = importer.import_text(text, format=fmt, namespace=values["namespace"] or None,
                                      subject=values["subject"], actor=actor, dry_run=True, path=f.name,
                                      allow_empty=values["allow_empty"], sidecar=f.sidecar)
    finally:
        text.close()
    touched = [c.get("id") for c in result.created + result.appended + result.present + result.linked]
    uploads.record(f.token, subject=values["subject"], conversation_ids=touched + [result.conversation_id],
                   sidecar=f.sidecar)
    return result


def _confirm(request, values, fmt, actor):
    tokens, names = request.POST.getlist("token"), request.POST.getlist("name")
    paths = [uploads.find(token) for token in tokens]
    if not tokens or any(p is None for p in paths):
        # Nothing of the batch is imported: every file waits, or none is taken.
        return _page(request, {"values": values, "error": "That upload has expired or was already imported; "
                                                            "upload the file again."}, status=422)
    files = [FileResult(name=names[i] if i < len(names) else "", token=t) for i, t in enumerate(tokens)]
    pin_old = request.POST.get("pin_older") == "1"
    for f, path in zip(files, paths, strict=True):
        text = Text.open(str(path))
        retry_after = None
        try:
            f.result = importer.import_text(text, format=fmt, namespace=values["namespace"] or None,
                                            subject=values["subject"], actor=actor, path=f.name or None,
                                            pin_older_than_retention=pin_old, allow_empty=values["allow_empty"],
                                            sidecar=uploads.sidecar(f.token))
        except StoreError as exc:
            done = [g for g in files if g.result is not None]
            message = (f"{f.name}: " if len(files) > 1 else "") + exc.message
            if done:
                message += f" ({len(done)} file{'s' if len(done) != 1 else ''} before it imported)"
            response = _page(request, {"values": values, "error": message}, status=exc.status)
            retry_after = exc.retry_after  # the same file is being imported right now: confirming later works
            if retry_after:
                response["Retry-After"] = str(retry_after)
            return response
        finally:
            text.close()
            if not retry_after:
                uploads.remove(path)  # the import has it (or refused it): the file's purpose is over
    return _page(request, _context(values, files, done=True))


def _mark_batch_parents(files: list[FileResult]) -> None:
    """A preview is a dry run per file, so a subagent whose session is another file of the
    batch looks unlinked: say it will be linked to that session on confirming."""
    sessions = {f.result.source_key for f in files if f.result is not None}
    for f in files:
        for c in f.result.created if f.result is not None else ():
            key = subagents.parse_key(f.result.source_key) if c.get("key") == "main" else None
            if key is not None and not c.get("parent_id") and key.session in sessions:
                c["session_in_batch"] = True
