"""The API keys page in a real Chromium: an admin creates a key, an agent uses it,
the admin revokes it, and the agent is shut out. Also: the API docs page renders
from local static files."""

import json
import urllib.error
import urllib.request

import pytest

from conversations.roles import ADMIN

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]



def _agent_get(url, secret):
    assert url.startswith("http://localhost:") or url.startswith("http://127.0.0.1:")  # loopback only
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {secret}"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_an_admin_creates_and_revokes_a_key_an_agent_uses(live_server, logged_in_page):
    page = logged_in_page(ADMIN, "/keys/", username="keymaster")

    page.click("nav >> text=API keys")
    page.fill("input[name=name]", "browser-made agent")
    page.uncheck("input[value=write]")
    page.click("text=Create key")
    secret = page.inner_text("#new-key-secret").strip()
    assert secret.startswith("mui_")
    assert page.is_visible("text=Copy it now.")

    status, body = _agent_get(live_server.url + "/api/v1/conversations", secret)
    assert (status, body["items"]) == (200, [])

    # Shown once: a reload of the list does not show it again.
    page.goto(live_server.url + "/keys/")
    assert secret not in page.content()
    row = page.locator("tr", has_text="browser-made agent")
    assert "read" in row.inner_text() and "write" not in row.inner_text()
    # Revoke… asks first, in place (htmx): which key, its last use, what stops working.
    row.get_by_role("link", name="Revoke browser-made agent").click()
    panel = page.locator("#confirm")
    panel.get_by_text("Revoke the API key “browser-made agent”?").wait_for()
    assert page.url == live_server.url + "/keys/"  # the panel opened on the list, no page load
    text = panel.inner_text()
    assert secret[:13] in text and "Last used" in text and "gets 401 on its next request" in text
    assert "Nothing undoes this" in text
    # The button alone does nothing: the box must be ticked.
    panel.get_by_role("button", name="Revoke “browser-made agent”").click()
    assert page.evaluate("document.querySelector('#confirm input[name=confirm]').validity.valueMissing")
    status, _ = _agent_get(live_server.url + "/api/v1/conversations", secret)
    assert status == 200
    panel.get_by_label("I understand that agents using this key stop working now.").check()
    panel.get_by_role("button", name="Revoke “browser-made agent”").click()
    page.wait_for_selector("text=Requests with it now get 401")
    assert "revoked" in page.locator("tr", has_text="browser-made agent").inner_text()

    status, body = _agent_get(live_server.url + "/api/v1/conversations", secret)
    assert status == 401 and body["error"]["code"] == "unauthenticated"


def test_without_javascript_revoke_opens_its_confirmation_page(live_server, logged_in_page):
    page = logged_in_page(ADMIN, "/keys/", username="nojs", java_script_enabled=False)
    page.fill("input[name=name]", "scripted agent")
    page.click("text=Create key")
    secret = page.inner_text("#new-key-secret").strip()
    page.goto(live_server.url + "/keys/")
    page.get_by_role("link", name="Revoke scripted agent").click()
    page.wait_for_url("**/keys/*/revoke")
    assert page.get_by_role("heading", name="Revoke the API key “scripted agent”?").is_visible()
    page.check("#confirm input[name=confirm]")
    page.click("#confirm-action")
    page.wait_for_selector("text=Requests with it now get 401")
    assert _agent_get(live_server.url + "/api/v1/conversations", secret)[0] == 401


def test_the_api_docs_render_from_local_files(live_server, page):
    requested = []
    page.on("request", lambda r: requested.append(r.url))
    page.goto(live_server.url + "/api/v1/docs")
    page.wait_for_selector("#operations-conversations-append_message")
    for operation in ("create_conversation", "get_active_view", "create_checkpoint", "fork_conversation",
                      "export_conversation", "delete_conversation"):
        assert page.is_visible(f"#operations-conversations-{operation}"), operation
    assert requested and all(u.startswith(live_server.url) for u in requested), requested
