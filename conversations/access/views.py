"""The conversation access log, for admins: who opened which conversation, when."""

from django.shortcuts import render
from django.urls import reverse
from django.utils.cache import patch_vary_headers
from django.utils.http import urlencode
from django.views.decorators.http import require_safe

from conversations import keyset, params
from conversations.errors import NotFound
from conversations.models import Conversation, parse_conversation_id
from conversations.roles import admin_required

from .models import ConversationAccess

PAGE = 100


@require_safe
@admin_required
def access_log(request):
    qs = ConversationAccess.objects.recent()
    actor = conversation = ""
    error = None
    try:
        actor = params.text_param(request.GET, "actor", max_length=200)
        conversation = params.text_param(request.GET, "conversation", max_length=100)
        before = params.int_param(request.GET, "before", minimum=1)
    except params.BadParameter as exc:
        error, before = exc.message, None
    if actor:
        qs = qs.filter(actor=actor)
    if conversation:
        try:
            qs = qs.filter(conversation_id=parse_conversation_id(conversation))
        except NotFound:
            error = "conversation must be a conversation id"
    if before is not None:
        qs = qs.filter(id__lt=before)
    rows, more = ([], False) if error else keyset.take(qs, PAGE)
    next_url = None
    if more:
        query = {k: v for k, v in {"actor": actor, "conversation": conversation, "before": rows[-1].pk}.items() if v}
        next_url = reverse("access:log") + "?" + urlencode(query)
    titles = dict(Conversation.objects.live().filter(pk__in={r.conversation_id for r in rows})
                  .values_list("pk", "title"))
    for row in rows:
        row.live = row.conversation_id in titles
        row.title = titles.get(row.conversation_id) or ""
    response = render(request, "access/log.html", {
        "rows": rows, "next_url": next_url, "actor": actor, "conversation": conversation, "error": error,
        "tab": "access",
    }, status=400 if error else 200)
    patch_vary_headers(response, ("HX-Request",))
    return response
