"""The login form in a real browser: where a page sends a visitor, what a wrong password
shows, the way on to the page that was asked for, and the way out.

Every other page test opens its pages already signed in (`sign_in` in tests/helpers.py, the
session Django's own login starts); this is where the form itself is driven, as a person
would drive it."""

import pytest
from playwright.sync_api import expect

from conversations.roles import REVIEWER
from tests.conftest import pages_of
from tests.helpers import PASSWORD

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def page(full_chromium):
    """A page of the whole browser (/usr/bin/chromium): the other browser tests run in its
    headless shell (tests/conftest.py), this one in the build people run."""
    yield from pages_of(full_chromium)


def test_a_visitor_signs_in_through_the_form_lands_on_the_page_asked_for_and_logs_out(page, live_server, user):
    reviewer = user(REVIEWER)
    page.goto(live_server.url + "/facts/")
    page.wait_for_url(live_server.url + "/login/?next=/facts/")

    page.fill("input[name=username]", reviewer.username)
    page.fill("input[name=password]", "not " + PASSWORD)
    page.click("button[type=submit]")
    expect(page.get_by_role("alert")).to_have_text("That username and password do not match. Try again.")
    # The form keeps the name that was typed, not the password, and where it was going.
    expect(page.locator("input[name=username]")).to_have_value(reviewer.username)
    expect(page.locator("input[name=password]")).to_have_value("")
    expect(page.locator("input[name=next]")).to_have_value("/facts/")

    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(live_server.url + "/facts/")
    expect(page.locator("form.logout .who")).to_have_text(reviewer.username)

    page.get_by_role("button", name="Log out").click()
    page.wait_for_url(live_server.url + "/login/")
    page.goto(live_server.url + "/facts/")
    page.wait_for_url(live_server.url + "/login/?next=/facts/")
