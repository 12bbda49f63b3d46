"""The pages never put a subject (personal data) into an address.

Addresses end up in browser history, proxy logs and the server's access log,
which a deletion request cannot reach. So links to a subject go through an
opaque reference (a fact id, a conversation id, an access-log row), and the
forms that take a subject POST it. This opens every routed page as an admin,
with demo data, and reads every address the page holds: links, htmx URLs, and
GET forms with their prefilled values.
"""

from html.parser import HTMLParser
from urllib.parse import parse_qsl, unquote_plus, urlsplit

import pytest

from conversations import api_keys, demo
from conversations.facts.models import Fact
from conversations.models import Conversation
from tests.retention_support import make_user
from tests.test_crawler import fill, routes

pytestmark = pytest.mark.django_db


class Addresses(HTMLParser):
    def __init__(self):
        super().__init__()
        self.found: list[str] = []
        self._get_form = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        for name in ("href", "hx-get", "src", "action"):
            if attrs.get(name):
                self.found.append(attrs[name])
        if tag == "form":
            self._get_form = [] if (attrs.get("method") or "get").lower() == "get" else None
        if tag == "input" and self._get_form is not None and attrs.get("type") == "hidden" and attrs.get("value"):
            self.found.append("?" + (attrs.get("name") or "") + "=" + attrs["value"])

    def handle_endtag(self, tag):
        if tag == "form":
            self._get_form = None


def test_no_page_puts_a_subject_in_an_address(client):
    conversations = demo.load_demo(coding_turns=12)
    client.force_login(make_user("boss", "admin"))
    subjects = {c.subject for c in Conversation.objects.exclude(subject="")}
    subjects |= set(Fact.objects.values_list("subject", flat=True))
    assert len(subjects) >= 2
    fact = Fact.objects.order_by("id").first()
    _, _ = api_keys.create_api_key(name="k", scopes=["read"])
    client.get(f"/facts/subject/{fact.pk}/")  # an access-log row to list
    values = {"conversation_id": str(conversations[0].pk), "position": "3", "fact_id": str(fact.pk)}
    leaks, pages = [], 0
    for route in routes():
        if route.route.startswith("api/") or route.name == "logout":
            continue
        url = fill(route, values, set())
        response = client.get(url)
        if response.status_code != 200 or "html" not in response.get("Content-Type", ""):
            continue
        pages += 1
        parser = Addresses()
        parser.feed(response.content.decode())
        for address in parser.found:
            query = unquote_plus(urlsplit(address).query) + " " + " ".join(v for _, v in parse_qsl(
                urlsplit(address).query))
            leaks += [f"{url}: {address}" for s in subjects if s in query]
    assert pages >= 20
    assert not leaks, leaks


def test_a_conversation_links_its_subject_by_its_own_id(client):
    ticket, coding = demo.load_demo(coding_turns=12)[:2]
    client.force_login(make_user("boss", "admin"))
    html = client.get(f"/conversations/{ticket.pk}/").content.decode()
    assert f'href="/?about={ticket.pk}"' in html
    listed = client.get("/", {"about": str(ticket.pk)}).context["conversations"]
    assert {c.pk for c in listed} == {c.pk for c in Conversation.objects.live().about(ticket.subject)}
    assert ticket.pk in {c.pk for c in listed} and coding.pk not in {c.pk for c in listed}
    assert client.get("/", {"about": "not-an-id"}).status_code == 404
