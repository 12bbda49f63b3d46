"""The project switcher in every page's header (conversations/switcher.py), and the links,
forms, redirects and scripts' data that keep a page in its project."""

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from conversations import api_keys, projects, store
from conversations.demo import load_demo
from conversations.facts import store as facts_store
from conversations.facts.models import Fact
from tests.api_support import Api
from tests.helpers import make_person
from tests.test_crawler import fill, routes

pytestmark = pytest.mark.django_db


def switch_links(html: str) -> dict[str, str]:
    """The switcher's choices: {slug: address}."""
    menu = html.split('<ul class="project-menu">', 1)[1].split("</ul>", 1)[0]
    return dict((slug, href) for href, slug in re.findall(r'<a href="([^"]*)"[^>]*data-project="([^"]+)"', menu))


def in_project(project, fn, **kwargs):
    with projects.scoped(projects.one(project.pk)):
        return fn(**kwargs)


def test_it_shows_the_current_project_to_a_person_in_one_project(client, two_projects):
    alpha, _ = two_projects
    client.force_login(make_person("ann", {alpha: "auditor"}))
    html = client.get("/p/alpha/").content.decode()
    assert '<span class="project-switch" id="project-switch"><span class="project-label">Project</span> ' \
           '<strong class="project-current">Alpha</strong>' in html
    assert "project-menu" not in html


def test_it_lists_every_project_of_a_person_in_two_and_marks_the_current_one(client, two_projects):
    alpha, beta = two_projects
    client.force_login(make_person("ann", {alpha: "auditor", beta: "reviewer"}))
    html = client.get("/p/alpha/search/?q=refund&order=newest").content.decode()
    assert '<strong class="project-current">Alpha</strong>' in html
    # The same page in the other project, the search words kept and nothing else.
    assert switch_links(html) == {"alpha": "/p/alpha/search/?q=refund", "beta": "/p/beta/search/?q=refund"}
    assert re.search(r'aria-current="true" data-project="alpha"', html)
    assert "default" not in switch_links(html)


def test_the_default_project_is_at_the_root(client, two_projects):
    alpha, _ = two_projects
    client.force_login(make_person("ann", {projects.DEFAULT_PROJECT_ID: "admin", alpha: "admin"}))
    html = client.get("/p/alpha/keys/").content.decode()
    assert switch_links(html) == {"default": "/keys/", "alpha": "/p/alpha/keys/"}
    assert switch_links(client.get("/keys/").content.decode())["alpha"] == "/p/alpha/keys/"


def test_a_page_about_one_object_links_the_other_project_home(client, two_projects):
    alpha, beta = two_projects
    client.force_login(make_person("ann", {alpha: "auditor", beta: "auditor"}))
    ours = in_project(alpha, store.create_conversation, title="in alpha")
    html = client.get(f"/p/alpha/conversations/{ours.pk}/").content.decode()
    assert switch_links(html)["beta"] == "/p/beta/"


def test_a_page_the_role_there_does_not_open_links_that_project_home(client, two_projects):
    alpha, beta = two_projects
    client.force_login(make_person("ann", {alpha: "reviewer", beta: "auditor"}))
    html = client.get("/p/alpha/facts/").content.decode()
    assert switch_links(html) == {"alpha": "/p/alpha/facts/", "beta": "/p/beta/"}
    assert client.get("/p/beta/facts/").status_code == 403


def test_a_superuser_switches_between_every_project(client, two_projects):
    client.force_login(make_person("root", {}, superuser=True))
    html = client.get("/p/beta/admin/").content.decode()
    assert switch_links(html) == {"default": "/admin/", "alpha": "/p/alpha/admin/", "beta": "/p/beta/admin/"}


def test_the_header_links_keep_the_project(client, two_projects):
    alpha, _ = two_projects
    client.force_login(make_person("ann", {alpha: "admin"}))
    html = client.get("/p/alpha/").content.decode()
    nav = html.split('<nav class="mainnav">', 1)[1].split("</nav>", 1)[0]
    hrefs = re.findall(r'href="([^"]+)"', nav)
    assert hrefs == ["/p/alpha/", "/p/alpha/search/", "/p/alpha/facts/", "/p/alpha/admin/", "/p/alpha/keys/"]
    admin = client.get("/p/alpha/admin/").content.decode()
    assert 'href="/p/alpha/keys/"' in admin and 'href="/p/alpha/admin/members/"' in admin
    assert not re.search(r'(href|action|hx-get|hx-post)="/(?!p/alpha/|static/|api/)', admin)


def test_a_conversation_page_keeps_the_project_in_every_link_and_fragment(client, two_projects):
    alpha, _ = two_projects
    client.force_login(make_person("ann", {alpha: "admin"}))
    ours = in_project(alpha, store.create_conversation, title="in alpha")
    in_project(alpha, store.append_message, conversation_id=ours.pk, message={"kind": "note", "text": "hello"})
    html = client.get(f"/p/alpha/conversations/{ours.pk}/").content.decode()
    addresses = re.findall(r'(?:href|action|hx-get|hx-post|data-[a-z-]*url)="(/[^"]*)"', html)
    assert addresses, "the page links nowhere"
    outside = [a for a in addresses if not a.startswith(("/p/alpha/", "/static/", "/api/"))]
    assert outside == []
    assert f'href="/p/alpha/admin/conversations/{ours.pk}/delete/"' in html


def test_the_page_tells_its_scripts_the_project(client, two_projects):
    alpha, _ = two_projects
    client.force_login(make_person("ann", {alpha: "auditor"}))
    html = client.get("/p/alpha/").content.decode()
    body = re.search(r"<body[^>]*>", html).group(0)
    assert '"X-Memoryui-Project": "alpha"' in body
    assert 'data-project="alpha"' in body and 'data-page-root="/p/alpha/"' in body
    assert 'data-api-root="/api/v1/"' in body


def test_an_htmx_fragment_carries_no_header_and_stays_in_its_project(client, two_projects):
    alpha, beta = two_projects
    client.force_login(make_person("ann", {alpha: "auditor", beta: "auditor"}))
    ours = in_project(alpha, store.create_conversation, title="ours")
    for n in range(3):
        in_project(alpha, store.append_message, conversation_id=ours.pk, message={"kind": "note", "text": f"n{n}"})
    response = client.get(f"/p/alpha/conversations/{ours.pk}/", {"after": 0},
                          HTTP_HX_REQUEST="true", HTTP_HX_TARGET="record-more")
    html = response.content.decode()
    assert response.status_code == 200 and "n1" in html
    assert "project-switch" not in html and "<html" not in html
    # The same fragment asked for in the other project: its conversation is not there.
    assert client.get(f"/p/beta/conversations/{ours.pk}/", {"after": 0},
                      HTTP_HX_REQUEST="true", HTTP_HX_TARGET="record-more").status_code == 404


def test_a_fact_action_sends_the_reviewer_back_to_the_page_in_the_project(client, two_projects):
    alpha, _ = two_projects
    client.force_login(make_person("ann", {alpha: "reviewer"}))
    fact = in_project(alpha, facts_store.propose_fact, subject="customer:7", text="Prefers email.",
                      importance=3, created_by="key:test")
    in_project(alpha, facts_store.approve_fact, fact_id=fact.pk, actor="user:x")
    response = client.post(f"/p/alpha/facts/{fact.pk}/keep", {"next": "/p/alpha/facts/forgetting/?days=30"})
    assert response.status_code == 302 and response["Location"] == "/p/alpha/facts/forgetting/?days=30"
    # Another project's address is not a place to go back to.
    response = client.post(f"/p/alpha/facts/{fact.pk}/keep", {"next": "/p/beta/facts/"})
    assert response.status_code == 302 and response["Location"].startswith("/p/alpha/facts/subject/")


def test_a_search_hit_links_the_page_in_the_key_project(client, two_projects):
    alpha, _ = two_projects
    ours = in_project(alpha, store.create_conversation, title="ours")
    in_project(alpha, store.append_message, conversation_id=ours.pk, message={"kind": "note", "text": "kumquat"})
    _, secret = api_keys.create_api_key(name="searcher", scopes=["read"], project=alpha)
    with CaptureQueriesContext(connection) as asked:
        hits = Api(client, secret).get("/search", {"q": "kumquat"}).json()["items"]
    assert [h["page_url"] for h in hits] == [f"http://testserver/p/alpha/conversations/{ours.pk}/?at=0#p0"]
    assert hits[0]["conversations"][0]["page_url"].startswith("http://testserver/p/alpha/")
    # The project's slug came with the key: its links cost no statement of their own.
    assert not [q["sql"] for q in asked.captured_queries if 'FROM "conversations_project"' in q["sql"]]
    # An operator's key naming the project links the same pages (its project is looked up).
    _, every = api_keys.create_api_key(name="operator", scopes=["read"], all_projects=True)
    named = Api(client, every).get("/search", {"q": "kumquat"}, headers={"X-Memoryui-Project": "alpha"})
    assert [h["page_url"] for h in named.json()["items"]] == [h["page_url"] for h in hits]


# Where a page of a project may send the browser outside the project's own addresses.
SHARED = ("/static/", "/api/v1/", "/login/")
ADDRESS = re.compile(r'(?:href|action|hx-get|hx-post|src|data-[a-z-]*url|data-page-root)="(/[^"]*)"')


def test_no_page_of_a_project_writes_an_address_outside_it(client, two_projects):
    """Every page the URL resolver knows, opened in alpha with real ids, links, posts and
    fetches only under /p/alpha/ (or to the static files, the API and the login page)."""
    alpha, _ = two_projects
    with projects.scoped(projects.one(alpha.pk)):
        conversations = load_demo(coding_turns=4)
        key, _ = api_keys.create_api_key(name="spare", scopes=["read"])
        fact = Fact.objects.order_by("id").first()
    fork = next(c for c in conversations if c.parent_id is not None)
    ann = make_person("ann", {alpha: "admin"})
    client.force_login(ann)
    values = {"conversation_id": str(fork.pk), "position": "1", "fact_id": str(fact.pk), "key_id": str(key.pk),
              "user_id": str(ann.pk), "fmt": "json", "part": "ledger"}
    opened, outside = [], []
    for route in routes():
        if route.is_api or route.name in ("logout", "healthz", "readyz", "metrics", "otlp_traces") \
                or route.route.startswith(("login/", "favicon")):
            continue
        path = "/p/alpha" + fill(route, values, set())
        response = client.get(path)
        if response.status_code != 200 or "html" not in response.get("Content-Type", "") or response.streaming:
            continue
        opened.append(path)
        for address in ADDRESS.findall(response.content.decode()):
            if not address.startswith(("/p/alpha/", *SHARED)):
                outside.append(f"{path}: {address}")
    assert len(opened) > 25, opened
    assert outside == []
