"""Every page the crawler knows, in Chromium, on a phone (390×844) and a desktop (1440×900).

- On the phone no page scrolls sideways: the document is never wider than the screen;
  and outside the conversation page's rows (tests of their own) every button, field and
  top-bar link is at least 44 px tall.
- axe-core (tests/axe, installed with `npm ci` when missing) finds no serious or
  critical violation on any page, at either size.
- /api/v1/docs declares a mobile viewport.

The pages are the crawler's (tests/test_crawler.py: every routed URL pattern that
answers HTML to a GET, with real ids in its path) plus a search with results, all
walked once per size in one browser, so the setup is paid once. On the way it takes
docs/screenshots/phone-list.png, phone-keys.png and search-grouped.png.
"""

import shutil
import subprocess
from pathlib import Path

import pytest
from django.test import Client

from tests.conftest import skip_or_fail
from tests.helpers import sign_in
from tests.test_crawler import fill, routes

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

AXE_DIR = Path(__file__).resolve().parent / "axe"
AXE_JS = AXE_DIR / "node_modules" / "axe-core" / "axe.min.js"
PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1440, "height": 900}
# Pages that are not HTML for people, or that end the session.
LEFT_OUT = {"logout", "healthz", "readyz", "metrics", "openapi-json"}
SHOTS = Path(__file__).resolve().parent.parent / "docs" / "screenshots"
# (viewport width, path): the screenshot taken there on the way.
SHOT_AT = {(390, "/"): "phone-list.png", (390, "/keys/"): "phone-keys.png",
           (1440, "/search/?q=refund"): "search-grouped.png"}


def axe_script() -> Path:
    """axe.min.js from tests/axe/node_modules, installed from the lockfile when missing."""
    if not AXE_JS.exists():
        npm = shutil.which("npm")
        if npm is None:
            skip_or_fail("npm is not installed: axe-core cannot be installed (tests/axe)")
        done = subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=AXE_DIR, capture_output=True,
                              text=True, timeout=300)
        if done.returncode != 0 or not AXE_JS.exists():
            skip_or_fail(f"npm ci in tests/axe failed: {done.stderr[-400:]}")
    return AXE_JS


def page_paths(values: dict, client: Client) -> list[str]:
    """Every routed page that answers a logged-in GET with HTML, and a search with hits."""
    paths, unknown = [], set()
    for route in routes():
        if route.name in LEFT_OUT or (route.is_api and route.name != "openapi-view"):
            continue
        path = fill(route, values, unknown)
        response = client.get(path)
        if response.status_code == 200 and "html" in response.get("Content-Type", "") and not response.streaming:
            paths.append(path)
    paths.append("/search/?q=refund")
    return paths


def _run_axe(page) -> list[dict]:
    result = page.evaluate(
        """async () => {
            const r = await axe.run(document, {resultTypes: ['violations']});
            return r.violations.filter(v => v.impact === 'serious' || v.impact === 'critical')
              .map(v => ({id: v.id, impact: v.impact, help: v.help,
                          nodes: v.nodes.slice(0, 3).map(n => n.target.join(' ')), count: v.nodes.length}));
        }"""
    )
    return result


def _sideways(page) -> int:
    """How many pixels the document is wider than the screen (0 when it fits)."""
    return page.evaluate(
        "() => Math.max(document.documentElement.scrollWidth, document.body ? document.body.scrollWidth : 0)"
        " - window.innerWidth")


def _offender(page) -> str:
    """The first element that sticks out past the right edge, to name in a failure."""
    return page.evaluate(
        """() => {
            const w = window.innerWidth;
            for (const el of document.querySelectorAll('body *')) {
                const r = el.getBoundingClientRect();
                if (r.right > w + 1 && r.width > 0) {
                    const cls = typeof el.className === 'string' ? el.className.trim() : '';
                    return el.tagName.toLowerCase() + (el.id ? '#' + el.id : '') +
                      (cls ? '.' + cls.split(/ +/).join('.') : '') + ' right=' + Math.round(r.right);
                }
            }
            return '?';
        }""")


# The controls a finger uses on every page: its buttons, fields and the top bar's links.
CONTROLS = ("main button, main .button, main select, main textarea, main input:not([type=hidden]):not([type=checkbox])"
            ":not([type=radio]), .topbar a, .topbar button")


def _small_targets(page) -> list[str]:
    """Visible primary controls less than 44 px tall (a checkbox counts by its label)."""
    return page.evaluate(
        r"""(selector) => {
            const out = [];
            const seen = new Set();
            const boxes = [...document.querySelectorAll(selector)].concat(
              [...document.querySelectorAll('main input[type=checkbox], main input[type=radio]')]
                .map(i => i.closest('label') || i));
            for (const el of boxes) {
                if (seen.has(el)) continue;
                seen.add(el);
                const r = el.getBoundingClientRect();
                const style = getComputedStyle(el);
                if (r.width === 0 || r.height === 0 || style.visibility === 'hidden') continue;
                if (el.closest('.msg, .visually-hidden, .skip-link, [hidden]')) continue;
                if (r.height < 43.5) {
                    const cls = typeof el.className === 'string' ? el.className.trim() : '';
                    const text = (el.innerText || el.value || el.name || '').trim().slice(0, 30);
                    out.push(el.tagName.toLowerCase() + (cls ? '.' + cls.split(/\s+/).join('.') : '') +
                      ' "' + text + '" ' + Math.round(r.height) + 'px');
                }
            }
            return out;
        }""", CONTROLS)


# A keyboard walk: Tab from the top through every stop (at most KEY_STOPS), and the name each stop
# gives a screen reader, as the accessible-name rules compute it for these elements.
KEY_STOPS = 150
_FOCUSED = r"""() => {
    const el = document.activeElement;
    if (!el || el === document.body) return null;
    const text = (e) => (e && (e.innerText || e.textContent) || '').replace(/\s+/g, ' ').trim();
    let name = el.getAttribute('aria-label') || '';
    const by = el.getAttribute('aria-labelledby');
    if (!name && by) name = by.split(/\s+/).map(id => text(document.getElementById(id))).join(' ').trim();
    if (!name && el.labels && el.labels.length) name = [...el.labels].map(text).join(' ').trim();
    if (!name && ['A', 'BUTTON', 'SUMMARY'].includes(el.tagName)) name = text(el);
    if (!name && el.tagName === 'a' && el.querySelector('title')) name = text(el.querySelector('title'));
    if (!name) name = el.getAttribute('title') || el.getAttribute('placeholder') || el.getAttribute('alt') || '';
    if (!name && el.tagName === 'INPUT' && ['submit', 'button'].includes(el.type)) name = el.value;
    return {tag: el.tagName.toLowerCase(), id: el.id, cls: typeof el.className === 'string' ? el.className : '',
            name: name.trim(), key: el.tagName + '#' + el.id + '.' + (el.getAttribute('href') || el.name || '')
              + ':' + [...el.parentNode.children].indexOf(el)};
}"""


def keyboard_walk(page) -> tuple[int, list[str]]:
    """(tab stops met from the top, the unnamed ones)."""
    page.evaluate("() => { document.activeElement && document.activeElement.blur(); window.scrollTo(0, 0); }")
    stops, unnamed, seen = 0, [], set()
    for _ in range(KEY_STOPS):
        page.keyboard.press("Tab")
        focused = page.evaluate(_FOCUSED)
        if focused is None or focused["key"] in seen:
            break
        seen.add(focused["key"])
        stops += 1
        if not focused["name"]:
            unnamed.append(f"<{focused['tag']} id={focused['id']!r} class={focused['cls'][:40]!r}>")
    return stops, unnamed


def walk(browser, live_server, admin, paths, viewport, *, check_width: bool):
    # bypass_csp: axe arrives as an inline script; the CSP itself is tested in test_csp_browser.py.
    context = browser.new_context(viewport=viewport, bypass_csp=True)
    sign_in(context, live_server.url, admin)
    page = context.new_page()
    page.set_default_timeout(15000)
    axe = axe_script()
    wide, small, violations, counts = [], [], {}, {}
    try:
        for path in paths:
            response = page.goto(live_server.url + path, wait_until="load")
            assert response is not None and response.status == 200, (path, response and response.status)
            if path.startswith("/api/"):
                page.locator(".opblock").first.wait_for()  # Swagger UI draws after fetching the schema
            if check_width:
                extra = _sideways(page)
                if extra > 0:
                    wide.append(f"{path}: {extra}px wider than the screen ({_offender(page)})")
                # The conversation page's rows and the Swagger UI page have their own rules.
                if not path.startswith(("/conversations/", "/api/")):
                    small += [f"{path}: {t}" for t in _small_targets(page)]
            shot = SHOT_AT.get((viewport["width"], path))
            if shot:
                SHOTS.mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(SHOTS / shot), full_page=viewport is PHONE)
            if not check_width and not path.startswith("/api/"):
                _, unnamed = keyboard_walk(page)
                small += [f"{path}: a control with no name a screen reader could say: {u}" for u in unnamed[:5]]
            page.add_script_tag(path=str(axe))
            found = _run_axe(page)
            counts[path] = sum(v["count"] for v in found)
            if found:
                violations[path] = found
    finally:
        context.close()
    return wide, small, violations, counts


@pytest.mark.same_on_every_database
def test_every_page_fits_a_phone_and_has_no_serious_axe_violation(world, browser, live_server, capsys):
    client = Client()
    client.force_login(world["admin"])
    paths = page_paths(world["values"], client)
    assert len(paths) >= 20, paths  # the crawler's pages, not a handful

    docs = client.get("/api/v1/docs").content.decode()
    problems = [] if 'name="viewport" content="width=device-width' in docs else ["/api/v1/docs has no mobile viewport"]
    summary = []
    for name, viewport in (("390x844", PHONE), ("1440x900", DESKTOP)):
        wide, small, violations, counts = walk(browser, live_server, world["admin"], paths, viewport,
                                        check_width=viewport is PHONE)
        problems += [f"[{name}] sideways: {w}" for w in wide]
        problems += [f"[{name}] {'under 44 px' if viewport is PHONE else 'keyboard'}: {t}" for t in small]
        for path, found in violations.items():
            for v in found:
                problems.append(f"[{name}] axe {v['impact']} {v['id']} on {path}: {v['help']} "
                                f"({v['count']} nodes, e.g. {v['nodes']})")
        summary.append(f"{name}: {len(paths)} pages, {sum(counts.values())} serious/critical axe nodes, "
                       f"{len(wide)} pages wider than the screen, {len(small)} controls under 44 px")
    with capsys.disabled():
        print("\nevery page: " + "; ".join(summary))
    assert not problems, f"{len(problems)} problems:\n" + "\n".join(problems)
