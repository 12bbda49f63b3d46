"""The conversation page's helpers that load after it: live state, numbers, raw rows.

- `state`: what an open page polls every second to follow a conversation live. It is
  one tiny JSON object (rows, latest checkpoint, ledger version) with an ETag; the page
  sends If-None-Match and nearly every answer is an empty 304. No thread is held per
  open page: a poll is a few indexed lookups and returns at once.
- `usage`: the header's totals (this conversation and each fork's own replies) and the
  context chart, loaded after the first paint.
- `panel`: the header facts or the ledger panel, re-read when the state says they changed.
- `raw`: one row's stored text exactly as kept (the row's "Raw" toggle).
"""

from django.http import HttpResponse, HttpResponseNotModified, JsonResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_safe

from . import plugins
from . import usage as numbers
from .http import conversation_or_404, position_or_404
from .live import etag_of, state_of
from .models import Checkpoint, Conversation, Message
from .prices import money
from .roles import reader_required


@require_safe
@reader_required
def state(request, conversation_id):
    convo = conversation_or_404(conversation_id)
    body = state_of(convo)
    etag = etag_of(body)
    if etag in [t.strip() for t in request.headers.get("If-None-Match", "").split(",")]:
        response = HttpResponseNotModified()
    else:
        response = JsonResponse(body)
    response["ETag"] = etag
    return response


@require_safe
@reader_required
def usage(request, conversation_id):
    convo = conversation_or_404(conversation_id)
    checkpoints = list(Checkpoint.objects.of(convo.pk))
    children = list(Conversation.objects.live().filter(parent_id=convo.pk).order_by("created_at", "id")
                    .only("id", "title", "parent_id", "forked_from_position", "parent_relation", "created_at"))
    chart, totals = numbers.read(convo, checkpoints)
    numbers.lay_out(chart, children)
    forks = numbers.fork_totals(convo, [c for c in children if c.forked_from_position is not None])
    return render(request, "conversations/usage.html" if request.htmx else "conversations/usage_page.html", {
        "conversation": convo, "chart": chart, "totals": totals, "cost": money(totals.cost),
        "base": "" if request.htmx else reverse("conversation", args=[convo.pk]),
        "forks": [{**f, "cost": money(f["totals"].cost)} for f in forks],
        "dims": {"w": numbers.WIDTH, "h": numbers.HEIGHT, "left": numbers.PAD_L,
                 "right": numbers.WIDTH - numbers.PAD_R, "bottom": numbers.HEIGHT - numbers.PAD_B,
                 "top": numbers.PAD_T},
    })


PARTS = ("facts", "ledger")


@require_safe
@reader_required
def panel(request, conversation_id, part):
    if part not in PARTS:
        return HttpResponse(f"unknown part {part[:40]!r}; expected one of {', '.join(PARTS)}", status=404,
                            content_type="text/plain; charset=utf-8")
    convo = conversation_or_404(conversation_id)
    context = {"conversation": convo, "latest": Checkpoint.objects.latest_for(convo.pk)}
    if part == "ledger":
        context["ledger"] = plugins.ledger_panel(convo)
        return render(request, "ledger/panel.html", context)
    context["checkpoint_count"] = Checkpoint.objects.of(convo.pk).count()
    return render(request, "conversations/facts.html", context)


@require_safe
@reader_required
def raw(request, conversation_id, position):
    convo = conversation_or_404(conversation_id)
    position_or_404(convo, position)
    text = Message.objects.of(convo.pk).filter(position=position).values_list("content", flat=True).first()
    if text is None:
        return HttpResponse(f"position {position} was not found", status=404,
                            content_type="text/plain; charset=utf-8")
    response = HttpResponse(text, content_type="text/plain; charset=utf-8")
    response["X-Content-Type-Options"] = "nosniff"
    return response
