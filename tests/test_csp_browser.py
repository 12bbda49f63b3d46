"""Every page satisfies the Content-Security-Policy in a real Chromium.

The policy (conversations/middleware.py) allows scripts and styles from this
app's static files only: no inline script, no inline event handler, no eval (so
no htmx hx-on or trigger filter), no injected <style>. Chromium reports each
violation both as a console error and as a `securitypolicyviolation` event; the
test listens to both while it opens every page the URL resolver routes (with demo
ids in the path), scrolls it to the end so lazy parts load, and uses the htmx
parts that swap content in.
"""

import pytest

from conversations import demo
from conversations.roles import ADMIN
from tests.helpers import settle, unfold, wait_until
from tests.test_crawler import fill, routes

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

RECORD_VIOLATIONS = """
window.__csp = [];
document.addEventListener("securitypolicyviolation", function (e) {
  window.__csp.push(e.violatedDirective + " blocked " + (e.blockedURI || "inline") + " at " + location.pathname);
});
"""


def quiet(page, in_flight: set) -> None:
    """Wait until the page has drawn, no htmx request is pending and no request of any kind
    is in flight, then draw again (what arrived is swapped in and observed). Playwright's
    "networkidle" waits for half a second without requests besides, ~17 s over the pages."""

    def drained():
        page.wait_for_timeout(10)  # Playwright delivers the request events during its own calls
        return not in_flight

    settle(page)
    wait_until(drained, message=lambda: f"requests still in flight: {[r.url for r in in_flight]}")
    settle(page)


def page_urls(values) -> list[str]:
    """Every GET page (downloads, the logout form's target and JSON answers left out), and the API docs."""
    urls = []
    for route in routes():
        if route.route.startswith("api/") and route.name != "openapi-view":
            continue
        if route.name in ("logout", "favicon.ico") or "." in route.route.rsplit("/", 1)[-1]:
            continue
        urls.append(fill(route, values, set()))
    return sorted(set(urls))


@pytest.mark.same_on_every_database
def test_no_page_breaks_the_content_security_policy(live_server, logged_in_page):
    ticket = demo.load_demo(coding_turns=12)[0]
    from conversations import api_keys, store
    from conversations.facts.models import Fact
    from conversations.retention import erasure

    key, _ = api_keys.create_api_key(name="spare", scopes=["read"])
    doomed = store.create_conversation(title="to delete", subject="cust:csp")
    store.append_message(conversation_id=doomed.pk, message={"kind": "user", "content": "x"})
    receipt = erasure.execute_deletion(subject="cust:csp", conversation_ids=[], actor="test")
    values = {"conversation_id": str(ticket.pk), "position": "3", "fact_id": str(Fact.objects.first().pk),
              "key_id": str(key.pk), "request_id": str(receipt.pk), "run_id": "1", "rest": "x"}

    page = logged_in_page(ADMIN, username="csp-admin")  # the login page itself is among the pages checked
    console = []
    page.on("console", lambda m: console.append(f"{m.type}: {m.text}") if "Content Security Policy" in m.text
            else None)
    page.add_init_script(RECORD_VIOLATIONS)
    in_flight = set()
    page.on("request", lambda r: in_flight.add(r))
    page.on("requestfinished", lambda r: in_flight.discard(r))
    page.on("requestfailed", lambda r: in_flight.discard(r))

    violations, visited = [], []
    for url in page_urls(values):
        answer = page.request.get(live_server.url + url, max_redirects=0)
        if answer.status != 200 or "html" not in answer.headers.get("content-type", ""):
            continue  # POST-only actions (405), redirects
        page.goto(live_server.url + url)
        quiet(page, in_flight)
        page.mouse.wheel(0, 20000)  # lazy pages load their next part (htmx, intersect)
        quiet(page, in_flight)
        visited.append(url)
        violations += page.evaluate("window.__csp")

    # htmx swaps: the conversation page's kind filter, and a review decision in the facts queue.
    page.goto(live_server.url + f"/conversations/{ticket.pk}/")
    unfold(page, "#row-filters")
    page.locator("input[name=kind]").first.click()
    quiet(page, in_flight)
    violations += page.evaluate("window.__csp")
    page.goto(live_server.url + "/facts/")
    approve = page.locator("#queue-items form button.approve").first
    if approve.count():
        approve.click()
        quiet(page, in_flight)
    violations += page.evaluate("window.__csp")

    assert len(visited) >= 20, visited
    assert not violations and not console, violations + console

    # The listeners do hear a violation: an inline script is refused and reported.
    page.evaluate("""() => { const s = document.createElement('script'); s.textContent = 'window.ran = 1';
                             document.body.appendChild(s); }""")
    page.wait_for_function("() => window.__csp.some(v => v.includes('script-src'))")
    assert page.evaluate("window.ran") is None
