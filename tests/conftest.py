import asyncio
import os
import socket
import sqlite3
import sys
from pathlib import Path

import pytest
from django.db import DatabaseError, connection, connections

from tests import isolation

# Playwright's sync API runs an event loop in the test thread; the ORM calls the
# tests make around it are still synchronous and safe.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

# The Python client is installed (editable) by `make test`; this checkout's copy comes
# first all the same, so the tests always run against the client beside them.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "clients" / "python" / "src"))

# Shared fixtures: tests name them as arguments, never import them.
pytest_plugins = ["tests.helpers", "tests.api_support", "tests.crawl_support", "tests.backup_support"]

IN_CI = os.environ.get("CI", "").lower() == "true"
# The browser tests drive Debian's Chromium. Most run in its headless shell (the package
# chromium-headless-shell: the same Chromium, Blink and V8 built without the browser's window
# layer, what Playwright itself runs for headless tests), which took 109-117 s of CPU where the
# whole browser took 166-197 s for the same four browser files. The whole browser
# (/usr/bin/chromium, `full_chromium`) still drives the login form, so the build people run is
# exercised too; where the shell is not installed, every test uses the whole browser.
# MEMORYUI_CHROMIUM names another binary.
FULL_CHROMIUM = "/usr/bin/chromium"
HEADLESS_SHELL = "/usr/bin/chromium-headless-shell"
CHROMIUM = os.environ.get("MEMORYUI_CHROMIUM") or (HEADLESS_SHELL if os.path.exists(HEADLESS_SHELL) else FULL_CHROMIUM)


def pytest_configure(config):
    from django.conf import settings

    # Hashing test passwords with 1,000,000 rounds of PBKDF2 would cost seconds per user.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    # Transactional tests end by emptying the tables without rebuilding triggers or
    # writing every permission back (tests/isolation.py).
    isolation.install()
    sqlite3.connect = _system_sqlite_refusing_the_live_database(sqlite3.connect)
    _live_server_answers_without_delay()


def _live_server_answers_without_delay():
    """The live server (Django's, in the test process) writes a response's head and its body
    in separate sends. On a kept-alive connection (browsers, httpx, the clients) Nagle's
    algorithm then holds the body until the client acknowledges the head, and the client
    delays that acknowledgement: 40 ms lost on every request after a connection's first.
    gunicorn, which serves memoryui, sets TCP_NODELAY on its sockets; so does this server."""
    from django.core.servers.basehttp import ThreadedWSGIServer
    from django.test.testcases import LiveServerThread

    class NoDelayServer(ThreadedWSGIServer):
        def get_request(self):
            sock, address = super().get_request()
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            return sock, address

    LiveServerThread.server_class = NoDelayServer


def _system_sqlite_refusing_the_live_database(system_connect):
    """Python's own sqlite3 links the system's SQLite; memoryui's connections come from
    sqlean.py's build. Two SQLite libraries in one process do not share their record of
    the process's POSIX locks: when the system's connection closes its descriptors, the
    kernel drops every lock the process holds on the file, and that connection, finding
    no other, folds the WAL into the file and deletes it while memoryui's connection is
    still writing to it. Another process then starts a new WAL beside the old one, and
    the database is corrupt. (A test once did this, and every transactional test after it
    found the test database "malformed".) A test that wants a second connection to the
    live database takes it from `connection.Database`."""

    def connect(database, *args, **kwargs):
        target = os.fspath(database) if not isinstance(database, bytes) else database.decode()
        path = target.removeprefix("file:").split("?", 1)[0]
        for alias in connections:
            settings = connections.settings[alias]
            name = str(settings.get("NAME") or "")
            if (settings.get("ENGINE", "").endswith("sqlite") and name and os.path.exists(path)
                    and os.path.exists(name) and os.path.samefile(path, name)):
                raise AssertionError(
                    f"Python's sqlite3 (the system's SQLite) opened the live database {name}: closing it "
                    "would drop this process's locks on it and delete its WAL; use connection.Database.connect")
        return system_connect(database, *args, **kwargs)

    return connect


def pytest_collection_modifyitems(config, items):
    """A test marked `postgresql_only` tests a mechanism SQLite does not have (row locks,
    pg_wal): on SQLite it is left out of the run, not skipped, so that a skip always means
    something is missing; `sqlite_only` likewise on PostgreSQL (FTS5's own tables). A test
    marked `database_independent` judges something no database takes part in (a build, a
    rendering): it runs in the SQLite pass and is left out of the PostgreSQL one, which
    would only repeat it. So does a test marked
    `same_on_every_database`: the database serves its pages, but what it judges (the
    browser's layout, accessibility, the content security policy; what the page's scripts
    do with rows the server sent: unloading and reloading far rows, filters, keyboard,
    copying, following) is what the templates, styles and scripts make of them, the same
    whichever database holds the rows. What the server answers those pages on each
    database (the keyset pages, the fragments, the follow polls) is judged on both by the
    tests of the pages without a browser (test_page_*), and the browser tests that walk a
    whole flow of writes (test_browser_ui, the ledger, keys, facts, imports, retention,
    admin) still run on both. The README's snippets and the packed TypeScript package,
    run in fresh environments against a live server, are marked so too: they judge the
    text and the install; the API they call is judged on both (the API tests, the plugs'
    conformance suites, the client's node tests)."""
    from django.conf import settings

    postgresql = settings.DATABASES["default"]["ENGINE"].endswith("postgresql")
    markers = (("database_independent", "same_on_every_database", "sqlite_only") if postgresql
               else ("postgresql_only",))
    left_out = [item for item in items if any(item.get_closest_marker(m) for m in markers)]
    if left_out:
        config.hook.pytest_deselected(items=left_out)
        items[:] = [item for item in items if not any(item.get_closest_marker(m) for m in markers)]
    # The files that drive Chromium run last, each in one piece: they share one Playwright and
    # one Chromium (`_playwright`, `browser`), which leaves an event loop marked running in this
    # thread once started (below). Within each group the files keep their order.
    chromium = {item.path for item in items if "_playwright" in item.fixturenames}
    if os.environ.get("PYTEST_XDIST_WORKER"):
        # Workers take whole files (--dist loadfile) in this order: the files holding the
        # longest tests go out first, so that none starts last while the other workers idle.
        first = {item.path for item in items if item.get_closest_marker("slow")}
        items.sort(key=lambda item: (item.path in chromium, item.path not in first))
    else:
        items.sort(key=lambda item: item.path in chromium)


def skip_or_fail(reason: str):
    """Outside CI a missing tool skips a test loudly; in CI nothing may skip."""
    if IN_CI:
        pytest.fail(f"{reason} (CI=true: this may not be skipped)", pytrace=False)
    pytest.skip(reason)


def purge_sqlite_guarded_tables():
    """Empty every table on SQLite, around the append-only triggers (tests/isolation.py),
    for a test that needs an empty database before it starts. PostgreSQL: nothing to do."""
    if connection.vendor == "sqlite":
        isolation.purge()


@pytest.fixture(autouse=True)
def _no_embedder_thread_left_running():
    """A test that starts the background embedder (its admin page's button does) stops it
    when it ends: left running, it would write vectors into later tests' databases at moments
    of its own, and a test comparing rows before and after would see them appear."""
    yield
    from conversations.embeddings import worker

    assert worker.stop(), "the background embedder did not stop"


@pytest.fixture(autouse=True)
def journal_file(tmp_path_factory):
    """Each test its own erasure journal (conversations/retention/journal.py), also for the servers
    and commands it starts: one test's erasures are no other's, and none reach the data folder's."""
    from django.conf import settings

    path = tmp_path_factory.mktemp("journal") / "erasure-journal.jsonl"
    before, before_env = settings.MEMORYUI_ERASURE_JOURNAL, os.environ.get("MEMORYUI_ERASURE_JOURNAL")
    settings.MEMORYUI_ERASURE_JOURNAL = path
    os.environ["MEMORYUI_ERASURE_JOURNAL"] = str(path)
    yield path
    settings.MEMORYUI_ERASURE_JOURNAL = before
    if before_env is None:
        os.environ.pop("MEMORYUI_ERASURE_JOURNAL", None)
    else:
        os.environ["MEMORYUI_ERASURE_JOURNAL"] = before_env


@pytest.fixture(autouse=True, scope="module")
def _sqlite_test_database_intact(request, django_db_blocker):
    """After each module, SQLite's own check of the test database. A module that corrupts
    it (a lock dropped, a WAL deleted under a connection) is then named at once, instead of
    every transactional test after it failing with "database disk image is malformed"."""
    yield
    settings = connection.settings_dict
    test_name = str((settings.get("TEST") or {}).get("NAME") or "")
    if connection.vendor != "sqlite" or str(settings["NAME"]) != test_name or not os.path.exists(test_name):
        return  # PostgreSQL, or no test database made yet
    with django_db_blocker.unblock(), connection.cursor() as cursor:
        try:
            cursor.execute("PRAGMA quick_check")
            found = [row[0] for row in cursor.fetchall()]
        except DatabaseError as exc:
            found = [str(exc)]
    assert found == ["ok"], f"{request.module.__name__} left the test database corrupt: {found[:5]}"


def _installed(path: str, package: str) -> str:
    if not os.path.exists(path):
        skip_or_fail(f"{path} is not installed (apt-get install -y {package})")
    return path


@pytest.fixture(scope="session")
def chromium_path():
    return _installed(CHROMIUM, "chromium-headless-shell" if CHROMIUM == HEADLESS_SHELL else "chromium")


# One Playwright for the session. Its sync API keeps its event loop marked as running in the
# test thread while it is started, so a later test calling asyncio.run (or Pydantic AI's
# run_sync) would find a loop already running: the files that use the browser run after every
# other file (pytest_collection_modifyitems), and `_no_event_loop_left_running` lifts the mark
# for the tests of those files that do not use the browser.
@pytest.fixture(scope="session")
def _playwright():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        skip_or_fail("playwright is not installed (pip install -r requirements-dev.txt)")
    with sync_playwright() as p:
        yield p


# One Chromium for the session (starting Playwright and Chromium cost about 0.6 s of CPU, once
# per file when they were per module); each test gets its own context (cookies, storage,
# cache), closed after it, so no test sees another's state.
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]


def _launched(playwright, path: str):
    browser = playwright.chromium.launch(executable_path=path, headless=True, args=CHROMIUM_ARGS)
    yield browser
    browser.close()


@pytest.fixture(scope="session")
def browser(_playwright, chromium_path):
    yield from _launched(_playwright, chromium_path)


@pytest.fixture(scope="session")
def full_chromium(request, _playwright, chromium_path):
    """The whole browser (/usr/bin/chromium, in its headless mode), for the tests that drive it
    beside the headless shell the others use (CHROMIUM); the session's `browser` itself where
    that is the whole browser already (no shell installed)."""
    if chromium_path == FULL_CHROMIUM:
        yield request.getfixturevalue("browser")
        return
    yield from _launched(_playwright, _installed(FULL_CHROMIUM, "chromium"))


@pytest.fixture(autouse=True)
def _no_event_loop_left_running(request):
    """A test that does not use the browser runs with no event loop marked running in its
    thread, as it would alone. Playwright, once started, leaves its own marked so (`_playwright`),
    and asyncio.run would refuse to start; the browser files run last, so this concerns only the
    other tests of those files. The mark is put back after the test, for Playwright's next call."""
    playwright_loop = asyncio._get_running_loop() if "_playwright" not in request.fixturenames else None
    if playwright_loop is None:
        yield
        return
    asyncio._set_running_loop(None)
    try:
        yield
    finally:
        asyncio._set_running_loop(playwright_loop)


def pages_of(browser):
    """A page of `browser` in a context of its own (1400×900, downloads accepted), closed after
    the test: what the `page` fixtures yield."""
    context = browser.new_context(viewport={"width": 1400, "height": 900}, accept_downloads=True)
    page = context.new_page()
    page.set_default_timeout(15000)
    yield page
    context.close()


@pytest.fixture
def page(browser):
    yield from pages_of(browser)
