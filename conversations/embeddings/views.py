"""The admin page of embeddings: which model is active, and how far its vectors have got.

The worker embeds every project's rows and its counts are the whole server's: superusers only."""

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
        "own_process": worker.runs_in_own_process(),
    })


@require_POST
@superuser_required
def start(request):
    if not worker.runs_in_own_process():  # it already runs; a loop here would load the model again
        worker.start()
    return redirect("embeddings:progress")
