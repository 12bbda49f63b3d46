"""The search page, and the find box of a conversation page (the same view, one
conversation, answering htmx with just the results)."""

from django.shortcuts import render
from django.utils.cache import patch_vary_headers
from django.utils.http import urlencode
from django.views.decorators.http import require_safe

from conversations import plugins
from conversations.errors import StoreError
from conversations.http import conversation_or_404
from conversations.message_schema import KINDS
from conversations.roles import reader_required

from . import meaning, ranked
from .params import parse_page, parse_search
from .reads import search_messages

FRAGMENTS = ("search-results", "search-more", "search-groups-more", "search-meaning-more", "find-results")


@require_safe
@reader_required
def search(request):
    kinds = request.GET.getlist("kind")
    form = {k: request.GET.get(k, "") for k in ("q", "subject", "namespace", "from", "to", "conversation", "order",
                                                "mode")}
    context = {"form": form, "kinds": [k for k in kinds if k in KINDS], "all_kinds": KINDS, "page": None,
               "error": None, "conversation": None, "results": None, "orders": ranked.ORDERS, "known_by_id": [],
               "modes": meaning.MODES, "meaning": None}
    status = 200
    if form["conversation"].strip():
        context["conversation"] = conversation_or_404(form["conversation"])
    if form["q"].strip() and not form["conversation"].strip() and not request.GET.get("cursor") \
            and not request.GET.get("page"):
        # A framework's id typed in the box (a thread, session, conversation or trace id):
        # the conversations it names, above the rows that mention it.
        context["known_by_id"] = plugins.find_by_framework_id(form["q"])
    if form["q"].strip() and form["mode"] in ("meaning", "both"):
        return _by_meaning(request, context, kinds)
    if form["q"].strip():
        try:
            parsed = parse_search(request.GET, kinds=kinds)
            order = ranked.parse_order(request.GET.get("order"))
            grouped = order == "relevance" and parsed.filters.conversation_id is None and not parsed.cursor
            if grouped:
                # Every conversation with hits, grouped, best first. Newest first (and a
                # search inside one conversation) stays the row list, in keyset pages.
                results = ranked.search_grouped(parsed.query, filters=parsed.filters,
                                                page=parse_page(request.GET.get("page")))
            else:
                page = search_messages(parsed.query, filters=parsed.filters, cursor=parsed.cursor, limit=parsed.limit)
        except StoreError as exc:
            context["error"], status = exc, 400
        else:
            if grouped:
                context["results"] = results
                if results.next_page:
                    params = [(k, v) for k, v in request.GET.items() if k not in ("page", "kind") and v]
                    params += [("kind", k) for k in context["kinds"]] + [("page", results.next_page)]
                    context["more_url"] = "?" + urlencode(params)
                return _render(request, context, status)
            context["page"] = page
            if page.next_cursor:
                params = [(k, v) for k, v in request.GET.items() if k not in ("cursor", "kind") and v]
                params += [("kind", k) for k in context["kinds"]] + [("cursor", page.next_cursor)]
                context["more_url"] = "?" + urlencode(params)
            context["first_page"] = not parsed.cursor
    return _render(request, context, status)


def _render(request, context, status):
    target = request.htmx.target if request.htmx else None
    name = f"search/search.html#{target}" if target in FRAGMENTS else "search/search.html"
    response = render(request, name, context, status=status)
    patch_vary_headers(response, ("HX-Request", "HX-Target"))
    return response


def _by_meaning(request, context, kinds):
    """mode=meaning or both: the nearest rows, best first, in pages of PAGE."""
    status = 200
    try:
        parsed = parse_search(request.GET, kinds=kinds, words=False)
        mode = meaning.parse_mode(request.GET.get("mode"))
        found = meaning.search(context["form"]["q"], filters=parsed.filters, mode=mode,
                               page=parse_page(request.GET.get("page"), maximum=meaning.MAX_PAGE))
    except StoreError as exc:
        context["error"], status = exc, 400
    else:
        context["meaning"] = found
        if found.next_page:
            params = [(k, v) for k, v in request.GET.items() if k not in ("page", "kind") and v]
            params += [("kind", k) for k in context["kinds"]] + [("page", found.next_page)]
            context["more_url"] = "?" + urlencode(params)
    return _render(request, context, status)
