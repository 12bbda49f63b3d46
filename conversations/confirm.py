"""One step of confirmation before every irreversible action, the same on every page.

An action that cannot be taken back (revoking a key, deleting a conversation,
carrying out a deletion request, invalidating a fact) acts only on a POST that
carries `confirm=yes`: the box a person ticks on the confirmation panel. A POST
without it, whether from a page's first form or sent straight at the URL, acts on
nothing and answers the panel instead (422), so the step cannot be skipped by
leaving the field out. Prune keeps its own form for the same rule, because its box
also carries the counts the admin saw (retention/views.py).

The panel is one partial, `partials/confirm.html` (element id `confirm`): it says
what the action acts on, what stops working, whether anything undoes it, and asks
for the tick. A page offers it through a link, `href` to the full confirmation page
and `hx-get` into its `#confirm` slot; `render_confirmation` answers either.
"""

from dataclasses import dataclass, field

from django.shortcuts import render

CONFIRM_FIELD = "confirm"
CONFIRM_VALUE = "yes"
# The status of the panel answered to a POST that did not confirm: nothing was done.
NOT_CONFIRMED = 422


@dataclass
class Confirmation:
    title: str
    # Where the confirmed form posts (the action's own URL).
    action: str
    button: str
    # Where Cancel goes: the page the person came from.
    cancel: str
    # What stops working, what is removed: one sentence each.
    consequences: list[str]
    # Which thing it is: (label, value) pairs shown above the consequences.
    details: list[tuple[str, str]] = field(default_factory=list)
    # Whether anything takes it back, in one sentence.
    undo: str = "Nothing undoes this."
    box: str = "I understand, and want to go ahead."
    # Fields the person fills in on the panel: dicts of name, label, value, required, placeholder.
    fields: list[dict] = field(default_factory=list)
    # Values carried through unchanged (name, value).
    hidden: list[tuple[str, str]] = field(default_factory=list)
    error: str = ""
    # The button's element id (pages and their tests find it by it).
    button_id: str = "confirm-action"


def confirmed(request) -> bool:
    """True only for a POST whose confirmation box was ticked."""
    return request.method == "POST" and request.POST.get(CONFIRM_FIELD) == CONFIRM_VALUE


def render_confirmation(request, confirmation: Confirmation, *, page: str = "confirm.html",
                        context: dict | None = None, status: int = 200):
    """The whole confirmation page, or only the panel when htmx asks for the `#confirm` slot."""
    context = {**(context or {}), "confirm": confirmation}
    if getattr(request, "htmx", False) and request.htmx.target == "confirm":
        response = render(request, "partials/confirm.html", context, status=status)
    else:
        response = render(request, page, context, status=status)
    response["Vary"] = "HX-Request"
    return response


def not_confirmed(request, confirmation: Confirmation, **kwargs):
    """The panel again, saying that nothing was done (a POST without the tick)."""
    confirmation.error = confirmation.error or "Tick the box to confirm: nothing was done."
    return render_confirmation(request, confirmation, status=NOT_CONFIRMED, **kwargs)
