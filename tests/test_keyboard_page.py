"""The Keyboard page (/keyboard/, conversations/views_keyboard.py): every key a page answers to, linked
from the foot of every page, for any signed-in person whatever their role."""

import re
from pathlib import Path

import pytest

from conversations.views_keyboard import KEYBOARD
from tests.helpers import make_person

pytestmark = pytest.mark.django_db


def test_it_requires_login(client):
    response = client.get("/keyboard/")
    assert response.status_code == 302 and response["Location"].startswith("/login/")


@pytest.mark.parametrize("role", ["auditor", "reviewer", "admin"])
def test_every_role_reaches_it_from_the_foot_of_a_page(client, two_projects, role):
    alpha, _beta = two_projects
    client.force_login(make_person("kim", {alpha: role}))
    listing = client.get("/p/alpha/").content.decode()
    link = re.search(r'<footer class="pagefoot"><a href="([^"]+)">Keyboard</a>', listing)
    assert link, "no Keyboard link at the foot of the page"
    page = client.get(link.group(1))
    assert page.status_code == 200
    html = page.content.decode()
    assert "<h1>Keyboard</h1>" in html
    # The review queue's keys as queue.js answers to them, and the chart's.
    for key in ("j", "k", "a", "r", "e", "u", "Ctrl", "Enter", "Esc", "Home", "End"):
        assert f"<kbd>{key}</kbd>" in html, key


def test_the_keys_it_lists_for_the_queue_are_the_queues(client, two_projects):
    """The queue's one-letter keys on this page are the ones its hint names: a key added to
    the queue (its template marks each with data-key) and left off this page fails here."""
    queue = Path(__file__).resolve().parent.parent / "templates" / "facts" / "queue.html"
    marked = set(re.findall(r'data-key="(\w)"', queue.read_text()))
    listed = {combo[0] for keys, _ in dict(KEYBOARD)["Review queue (Facts)"] for combo in keys
              if len(combo) == 1 and len(combo[0]) == 1}
    assert marked and marked <= listed, (marked, listed)
    assert {"j", "k"} <= listed
