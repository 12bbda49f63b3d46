"""The conversation page's reading aids, in process: safe rich text, prices and
usage, the live state poll with its 304, the numbers panel and chart, the raw row."""

import re

import pytest
from django.db import connection

from conversations import prices, richtext, store
from conversations.models import Message
from conversations.roles import AUDITOR
from tests.test_page_conversation import _login, url

pytestmark = pytest.mark.django_db


@pytest.fixture
def auditor(client):
    return _login(client, AUDITOR)


# ---- safe rich text: every payload family stays text -------------------------------------

PAYLOADS = [
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    "<svg onload=alert(1)>",
    "<iframe src=javascript:alert(1)>",
    '<a href="javascript:alert(1)">x</a>',
    "[x](javascript:alert(1))",
    "[x](JaVaScRiPt:alert(1))",
    "[x](&#106;avascript:alert(1))",
    "[x](java\tscript:alert(1))",
    "[x](vbscript:msgbox(1))",
    "[x](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)",
    "![x](data:image/svg+xml,<svg onload=alert(1)>)",
    "<javascript:alert(1)>",
    '[x](https://e.com "a" onmouseover="alert(1)")',
    "<style>body{display:none}</style>",
    "<form action=https://evil><input name=q></form>",
    "``` onload=alert(1)\ncode\n```",
    "<div style=\"background:url(javascript:alert(1))\">x</div>",
]


@pytest.mark.parametrize("payload", PAYLOADS)
def test_no_payload_becomes_markup(payload):
    html = str(richtext.markdown(payload))
    # No element the text asked for, no handler, no script URL in an attribute.
    assert not re.search(r"<(script|img|svg|iframe|style|form|input)\b", html), html
    for tag in re.findall(r"<[a-z][^>]*>", html):  # the tags the renderer wrote, and their attributes
        assert not re.search(r"\son\w+\s*=|\sstyle\s*=", tag), (payload, tag)
    for href in re.findall(r'href="([^"]*)"', html):
        assert href.lower().startswith(("https:", "http:", "mailto:", "#", "/")) or ":" not in href, (payload, href)


def test_links_carry_rel_and_images_are_never_loaded():
    html = str(richtext.markdown("[docs](https://example.com/a) ![pixel](https://tracker.example/p.gif)"))
    assert '<a href="https://example.com/a" rel="nofollow noopener noreferrer">docs</a>' in html
    assert "<img" not in html and 'class="md-image" href="https://tracker.example/p.gif"' in html


def test_code_is_highlighted_with_classes_and_escaped():
    html = str(richtext.markdown('```python\nprint("<b>")\n```'))
    assert '<span class="nb">print</span>' in html and "&lt;b&gt;" in html and "style=" not in html
    # An unknown language is escaped text, still in its block.
    assert "&lt;b&gt;" in str(richtext.markdown("```nosuchlang\n<b>\n```"))


def test_a_file_a_tool_read_is_highlighted_in_its_language(client, auditor):
    c = store.create_conversation(title="x")
    store.append_message(conversation_id=c.pk, message={
        "kind": "assistant", "content": "Reading it.",
        "tool_calls": [{"id": "r1", "name": "read_file", "arguments": {"path": "billing/tax.py"}}]})
    store.append_message(conversation_id=c.pk, message={
        "kind": "tool", "tool_call_id": "r1", "name": "read_file", "content": "def vat(x):\n    return '<b>'\n"})
    body = client.get(url(c)).content.decode()
    turn = body[body.index('<details class="result'):]
    assert '<span class="k">def</span>' in turn  # Python, by the file's name
    assert "'<b>'" not in turn and "&lt;b&gt;" in turn


def test_past_the_limit_text_is_shown_escaped_unparsed():
    big = "**x** <b>" * (richtext.RENDER_LIMIT // 8 + 1)
    html = str(richtext.markdown(big))
    assert "<strong>" not in html and "&lt;b&gt;" in html


def test_harness_wrappers_are_cut_out_as_meta():
    text = "<command-name>/exit</command-name>\n<command-message>exit</command-message>\nthanks"
    assert richtext.split_wrappers(text) == [("command-name", "/exit"), ("command-message", "exit"),
                                             ("text", "thanks")]
    assert richtext.split_wrappers("plain <b>text</b>") == [("text", "plain <b>text</b>")]


def test_the_page_renders_payloads_inert_and_marks_a_harness_turn(client, auditor):
    c = store.create_conversation(title="x")
    for payload in PAYLOADS:
        store.append_message(conversation_id=c.pk, message={"kind": "assistant", "content": payload})
    store.append_message(conversation_id=c.pk, message={
        "kind": "user", "content": "<system-reminder>Remember the todo list.</system-reminder>"})
    body = client.get(url(c)).content.decode()
    assert "<script>alert" not in body and "onerror=alert" not in body.replace("onerror=alert(1)&gt;", "")
    assert 'href="javascript' not in body.lower() and "href=\"data:" not in body.lower()
    assert "is-harness" in body and '<span class="harness-tag">system-reminder</span>' in body


# ---- prices and usage -----------------------------------------------------------------------


def test_usage_is_read_in_each_dialect_and_priced_from_the_table():
    anthropic = prices.usage_of({"model": "claude-sonnet-4-5-20250929", "usage": {
        "input_tokens": 100, "output_tokens": 50, "cache_read_input_tokens": 1000,
        "cache_creation_input_tokens": 200}})
    assert (anthropic.input, anthropic.output, anthropic.cache_read, anthropic.cache_write) == (100, 50, 1000, 200)
    assert anthropic.context == 1300
    # 100×3 + 50×15 + 1000×0.3 + 200×3.75 per million.
    assert anthropic.cost == prices.Decimal("0.0021")
    openai = prices.usage_of({"model": "gpt-4o", "usage": {"prompt_tokens": 1200, "completion_tokens": 80,
                                                            "prompt_tokens_details": {"cached_tokens": 1000}}})
    assert (openai.input, openai.cache_read, openai.output) == (200, 1000, 80)
    langchain = prices.usage_of({"model": "x", "usage": {"input_tokens": 500, "output_tokens": 5,
                                                          "input_token_details": {"cache_read": 300}}})
    assert (langchain.input, langchain.cache_read) == (200, 300) and langchain.cost is None
    assert prices.usage_of({"usage": {"input_tokens": "many"}}) is None
    assert prices.usage_of({"model": "m"}) is None


def test_a_deployment_overrides_the_price_table(settings):
    settings.MEMORYUI_MODEL_PRICES = {"house-model": (1, 2, 0, 0)}
    usage = prices.usage_of({"model": "house-model-7b", "usage": {"input_tokens": 1_000_000, "output_tokens": 0}})
    assert usage.cost == 1


def test_an_unknown_model_shows_tokens_and_no_cost(client, auditor):
    c = store.create_conversation(title="x")
    store.append_message(conversation_id=c.pk, message={
        "kind": "assistant", "content": "hi", "meta": {"model": "house-llm", "usage": {"input_tokens": 7,
                                                                                         "output_tokens": 3}}})
    body = client.get(url(c)).content.decode()
    row = body[body.index('id="p0"'):]
    assert "in 7" in row and "out 3" in row and 'class="cost"' not in row[:row.index("</header>")]
    panel = client.get(f"/conversations/{c.pk}/usage/").content.decode()
    assert "no price known for these models" in panel


def test_the_usage_panel_totals_the_conversation_and_each_fork(client, auditor):
    c = store.create_conversation(title="x")
    meta = {"model": "claude-sonnet-4-5", "usage": {"input_tokens": 1000, "output_tokens": 100}}
    for i in range(4):
        store.append_message(conversation_id=c.pk, message={"kind": "user", "content": "q" * 400})
        store.append_message(conversation_id=c.pk, message={"kind": "assistant", "content": "a",
                                                            **({"meta": meta} if i else {})})
    store.checkpoint_at(conversation_id=c.pk, position=3, summary="s")
    child = store.fork_conversation(conversation_id=c.pk, position=5)
    store.append_message(conversation_id=child.pk, message={"kind": "assistant", "content": "b", "meta": meta})
    response = client.get(f"/conversations/{c.pk}/usage/")
    assert response.status_code == 200
    chart, totals = response.context["chart"], response.context["totals"]
    assert (totals.replies, totals.input, totals.output) == (3, 3000, 300)
    assert response.context["cost"] == "$0.014"  # 3 × (1000×3 + 100×15) / 1e6
    assert [(p.position, p.estimated) for p in chart.calls] == [(1, True), (3, False), (5, False), (7, False)]
    assert chart.calls[0].tokens == len(Message.objects.get(conversation_id=c.pk, position=0).content) // 4
    assert [f["position"] for f in chart.folds] == [3]
    forks = response.context["forks"]
    assert len(forks) == 1 and forks[0]["totals"].replies == 1  # only what the fork added after #5
    body = response.content.decode()
    assert body.count('class="point') == 4 and 'class="point estimated"' in body
    assert f'href="/conversations/{c.pk}/?at=5#p5"' in body  # opened alone: the page's address
    # Loaded into the page: relative to it.
    assert 'href="?at=5#p5"' in client.get(f"/conversations/{c.pk}/usage/", HTTP_HX_REQUEST="true").content.decode()


def test_a_long_session_draws_at_most_the_points_the_chart_has_room_for(client, auditor, monkeypatch):
    from conversations import usage

    monkeypatch.setattr(usage, "MAX_POINTS", 10)
    c = store.create_conversation(title="x")
    meta = lambda n: {"model": "m", "usage": {"input_tokens": n, "output_tokens": 1}}  # noqa: E731
    store.append_messages(conversation_id=c.pk, messages=[
        {"kind": "assistant", "content": "a", "meta": meta(5000 if i == 37 else 100 + i)} for i in range(100)])
    chart = client.get(f"/conversations/{c.pk}/usage/").context["chart"]
    assert len(chart.calls) <= 10 and chart.thinned == 100
    assert 37 in [p.position for p in chart.calls]  # the peak is kept


# ---- the live state poll ------------------------------------------------------------------------


def test_the_state_answers_304_until_something_changes(client, auditor):
    c = store.create_conversation(title="x")
    store.append_message(conversation_id=c.pk, message={"kind": "note", "text": "a"})
    first = client.get(f"/conversations/{c.pk}/state")
    assert first.status_code == 200 and first.json()["next_position"] == 1 and first["ETag"]
    same = client.get(f"/conversations/{c.pk}/state", HTTP_IF_NONE_MATCH=first["ETag"])
    assert same.status_code == 304 and same.content == b""
    store.checkpoint_at(conversation_id=c.pk, position=0, summary="s")
    moved = client.get(f"/conversations/{c.pk}/state", HTTP_IF_NONE_MATCH=first["ETag"])
    assert moved.status_code == 200 and moved.json()["fold"] == 0 and moved["ETag"] != first["ETag"]
    from conversations.ledger import store as ledger
    ledger.set_state(conversation_id=c.pk, state={"a": 1}, expected_version=0)
    assert client.get(f"/conversations/{c.pk}/state", HTTP_IF_NONE_MATCH=moved["ETag"]).status_code == 200


def test_the_state_costs_a_few_queries_and_records_no_access(client, auditor):
    from django.test.utils import CaptureQueriesContext

    from conversations.access.models import ConversationAccess as AccessEvent

    c = store.create_conversation(title="x")
    before = AccessEvent.objects.count()
    with CaptureQueriesContext(connection) as ctx:
        assert client.get(f"/conversations/{c.pk}/state").status_code == 200
    assert AccessEvent.objects.count() == before
    assert len([q for q in ctx.captured_queries if "session" not in q["sql"].lower()
                and "auth_" not in q["sql"].lower()]) <= 8


def test_the_page_answers_4xx_for_what_does_not_exist(client, auditor):
    c = store.create_conversation(title="x")
    store.append_message(conversation_id=c.pk, message={"kind": "note", "text": "a"})
    assert client.get(f"/conversations/{c.pk}/panel/nope/").status_code == 404
    assert client.get(f"/conversations/{c.pk}/raw/5").status_code == 404
    assert client.get("/conversations/not-an-id/state").status_code == 404
    assert client.get(f"/conversations/{c.pk}/panel/facts/").status_code == 200
    assert client.get(f"/conversations/{c.pk}/panel/ledger/").status_code == 200


def test_raw_is_the_stored_text_byte_for_byte(client, auditor):
    c = store.create_conversation(title="x")
    store.append_message(conversation_id=c.pk, message={"kind": "user", "content": "<b>é</b> **x**"})
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT content FROM {Message._meta.db_table} WHERE conversation_id = %s AND position = 0",
                       [Message._meta.get_field("conversation").get_db_prep_value(c.pk, connection)])
        stored = cursor.fetchone()[0]
    response = client.get(f"/conversations/{c.pk}/raw/0")
    assert response.status_code == 200 and response["Content-Type"].startswith("text/plain")
    assert response.content.decode() == stored and response["X-Content-Type-Options"] == "nosniff"


def test_the_state_and_panels_need_a_role(client):
    c = store.create_conversation(title="x")
    assert client.get(f"/conversations/{c.pk}/state").status_code == 302  # to the login page
    _login(client, None, name="norole")
    for path in ("state", "usage/", "panel/facts/", "raw/0"):
        assert client.get(f"/conversations/{c.pk}/{path}").status_code == 403, path
