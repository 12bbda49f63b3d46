"""The search page groups hits by conversation, best match first: counts per
conversation and a total that agree with the index itself (raw SQL), newest first as an
option, titles and subjects searched, pages of conversations, bad parameters a 400."""

import re

import pytest

from conversations import store
from conversations.search import ranked
from conversations.search.params import parse_search
from tests.api_support import Api, error_of, login_as, make_key
from tests.search_support import index_holds, into_the_index

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("answer_shapes")]

FILLER = "the customer wrote again about the order, the parcel, the courier and the weather in town"


def note(conversation, text, kind="note"):
    message = {"kind": kind, "text": text} if kind == "note" else {"kind": kind, "content": text}
    store.append_message(conversation_id=conversation.pk, message=message)


@pytest.fixture
def corpus():
    """`focused`: one row all about a refund, written first. `noisy`: a long session,
    written later, that mentions a refund once in each of 30 long rows."""
    focused = store.create_conversation(title="Order 7", subject="cust:7")
    note(focused, "refund refund: the refund for order 7 was approved")
    note(focused, "thanks")
    noisy = store.create_conversation(title="Long session", subject="cust:8")
    for i in range(30):
        note(noisy, f"{FILLER} {i}, and a refund was mentioned, {FILLER}")
    titled = store.create_conversation(title="Refund escalations", subject="team:billing")
    note(titled, "nothing about money here")
    into_the_index()
    return {"focused": focused, "noisy": noisy, "titled": titled}


def groups_on(body: str) -> list[str]:
    return re.findall(r'<li class="group" data-conversation="([0-9a-f-]+)">', body)


def test_it_puts_the_best_match_first_and_counts_every_row(client, corpus):
    login_as(client, "auditor")
    body = client.get("/search/", {"q": "refund"}).content.decode()
    # A title with the words first, then the conversation whose row is most about them,
    # then the long session (newer, with many more rows that mention it once).
    assert groups_on(body) == [str(corpus["titled"].pk), str(corpus["focused"].pk), str(corpus["noisy"].pk)]
    assert index_holds("refund") == 31
    assert "<strong>31</strong> matching rows in <strong>3</strong> conversations, best match first." in body
    assert "1 matching row<" in body and "30 matching rows" in body and "0 matching rows" in body
    assert "words in its title or subject" in body
    # Three rows of the long session shown, and the way to all 30 of them.
    assert "All 30 rows in this conversation" in body and f"conversation={corpus['noisy'].pk}" in body
    assert body.count('class="hit ') == 1 + 3


def test_newest_first_stays_the_row_list(client, corpus):
    login_as(client, "auditor")
    body = client.get("/search/", {"q": "refund", "order": "newest"}).content.decode()
    assert groups_on(body) == []
    first = re.search(r'href="/conversations/([0-9a-f-]+)/\?at=(\d+)&amp;q=refund#p\d+"', body)
    assert (first.group(1), first.group(2)) == (str(corpus["noisy"].pk), "29")
    assert 'value="newest" selected' in body


def test_titles_and_subjects_are_searched(corpus):
    parsed = parse_search({"q": "billing"})
    results = ranked.search_grouped(parsed.query, filters=parsed.filters)
    assert [(g.conversation_id, g.count, g.title_match) for g in results.groups] == [(corpus["titled"].pk, 0, True)]
    # A word only some clause of the title has is not enough; an excluded word rules it out.
    assert ranked.search_grouped(parse_search({"q": "refund zebra"}).query).groups == []
    assert {g.conversation_id for g in ranked.search_grouped(parse_search({"q": "refund -billing"}).query).groups} \
        == {corpus["focused"].pk, corpus["noisy"].pk}


def test_filters_narrow_the_groups_and_their_counts(corpus):
    parsed = parse_search({"q": "refund", "subject": "cust:8"})
    results = ranked.search_grouped(parsed.query, filters=parsed.filters)
    assert [(g.conversation_id, g.count) for g in results.groups] == [(corpus["noisy"].pk, 30)]
    assert results.total == 30
    parsed = parse_search({"q": "refund"}, kinds=["user"])
    assert ranked.search_grouped(parsed.query, filters=parsed.filters).total == 0
    note(corpus["noisy"], "a refund, please", kind="user")
    results = ranked.search_grouped(parsed.query, filters=parsed.filters)
    assert [(g.conversation_id, g.count) for g in results.groups] == [(corpus["noisy"].pk, 1)]


def test_rows_waiting_to_enter_the_index_are_counted(corpus):
    note(corpus["focused"], "one more refund")  # waits (SQLite) until 64 rows have come
    parsed = parse_search({"q": "refund"})
    results = ranked.search_grouped(parsed.query, filters=parsed.filters)
    focused = next(g for g in results.groups if g.conversation_id == corpus["focused"].pk)
    assert focused.count == 2 and {h.position for h in focused.hits} == {0, 2}
    assert results.total == 32


def test_conversations_come_in_pages(client):
    for i in range(12):
        c = store.create_conversation(title=f"Ticket {i}")
        note(c, f"refund number {i}")
    login_as(client, "auditor")
    first = client.get("/search/", {"q": "refund"}).content.decode()
    assert len(groups_on(first)) == 10 and "More conversations" in first
    more = re.search(r'id="search-groups-more" class="more-row"><a class="more" href="([^"]+)"', first).group(1)
    rest = client.get("/search/" + more.replace("&amp;", "&"),
                      headers={"HX-Request": "true", "HX-Target": "search-groups-more"}).content.decode()
    assert "<html" not in rest and len(groups_on(rest)) == 2 and "More conversations" not in rest
    assert not set(groups_on(first)) & set(groups_on(rest))


@pytest.mark.parametrize("params, field", [
    ({"q": "refund", "order": "oldest"}, "order"),
    ({"q": "refund", "page": "0"}, "page"),
    ({"q": "refund", "page": "١"}, "page"),
    ({"q": "refund", "page": "99999999999999999999"}, "page"),
])
def test_a_bad_order_or_page_is_a_400_naming_it(client, corpus, params, field):
    login_as(client, "auditor")
    r = client.get("/search/", params)
    assert r.status_code == 400 and f"<code>{field}</code>" in r.content.decode()


def test_past_the_candidates_it_says_more_and_offers_every_row(client, corpus, monkeypatch):
    monkeypatch.setattr(ranked, "CANDIDATES", 5)
    login_as(client, "auditor")
    body = client.get("/search/", {"q": "refund"}).content.decode()
    # The newest five hits are ranked (all in the long session), and the page says there are more.
    assert "More than <strong>5</strong> matching rows" in body and "order=newest" in body
    assert str(corpus["noisy"].pk) in groups_on(body) and str(corpus["focused"].pk) not in groups_on(body)
    assert "5+ matching rows" in body


def test_the_api_ranks_on_request_and_keeps_newest_as_its_default(client, corpus):
    reader = Api(client, make_key(["read"], name="reader"))
    newest = reader.get("/search", {"q": "refund"}).json()
    assert newest["items"][0]["conversation_id"] == str(corpus["noisy"].pk) and newest["total"] is None
    body = reader.get("/search", {"q": "refund", "order": "relevance"}).json()
    assert [(i["conversation_id"], i["position"]) for i in body["items"]][:1] == [(str(corpus["focused"].pk), 0)]
    assert body["total"] == 31 and body["total_is_lower_bound"] is False and body["next"] is None
    assert len(body["items"]) == 1 + 3


def test_the_api_pages_ranked_conversations_by_cursor(client):
    for i in range(12):
        c = store.create_conversation(title=f"Ticket {i}")
        note(c, f"refund number {i}")
    reader = Api(client, make_key(["read"], name="reader"))
    first = reader.get("/search", {"q": "refund", "order": "relevance"}).json()
    assert len(first["items"]) == 10 and first["next"]
    rest = reader.get("/search", {"q": "refund", "order": "relevance", "cursor": first["next"]}).json()
    assert len(rest["items"]) == 2 and rest["next"] is None
    assert not {i["conversation_id"] for i in first["items"]} & {i["conversation_id"] for i in rest["items"]}
    bad = reader.get("/search", {"q": "refund", "order": "relevance", "cursor": "xyz"})
    assert bad.status_code == 400 and error_of(bad)["field"] == "cursor"
    newest_cursor = reader.get("/search", {"q": "refund", "limit": 1}).json()["next"]
    assert reader.get("/search", {"q": "refund", "order": "relevance", "cursor": newest_cursor}).status_code == 400
    bad = reader.get("/search", {"q": "refund", "order": "best"})
    assert bad.status_code == 400 and error_of(bad)["field"] == "order"
