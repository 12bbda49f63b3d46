"""Projects in Chromium: a person switches between projects and stays in each across
navigation, and the pages that load rows with JavaScript (live follow's /state and its row
fetches, far rows coming back, search marks, "Copy JSON" through the API, htmx's "load more")
show the project's rows and never another's, for an auditor, a reviewer and an admin of
project A who holds no role in B.

Every request such a page makes is watched: it goes to A's pages (/p/alpha/…), to static
files, or to the API naming A in X-Memoryui-Project. B's rows carry a marker that must
never reach the page. Takes docs/screenshots/project-switcher.png on the way.
"""

import json
from urllib.parse import urlsplit

import pytest

from conversations import projects, store, views
from tests.helpers import make_person, wait_until
from tests.test_browser_ui import _shot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SECRET = "BETA-SECRET"
ROWS = 90


def in_project(project, fn, **kwargs):
    with projects.scoped(projects.one(project.pk)):
        return fn(**kwargs)


def note(project, conversation, text):
    return in_project(project, store.append_message, conversation_id=conversation.pk,
                      message={"kind": "note", "text": text})


@pytest.fixture
def rooms(two_projects, monkeypatch):
    """Alpha's long conversation (a kumquat at row 37) and beta's, whose every row holds SECRET."""
    monkeypatch.setattr(views, "ROW_PAGE", 10)  # "long" at 90 rows: pages of 10, then 40 while scrolling
    alpha, beta = two_projects
    a = in_project(alpha, store.create_conversation, title="Alpha ticket", subject="customer:7")
    for i in range(ROWS):
        note(alpha, a, "the kumquat order, alpha row 37" if i == 37 else f"alpha row {i}")
    b = in_project(beta, store.create_conversation, title=f"Beta ticket {SECRET}", subject="customer:7")
    for i in range(5):
        note(beta, b, f"the kumquat order, {SECRET} row {i}")
    return alpha, beta, a, b


class Requests:
    """What a page asks the server for, and what of it left project alpha."""

    def __init__(self, page, live_server):
        self.base = live_server.url
        self.seen, self.strays = [], []
        page.on("request", self.note)

    def note(self, request):
        if not request.url.startswith(self.base):
            return
        path = urlsplit(request.url).path
        self.seen.append(path)
        if path.startswith(("/p/alpha/", "/static/")):
            return
        if path.startswith("/api/v1/") and request.headers.get("x-memoryui-project") == "alpha":
            return
        self.strays.append(f"{request.method} {request.url} {request.headers.get('x-memoryui-project')}")


def no_secret(page):
    assert SECRET not in page.content()


def positions(page, pane="record"):
    return page.locator(f"#{pane} article.msg[data-position]").evaluate_all(
        "els => els.map(e => +e.dataset.position)")


@pytest.mark.parametrize("role", ["auditor", "reviewer", "admin"])
def test_the_pages_that_load_rows_with_javascript_show_only_the_project_rows(live_server, logged_in_page, rooms,
                                                                            role):
    alpha, beta, a, b = rooms
    make_person(f"{role}-of-alpha", {alpha: role})
    page = logged_in_page(None, f"/p/alpha/conversations/{a.pk}/?at=37&q=kumquat", username=f"{role}-of-alpha")
    asked = Requests(page, live_server)

    # Search marks: the opened row's words are marked, on A's page.
    page.wait_for_selector("#p37[data-search-marks]")
    assert page.locator("#p37 mark.search-mark").all_inner_texts() == ["kumquat"]
    no_secret(page)

    # Copy JSON: the row through the API, which the page asks in A's name.
    page.locator("#p37 details.row-menu > summary").click()
    page.locator("#p37").get_by_role("button", name="Copy JSON").click()
    copied = wait_until(lambda: page.evaluate("window.__lastCopied || ''"))
    assert json.loads(copied)["message"]["text"] == "the kumquat order, alpha row 37"

    # The whole record from the top: htmx loads the rest as it is scrolled into view, far rows are
    # unloaded on the way down and fetched again on the way back up.
    page.goto(live_server.url + f"/p/alpha/conversations/{a.pk}/")
    page.evaluate("""document.querySelectorAll('.rows[data-window]').forEach(r => {
        r.dataset.windowMax = 30; r.dataset.windowKeep = 20; })""")
    seen = set()
    for direction in ("down", "up"):
        for _ in range(200):
            page.evaluate("""(down) => { const r = document.getElementById('record').getBoundingClientRect();
                window.scrollBy(0, down ? r.bottom - window.innerHeight : -window.innerHeight); }""",
                          direction == "down")
            page.wait_for_timeout(60)
            seen.update(positions(page))
            if direction == "down" and page.locator("#record p.end").count():
                break
            if direction == "up" and page.evaluate("window.scrollY") == 0:
                page.wait_for_function("() => !!document.querySelector('#record article.msg[data-position=\"0\"]')")
                break
        if direction == "down":  # far rows were unloaded on the way down
            page.wait_for_selector("#record > .gap", state="attached", timeout=5000)
    seen.update(positions(page))
    assert seen == set(range(ROWS))
    no_secret(page)

    # Live follow: rows appended to A come in; rows appended to B meanwhile never do.
    page.evaluate("document.querySelectorAll('.rows[data-follow-url]').forEach(r => r.dataset.followInterval = 300)")
    note(beta, b, f"{SECRET} appended live")
    note(alpha, a, "alpha appended live")
    page.wait_for_function("() => [...document.querySelectorAll('#record article.msg')]"
                           ".some(e => e.textContent.includes('alpha appended live'))", timeout=20000)
    assert any(p.endswith(f"/p/alpha/conversations/{a.pk}/state") for p in asked.seen)
    no_secret(page)
    # Nothing the page asked for on its own left project alpha.
    assert asked.strays == []

    # B's conversation is not found from A's pages, from B's (not a member), nor through the API.
    for path in (f"/p/alpha/conversations/{b.pk}/", f"/p/alpha/conversations/{b.pk}/state",
                 f"/p/beta/conversations/{b.pk}/", f"/p/beta/conversations/{b.pk}/state", "/p/beta/"):
        answer = page.request.get(live_server.url + path)
        assert answer.status == 404, path
        assert SECRET not in answer.text()
    for project in ("alpha", "beta"):
        status = page.evaluate("""([cid, project]) => fetch('/api/v1/conversations/' + cid + '/messages',
            {headers: {'X-Memoryui-Project': project}}).then(r => r.status)""", [str(b.pk), project])
        assert status == 404, project


def test_a_person_switches_projects_and_stays_in_each_across_navigation(live_server, logged_in_page, rooms):
    alpha, beta, a, b = rooms
    make_person("ann", {alpha: "auditor", beta: "reviewer"})
    page = logged_in_page(None, "/p/alpha/", username="ann")
    assert page.locator(".project-current").inner_text() == "Alpha"
    assert page.locator("table.conversations").inner_text().count("Alpha ticket") == 1
    no_secret(page)

    # The switcher lists both projects, the current one marked.
    page.locator("#project-switch > summary").click()
    menu = page.locator(".project-menu")
    assert menu.is_visible()
    assert menu.locator("a").all_inner_texts() == ["Alpha alpha", "Beta beta"]
    assert menu.locator("a[aria-current]").inner_text() == "Alpha alpha"
    _shot(page, "project-switcher.png")

    menu.get_by_role("link", name="Beta beta").click()
    page.wait_for_url(f"{live_server.url}/p/beta/")
    assert page.locator(".project-current").inner_text() == "Beta"
    assert "Beta ticket" in page.locator("table.conversations").inner_text()
    assert "Alpha ticket" not in page.content()

    # Every link keeps the project: search, a hit, back to the list, the facts (a reviewer here).
    page.locator(".mainnav").get_by_role("link", name="Search", exact=True).click()
    page.wait_for_url(f"{live_server.url}/p/beta/search/")
    page.fill("input[name=q]", "kumquat")
    page.get_by_role("button", name="Search").click()
    page.wait_for_url(f"{live_server.url}/p/beta/search/?q=kumquat*")
    hits = page.locator("ol.hits li.hit")
    assert hits.count() >= 1 and "alpha row" not in page.locator("#search-results").inner_text()
    assert SECRET in page.locator("#search-results").inner_text()
    hits.first.locator("a.pos").click()
    page.wait_for_url(f"{live_server.url}/p/beta/conversations/{b.pk}/?at=*")
    assert page.locator(".project-current").inner_text() == "Beta"
    page.locator(".mainnav").get_by_role("link", name="Facts").click()
    page.wait_for_url(f"{live_server.url}/p/beta/facts/")

    # From beta's search, the switcher goes to alpha's search for the same words.
    page.goto(live_server.url + "/p/beta/search/?q=kumquat")
    page.locator("#project-switch > summary").click()
    page.locator(".project-menu").get_by_role("link", name="Alpha alpha").click()
    page.wait_for_url(f"{live_server.url}/p/alpha/search/?q=kumquat")
    assert page.locator("ol.hits li.hit").count() == 1
    no_secret(page)
    # Alpha's auditor has no facts: the header offers none, and the page is refused.
    assert page.locator(".mainnav").get_by_role("link", name="Facts").count() == 0

    # A bookmark keeps its project; the root sends a person outside `default` to their first project.
    page.goto(live_server.url + f"/p/beta/conversations/{b.pk}/")
    assert page.locator(".project-current").inner_text() == "Beta"
    page.goto(live_server.url + "/")
    assert page.url == f"{live_server.url}/p/alpha/"


def test_a_word_in_every_row_pages_through_the_project_rows_only(live_server, logged_in_page, rooms):
    """"row" is in every row of both projects, more hits together than the index's FEW_HITS: on
    SQLite the search asks the full-text index for alpha's token (search migration 0011). Typed
    and sent from the keyboard, newest first, the page loads more as it is scrolled, down to
    alpha's first row, and shows nothing of beta's."""
    alpha, beta, a, b = rooms
    make_person("ann", {alpha: "auditor", beta: "auditor"})
    page = logged_in_page(None, "/p/alpha/search/?order=newest", username="ann")
    page.locator("input[name=q]").focus()
    page.keyboard.type("row")
    page.keyboard.press("Enter")
    page.wait_for_url(f"{live_server.url}/p/alpha/search/?q=row*")
    hits = page.locator("ol.hits li.hit")

    def all_loaded():
        # Scrolled to the end, "More results" comes into view and htmx swaps the next page in.
        page.evaluate("window.scrollTo(0, document.body.scrollHeight)")
        return not page.locator("#search-more").count() and hits.count()

    assert wait_until(all_loaded, message=lambda: f"{hits.count()} hits loaded") == ROWS
    text = page.locator("#search-results").inner_text()
    assert "Beta ticket" not in text and "alpha row 89" in text and "alpha row 0" in text
    no_secret(page)


def test_the_switcher_fits_a_phone_and_a_finger(live_server, logged_in_page, two_projects):
    alpha, beta = two_projects
    make_person("ann", {alpha: "auditor", beta: "auditor"})
    page = logged_in_page(None, "/p/alpha/", username="ann", viewport={"width": 390, "height": 844})
    page.locator("#project-switch > summary").click()
    links = page.locator(".project-menu a")
    assert links.count() == 2
    for box in (links.nth(0).bounding_box(), links.nth(1).bounding_box(),
                page.locator("#project-switch > summary").bounding_box()):
        assert box["height"] >= 43.5 and box["x"] >= 0 and box["x"] + box["width"] <= 390
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    links.nth(1).click()
    page.wait_for_url(f"{live_server.url}/p/beta/")
