"""The Keyboard page: every key each page answers to, for any signed-in person."""

from django.contrib.auth.decorators import login_required
from django.shortcuts import render
from django.views.decorators.http import require_safe

# What each page answers to from the keyboard, for the Keyboard page: (keys, what they do),
# each key a tuple of alternatives, each alternative the keys pressed together.
KEYBOARD = [
    ("Every page", [
        ((("Tab",),), "the first stop is “Skip to content”, which goes past the top bar"),
        ((("Tab",), ("Shift", "Tab")), "the next or previous link, button or field"),
        ((("Enter",),), "follow a link, press a button, open a menu"),
    ]),
    ("A conversation", [
        ((("Tab",),), "the first stop is “Skip to the messages”, past the panels to the first row"),
        ((("Esc",),), "close the row menu in focus; the focus goes back to its button"),
    ]),
    ("Review queue (Facts)", [
        ((("j",), ("k",)), "the next or previous proposal"),
        ((("a",),), "approve the proposal in focus; the focus goes on to the next one"),
        ((("r",),), "reject it: type the reason, then Enter"),
        ((("e",),), "edit it and approve the edited fact"),
        ((("Ctrl", "Enter"), ("⌘", "Enter")), "send the form being typed in"),
        ((("Esc",),), "leave a field for its proposal, so the keys above work again"),
        ((("u",),), "undo the last review; the proposal comes back in its place"),
    ]),
    ("Context chart (a conversation's usage)", [
        ((("←",), ("→",)), "the previous or next model call"),
        ((("Home",), ("End",)), "the first or last call"),
        ((("Enter",),), "open the row of the call in focus"),
        ((("Esc",),), "back to the chart as a whole"),
    ]),
]


@require_safe
@login_required
def keyboard(request):
    return render(request, "conversations/keyboard.html",
                  {"sections": [{"title": title, "keys": keys} for title, keys in KEYBOARD]})
