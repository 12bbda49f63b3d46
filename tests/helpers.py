"""What every test module may use without importing it: users with a role, a signed-in
browser page, an API client holding a key of given scopes, and `wait_until`, the one way a
test waits for something to happen.

Registered from tests/conftest.py through `pytest_plugins` (with tests/api_support.py, which
holds `api_client` and the other API fixtures), so a
test names a fixture as an argument and never imports it (an imported fixture needs a
`noqa: F401` and hides where it comes from).
"""

import itertools
import time

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.test import Client

from conversations.project_store import create_project
from conversations.roles import assign_role

# Every test user has this password: the login form needs one, and hashing it is cheap
# (tests/conftest.py sets the MD5 hasher).
PASSWORD = "pw-test-user-27182818"

DESKTOP = {"width": 1400, "height": 900}


def wait_until(predicate, timeout: float = 15.0, interval: float = 0.02, message=""):
    """Call `predicate` until it returns something true and return that; fail the test
    when `timeout` seconds pass first, with `message` (or what a callable `message`
    returns then). The interval only paces the polling: the test goes on as soon as the
    condition holds, however fast or slow the machine is."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            said = message() if callable(message) else message
            pytest.fail(said or f"{getattr(predicate, '__name__', 'the condition')} did not hold within {timeout} s")
        time.sleep(interval)


_serial = itertools.count(1)


def make_user(role: str | None = None, username: str | None = None, *, password: str | None = PASSWORD):
    """A user with a role (auditor, reviewer, admin) or none; named after its role unless named."""
    name = username or f"{role or 'nobody'}-{next(_serial)}"
    user = get_user_model().objects.create_user(name, password=password)
    if role:
        assign_role(user, role)
    return user


def make_person(username: str, roles: dict, *, superuser: bool = False):
    """A user holding a role in each project of `roles` ({project: role}); outside every other."""
    person = make_user(None, username)
    for project, role in roles.items():
        assign_role(person, role, project)
    if superuser:
        person.is_superuser = True
        person.save(update_fields=["is_superuser"])
    return person


def approved_fact(text="a fact", *, subject="cust:1", importance=5, **kw):
    """A fact proposed by a key and approved by a reviewer, in the current project."""
    from conversations.facts import store as facts

    f = facts.propose_fact(subject=subject, text=text, importance=importance, created_by="key:t", **kw)
    return facts.approve_fact(fact_id=f.pk, actor="user:rev")


@pytest.fixture
def two_projects(db):
    """Two projects besides `default`: alpha ("Alpha") and beta ("Beta")."""
    return create_project(slug="alpha", name="Alpha"), create_project(slug="beta", name="Beta")


@pytest.fixture
def user(db):
    """`user(role, username=None)`: a new user with that role (None for none), password PASSWORD."""
    return make_user


def sign_in(context, base_url: str, user) -> None:
    """Give a browser context the session cookie of `user`, made by Django's own login (the
    session the login form would start), so that its pages open signed in. The form itself is
    tested in a browser in tests/test_login_browser.py; going through it for every page test
    cost its page, its POST and its redirect each time (0.5 s of CPU for a sign-in alone; 15 s
    less over the 25 files that use `logged_in_page`)."""
    client = Client()
    client.force_login(user)
    cookie = client.cookies[settings.SESSION_COOKIE_NAME]
    context.add_cookies([{"name": settings.SESSION_COOKIE_NAME, "value": cookie.value, "url": base_url}])


@pytest.fixture
def logged_in_page(browser, live_server, db):
    """`logged_in_page(role, path="/", username=None, viewport=None, **context_options)`: a new
    browser page of a user with that role (or of the existing user `username`), signed in
    (`sign_in`) and left on `path`. Each call opens its own browser context (its own cookies),
    closed after the test."""
    contexts = []

    def open_page(role, path="/", *, username=None, viewport=None, **context_options):
        known = username and get_user_model().objects.filter(username=username).first()
        account = known or make_user(role, username)
        context = browser.new_context(viewport=viewport or DESKTOP, accept_downloads=True, **context_options)
        contexts.append(context)
        sign_in(context, live_server.url, account)
        page = context.new_page()
        page.set_default_timeout(15000)
        page.goto(live_server.url + path)
        assert page.url == live_server.url + path, f"{path} did not open signed in: {page.url}"
        return page

    yield open_page
    for context in contexts:
        context.close()


# ---- a row a link put in place ----------------------------------------------------------------

# The element's top is below the sticky top bar and, given the screen's height, on the screen.
_BELOW_THE_BAR = """([selector, height]) => {
    const element = document.querySelector(selector);
    if (!element) return false;
    const box = element.getBoundingClientRect();
    const bar = document.querySelector('header.topbar').getBoundingClientRect();
    return bar.bottom - 1 <= box.top && (height === null || box.top < height - 40);
}"""


def below_the_bar(page, selector: str, screen_height: int | None = None, timeout: float = 5000) -> bool:
    """Whether the element a link or permalink put in place comes to rest below the sticky bar
    (and on the screen, given its height). Waited for, not read once: a panel that loads
    after the page above the rows (the usage panel) moves them until the browser puts the
    row back, which on a busy machine can come after a first read. When it does not, the
    positions are printed for the failure's report."""
    # Imported where the browser is used, as conftest's fixtures do: suites without Playwright still load.
    from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

    try:
        page.wait_for_function(_BELOW_THE_BAR, arg=[selector, screen_height], timeout=timeout)
    except PlaywrightTimeoutError:
        box = page.locator(selector).bounding_box()
        bar = page.locator("header.topbar").bounding_box()
        print(f"{selector} stayed at {box}; the bar ends at {bar['y'] + bar['height']:.0f}, the screen "
              f"at {screen_height and screen_height - 40} (scrollY {page.evaluate('window.scrollY')})")
        return False
    return True


# ---- live follow: waiting on its polls instead of sleeping through them ----------------------


def wait_for_polls(page, n: int = 3, timeout: float = 15000) -> None:
    """Wait until the page's live follow has had `n` more state polls answered. A poll is sent
    only once the previous one is handled, so what the earlier ones brought is on the page."""
    for _ in range(n):
        page.wait_for_event("response", lambda r: r.url.endswith("/state"), timeout=timeout)


def count_polls(page) -> None:
    """From now on the page counts the state polls it sends (read them with `polls_sent`),
    counted where they start, so none is missed however late its request event would come."""
    page.evaluate("""() => {
        window.__statePolls = 0;
        const send = window.fetch;
        window.fetch = function (url, ...rest) {
            if (String(url).endsWith('/state')) window.__statePolls += 1;
            return send.call(this, url, ...rest);
        };
    }""")


def polls_sent(page) -> int:
    return page.evaluate("window.__statePolls")


def watch_refused_submit(page, required: str) -> str:
    """Listen for the browser refusing to submit a form because the field `required` is
    empty (its `invalid` event, fired at the click); returns the expression that turns true
    once it did, for `page.wait_for_function`."""
    page.evaluate("""(selector) => { window.__refused = false;
        document.querySelector(selector).addEventListener('invalid', () => { window.__refused = true; }); }""",
                  required)
    return "() => window.__refused"


def settle(page) -> None:
    """Wait until the page has drawn two frames (so what a scroll brought into view has been
    observed and its htmx requests sent) and no htmx request is still in flight."""
    page.evaluate("() => new Promise(done => requestAnimationFrame(() => requestAnimationFrame(done)))")
    page.wait_for_function("() => !document.querySelector('.htmx-request')")


def unfold(page, *selectors: str) -> None:
    """Open folded parts of a page as a reader does, by their summary: on a conversation page
    `#conv-panels` (figures, chart, fork tree, task state) and `#row-filters` (filters, jump to)."""
    for selector in selectors:
        if page.locator(f"{selector}:not([open])").count():
            page.locator(f"{selector} > summary").click()
