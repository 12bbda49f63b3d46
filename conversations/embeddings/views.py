"""The admin page of embeddings: which model is active, and how far its vectors have got.

The worker embeds every project's rows and its counts are the whole server's: superusers only."""

import os

from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST, require_safe

from conversations.roles import superuser_required

from . import embedders, worker


@require_safe
@superuser_required
def progress(request):
    embedder = embedders.active()
    return render(request, "embeddings/progress.html", {
        "model": embedder.name, "rows": worker.progress(), "state": worker.state,
        "endpoint": getattr(embedder, "url", ""),
        # Under gunicorn the loop runs in a process of its own (memoryui/gunicorn_conf.py):
        # this process's thread is then idle by design, not stopped.
        "own_process": bool(os.environ.get("MEMORYUI_EMBEDDER_PROCESS")),
    })


@require_POST
@superuser_required
def start(request):
    worker.start()
    return redirect("embeddings:progress")
