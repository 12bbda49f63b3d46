from django.contrib.auth.decorators import login_required
from django.shortcuts import render
from django.views.decorators.http import require_GET

from .models import Conversation


@require_GET
@login_required
def index(request):
    conversations = Conversation.objects.live().order_by("-last_activity_at", "-id")[:100]
    return render(request, "conversations/index.html", {"conversations": conversations})
