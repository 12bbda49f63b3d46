"""The search page and the find box of a conversation page (no browser)."""

import pytest

from conversations import api_keys, projects, store
from tests.api_support import Api, login_as
from tests.helpers import make_person

pytestmark = pytest.mark.django_db


@pytest.fixture
def convo():
    c = store.create_conversation(title="Blender <b>ticket</b>", subject="cust:7")
    store.append_message(conversation_id=c.pk,
                         message={"kind": "user", "content": "I want a refund <img src=x onerror=alert(1)>"})
    store.append_message(conversation_id=c.pk, message={"kind": "assistant", "content": "A refund is on its way."})
    return c


def test_it_requires_a_role(client, convo):
    assert client.get("/search/", {"q": "refund"}).status_code == 302
    login_as(client, "none")
    assert client.get("/search/", {"q": "refund"}).status_code == 403


def test_it_lists_hits_with_escaped_marked_snippets(client, convo):
    login_as(client, "auditor")
    r = client.get("/search/", {"q": "refund"})
    body = r.content.decode()
    assert r.status_code == 200
    assert body.count('class="hit ') == 2
    assert "<mark>refund</mark>" in body
    assert "<img src=x" not in body and "&lt;img src=x onerror=alert(1)&gt;" in body
    assert "<b>ticket</b>" not in body
    # The row opens with the words to mark (?q=).
    assert f'href="/conversations/{convo.pk}/?at=0&amp;q=refund#p0"' in body


def test_an_empty_form_shows_no_results_and_no_error(client, convo):
    login_as(client, "auditor")
    r = client.get("/search/")
    assert r.status_code == 200
    assert 'class="hit ' not in r.content.decode() and "role=\"alert\"" not in r.content.decode()


def test_bad_syntax_is_a_400_page_with_the_message_in_the_form(client, convo):
    login_as(client, "auditor")
    r = client.get("/search/", {"q": '"full refund'})
    body = r.content.decode()
    assert r.status_code == 400 and "quote is not closed" in body and 'aria-invalid="true"' in body
    assert 'value="&quot;full refund"' in body


def test_no_match_says_so(client, convo):
    login_as(client, "auditor")
    r = client.get("/search/", {"q": "zebra", "kind": "user"})
    assert "No row matches “zebra” with these filters" in r.content.decode()


def test_the_find_box_answers_htmx_with_only_its_results(client, convo):
    login_as(client, "auditor")
    page = client.get(f"/conversations/{convo.pk}/").content.decode()
    assert 'id="find-results"' in page and f'name="conversation" value="{convo.pk}"' in page
    r = client.get("/search/", {"q": "refund", "conversation": str(convo.pk)},
                   headers={"HX-Request": "true", "HX-Target": "find-results"})
    body = r.content.decode()
    assert body.lstrip().startswith('<div id="find-results"') and "<html" not in body
    assert "2 rows with “refund”" in body


def test_more_results_inside_one_conversation_arrive_by_cursor(client, convo):
    login_as(client, "auditor")
    for i in range(25):
        store.append_message(conversation_id=convo.pk, message={"kind": "note", "text": f"refund {i}"})
    grouped = client.get("/search/", {"q": "refund"}).content.decode()
    assert grouped.count('class="hit ') == 3 and "All 27 rows in this conversation" in grouped
    first = client.get("/search/", {"q": "refund", "conversation": str(convo.pk)}).content.decode()
    assert first.count('class="hit ') == 20 and 'id="search-more"' in first
    import re
    more = re.search(r'id="search-more" class="more-row"><a class="more" href="([^"]+)"', first).group(1)
    rest = client.get("/search/" + more.replace("&amp;", "&"),
                      headers={"HX-Request": "true", "HX-Target": "search-more"})
    assert rest.content.decode().count('class="hit ') == 7


def test_an_unknown_conversation_is_a_404(client):
    login_as(client, "auditor")
    assert client.get("/search/", {"q": "x", "conversation": "00000000-0000-0000-0000-000000000000"}).status_code == 404


def test_a_search_that_matched_only_titles_says_no_row_matched(client):
    store.create_conversation(title="Quokka refund", subject="cust:quokka")
    store.create_conversation(title="Quokka again")
    login_as(client, "auditor")
    body = client.get("/search/", {"q": "quokka"}).content.decode()
    assert "No row matches; <strong>2</strong> conversations have the words in their title or subject." in body
    assert "0</strong> matching rows" not in body


def test_it_finds_only_the_current_project_rows(client, two_projects):
    alpha, beta = two_projects
    made = {}
    for project in (alpha, beta):
        with projects.scoped(projects.one(project.pk)):
            c = store.create_conversation(title=f"{project.name} ticket", subject="cust:7")
            store.append_message(conversation_id=c.pk, message={"kind": "user", "content": f"kumquat {project.slug}"})
            made[project.slug] = c
    client.force_login(make_person("ann", {alpha: "auditor", beta: "auditor"}))
    for slug, other in (("alpha", "beta"), ("beta", "alpha")):
        for order in ("relevance", "newest"):
            html = client.get(f"/p/{slug}/search/", {"q": "kumquat", "order": order}).content.decode()
            assert f"kumquat {slug}" in html.replace("<mark>", "").replace("</mark>", "")
            assert f"{other.capitalize()} ticket" not in html and str(made[other].pk) not in html
    # The find box of a conversation of the other project is not found at all.
    assert client.get(f"/p/alpha/conversations/{made['beta'].pk}/", {"q": "kumquat"}).status_code == 404
    # A key of alpha likewise.
    _, secret = api_keys.create_api_key(name="a", scopes=["read"], project=alpha)
    hits = Api(client, secret).get("/search", {"q": "kumquat"}).json()["items"]
    assert [h["conversation_id"] for h in hits] == [str(made["alpha"].pk)]
