"""The admin page of embeddings: which model is active, and how far its vectors have got."""

from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST, require_safe

from conversations.roles import admin_required

from . import embedders, worker


@require_safe
@admin_required
def progress(request):
    embedder = embedders.active()
    return render(request, "embeddings/progress.html", {
        "model": embedder.name, "rows": worker.progress(), "state": worker.state,
        "endpoint": getattr(embedder, "url", ""),
    })


@require_POST
@admin_required
def start(request):
    worker.start()
    return redirect("embeddings:progress")
