import pytest
from django.utils import timezone

from conversations import store
from conversations.facts import recall as facts_recall
from conversations.facts import store as facts
from conversations.facts.models import Fact, FactAccess, FactEvent
from conversations.models import AuditEvent
from conversations.roles import ADMIN, AUDITOR, REVIEWER
from tests.api_support import login_as
from tests.retention_support import delete_conversation

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true"}


def login(client, role=None, name=None):
    return login_as(client, role, name or role or "nobody")


@pytest.fixture
def reviewer(client):
    return login(client, REVIEWER)


@pytest.fixture
def source():
    c = store.create_conversation(title="Order 7", subject="cust:7")
    for text in ("hello", "I want a replacement, not a refund", "<b>ok</b>", "thanks", "bye"):
        store.append_message(conversation_id=c.pk, message={"kind": "user", "content": text})
    return c


@pytest.fixture
def proposal(source):
    return facts.propose_fact(subject="cust:7", text="Prefers <replacements>", category="preference",
                              importance=7, created_by="key:agent", source_conversation_id=source.pk,
                              source_position=1)


PAGES = ["/facts/", "/facts/subject/{pk}/", "/facts/subject/", "/facts/expiring/", "/facts/forgetting/",
         "/facts/access-log/"]


@pytest.mark.parametrize("url", PAGES)
def test_it_forbids_auditors_and_users_without_a_role(client, url, proposal):
    url = url.format(pk=proposal.pk)
    login(client, AUDITOR)
    assert client.get(url).status_code == 403
    assert client.post("/facts/subject/", {"s": "cust:7"}).status_code == 403
    client.logout()
    login(client, None, name="plain")
    assert client.get(url).status_code == 403
    assert not FactAccess.objects.exists()


@pytest.mark.parametrize("action", ["approve", "reject", "edit-approve", "invalidate", "supersede", "keep"])
def test_it_forbids_auditors_every_action(client, proposal, action):
    login(client, AUDITOR)
    r = client.post(f"/facts/{proposal.pk}/{action}", {"reason": "x", "text": "y"})
    assert r.status_code == 403
    assert FactEvent.objects.count() == 1


def test_it_sends_anonymous_people_to_log_in(client):
    r = client.get("/facts/")
    assert r.status_code == 302 and r["Location"].startswith("/login/")


def test_it_shows_the_queue_with_the_source_in_context(client, reviewer, proposal, source):
    r = client.get("/facts/")
    assert r.status_code == 200
    html = r.content.decode()
    assert "Prefers &lt;replacements&gt;" in html
    assert "I want a replacement, not a refund" in html
    assert "&lt;b&gt;ok&lt;/b&gt;" in html  # message content is escaped
    assert f"/conversations/{source.pk}/?at=1#p1" in html
    assert FactAccess.objects.filter(subject="cust:7", view="review queue").count() == 1


def test_the_queue_says_whether_a_duplicate_shares_the_words_or_only_the_meaning(client, reviewer):
    def approved(text):
        f = facts.propose_fact(subject="cust:7", text=text, importance=5, created_by="key:agent")
        return facts.approve_fact(fact_id=f.pk, actor="user:rev")

    refund, email = approved("Asked for a refund on order 7"), approved("Prefers email to phone calls")
    by_meaning = facts.propose_fact(subject="cust:7", text="Wants their money back for order 7", importance=5,
                                    created_by="key:agent")
    by_words = facts.propose_fact(subject="cust:7", text="Prefers email to phone calls.", importance=5,
                                  created_by="key:agent")
    html = client.get("/facts/").content.decode()
    item = html[html.index(f'id="fact-{by_meaning.pk}"'):html.index(f'id="fact-{by_words.pk}"')]
    assert f'data-fact="{refund.pk}"' in item and "alike by meaning" in item and "same words" not in item
    assert f'data-fact="{email.pk}"' in html[html.index(f'id="fact-{by_words.pk}"'):]
    assert "same words" in html[html.index(f'id="fact-{by_words.pk}"'):]


def test_it_lists_the_queue_oldest_first(client, reviewer):
    a = facts.propose_fact(subject="s", text="first", importance=1, created_by="k")
    b = facts.propose_fact(subject="s", text="second", importance=1, created_by="k")
    html = client.get("/facts/").content.decode()
    assert html.index(f'id="fact-{a.pk}"') < html.index(f'id="fact-{b.pk}"')


def test_it_says_source_removed_when_the_conversation_is_gone(client, reviewer, proposal, source):
    delete_conversation(source.pk)
    html = client.get("/facts/").content.decode()
    assert "Source removed" in html
    assert Fact.objects.get(pk=proposal.pk).source_position == 1


def test_it_approves_with_htmx_and_the_item_disappears(client, reviewer, proposal):
    r = client.post(f"/facts/{proposal.pk}/approve", **HTMX)
    assert r.status_code == 200
    html = r.content.decode()
    assert f'id="fact-{proposal.pk}"' not in html
    assert 'id="queue-count" hx-swap-oob="true">0<' in html
    assert Fact.objects.get(pk=proposal.pk).status == "approved"
    assert AuditEvent.objects.filter(action="fact.approved", actor=f"user:{reviewer.username}").exists()


def test_it_approves_without_javascript(client, reviewer, proposal):
    r = client.post(f"/facts/{proposal.pk}/approve")
    assert r.status_code == 302 and r["Location"] == f"/facts/?reviewed={proposal.pk}"


def _propose(text, subject="cust:7"):
    return facts.propose_fact(subject=subject, text=text, importance=5, created_by="key:agent")


def test_without_javascript_it_goes_on_at_the_next_proposal_with_the_status_and_undo(client, reviewer):
    first, second, third = _propose("one"), _propose("two"), _propose("three")
    r = client.post(f"/facts/{second.pk}/reject", {"reason": "hearsay"})
    # The next proposal is the one after the decided one, not the first.
    assert r["Location"] == f"/facts/?reviewed={second.pk}#fact-{third.pk}"
    html = client.get(r["Location"]).content.decode()
    assert (f'id="fact-{third.pk}" tabindex="0" data-fact="{third.pk}" '
            f'aria-labelledby="fact-{third.pk}-text" autofocus') in html
    assert f"Rejected fact {second.pk}." in html
    assert f'action="/facts/{second.pk}/undo"' in html
    # At the end of the queue it goes back to the one before.
    r = client.post(f"/facts/{third.pk}/approve")
    assert r["Location"] == f"/facts/?reviewed={third.pk}#fact-{first.pk}"
    # Undo: the proposal is back, focused, and the status says so (no second undo).
    r = client.post(f"/facts/{second.pk}/undo")
    assert r["Location"] == f"/facts/?reviewed={second.pk}#fact-{second.pk}"
    html = client.get(r["Location"]).content.decode()
    assert f"Review of fact {second.pk} undone: it is back in the queue." in html
    assert f'data-fact="{second.pk}" aria-labelledby="fact-{second.pk}-text" autofocus' in html
    assert "/undo" not in html
    assert [f.pk for f in Fact.objects.pending()] == [first.pk, second.pk]


def test_with_htmx_the_status_carries_the_undo_and_undo_brings_the_item_back(client, reviewer):
    first, second = _propose("one"), _propose("two")
    r = client.post(f"/facts/{first.pk}/approve", **HTMX)
    html = r.content.decode()
    assert 'id="queue-status"' in html and f"Approved fact {first.pk}." in html
    assert f'hx-post="/facts/{first.pk}/undo"' in html
    r = client.post(f"/facts/{first.pk}/undo", **HTMX)
    assert r.status_code == 200
    html = r.content.decode()
    assert html.index(f'id="fact-{first.pk}"') < html.index(f'id="fact-{second.pk}"')  # back in its place
    assert (f'id="fact-{first.pk}" tabindex="0" data-fact="{first.pk}" '
            f'aria-labelledby="fact-{first.pk}-text" autofocus data-focus') in html
    assert 'id="queue-count" hx-swap-oob="true">2<' in html
    assert AuditEvent.objects.filter(action="fact.review_undone", actor=f"user:{reviewer.username}").exists()


def test_an_undo_that_is_too_late_says_why_and_changes_nothing(client, reviewer):
    p = _propose("one")
    facts.approve_fact(fact_id=p.pk, actor="user:rev")
    facts_recall.recall(subject="cust:7")
    r = client.post(f"/facts/{p.pk}/undo", **HTMX)
    assert r.status_code == 409 and r["HX-Reswap"] == "none"
    assert "an agent has recalled it" in r.content.decode()
    r = client.post(f"/facts/{p.pk}/undo", follow=True)
    assert "an agent has recalled it" in r.content.decode()
    assert Fact.objects.get(pk=p.pk).status == "approved"


def test_auditors_cannot_undo(client, proposal):
    facts.approve_fact(fact_id=proposal.pk, actor="user:rev")
    login(client, AUDITOR)
    assert client.post(f"/facts/{proposal.pk}/undo").status_code == 403
    assert Fact.objects.get(pk=proposal.pk).status == "approved"


def test_each_proposal_shows_the_subjects_approved_facts_and_flags_a_duplicate(client, reviewer, proposal):
    known = _propose("Prefers replacements.")
    facts.approve_fact(fact_id=known.pk, actor="user:rev")
    other = _propose("Orders on Mondays")
    facts.approve_fact(fact_id=other.pk, actor="user:rev")
    html = client.get("/facts/").content.decode()
    item = html[html.index(f'id="fact-{proposal.pk}"'):]
    assert "Likely duplicate" in item
    assert f'#fact-{known.pk}">#{known.pk}</a>: approved already.' in item
    assert "Approved about cust:7" in item and "Orders on Mondays" in item
    assert f'<li class="known is-duplicate" data-fact="{known.pk}">' in item
    assert f'<li class="known" data-fact="{other.pk}">' in item


def test_a_bad_reviewed_parameter_is_a_400(client, reviewer):
    assert client.get("/facts/?reviewed=abc").status_code == 400
    assert client.get("/facts/?reviewed=99999").status_code == 200


def test_it_rejects_with_a_reason(client, reviewer, proposal):
    r = client.post(f"/facts/{proposal.pk}/reject", {"reason": "hearsay"}, **HTMX)
    assert r.status_code == 200
    assert FactEvent.objects.get(fact=proposal, kind="rejected").reason == "hearsay"


def test_it_needs_a_reason_to_reject_and_writes_nothing(client, reviewer, proposal):
    r = client.post(f"/facts/{proposal.pk}/reject", {"reason": "  "}, **HTMX)
    assert r.status_code == 422
    assert "reason must not be blank" in r.content.decode()
    assert f'id="fact-{proposal.pk}"' in r.content.decode()
    r = client.post(f"/facts/{proposal.pk}/reject", {"reason": ""})
    assert r.status_code == 422
    assert Fact.objects.get(pk=proposal.pk).status == "proposed"
    assert FactEvent.objects.filter(fact=proposal).count() == 1


def test_it_edits_and_approves(client, reviewer, proposal):
    r = client.post(f"/facts/{proposal.pk}/edit-approve",
                    {"text": "Prefers replacements", "category": "preference", "importance": "8", "reason": ""},
                    **HTMX)
    assert r.status_code == 200
    new = Fact.objects.get(superseded_by__isnull=True, status="approved")
    assert (new.text, new.importance) == ("Prefers replacements", 8)
    assert Fact.objects.get(pk=proposal.pk).superseded_by_id == new.pk


@pytest.mark.parametrize("form, field", [
    ({"text": " ", "importance": "5"}, "text"),
    ({"text": "x", "importance": "11"}, "importance"),
    ({"text": "x", "importance": "many"}, "importance"),
    ({"text": "x", "category": "gossip"}, "category"),
])
def test_it_refuses_a_bad_edit_and_writes_nothing(client, reviewer, proposal, form, field):
    r = client.post(f"/facts/{proposal.pk}/edit-approve", form, **HTMX)
    assert r.status_code == 422
    assert Fact.objects.count() == 1
    assert FactEvent.objects.count() == 1


def test_it_refuses_to_review_a_decided_fact(client, reviewer, proposal):
    facts.approve_fact(fact_id=proposal.pk, actor="user:other")
    r = client.post(f"/facts/{proposal.pk}/reject", {"reason": "late"}, **HTMX)
    assert r.status_code == 422 or r.status_code == 409
    r = client.post(f"/facts/{proposal.pk}/approve")
    assert r.status_code == 409
    assert FactEvent.objects.filter(fact=proposal).count() == 2


def test_it_404s_an_unknown_fact(client, reviewer):
    assert client.post("/facts/999/approve").status_code == 404


def test_it_shows_a_subject_and_logs_the_read(client, reviewer, proposal):
    facts.approve_fact(fact_id=proposal.pk, actor="user:r")
    old = facts.propose_fact(subject="cust:7", text="Lives in Leeds", importance=3, created_by="k")
    facts.approve_fact(fact_id=old.pk, actor="user:r")
    facts.invalidate_fact(fact_id=old.pk, actor="user:r", reason="moved away")
    r = client.get(f"/facts/subject/{old.pk}/")
    assert r.status_code == 200
    html = r.content.decode()
    assert "Prefers &lt;replacements&gt;" in html
    assert "moved away" in html and "invalidated" in html
    log = FactAccess.objects.get(subject="cust:7")
    assert (log.actor, log.view) == (f"user:{reviewer.username}", "subject")


def test_it_shows_a_subject_as_of_a_date(client, reviewer, proposal):
    facts.approve_fact(fact_id=proposal.pk, actor="user:r")
    page = f"/facts/subject/{proposal.pk}/"
    r = client.get(page, {"as_of": "2000-01-01"})
    assert r.status_code == 200
    assert "Believed true then" in r.content.decode()
    assert r.context["believed"] == [] and r.context["on_record"] == []
    today = timezone.now().date().isoformat()
    r = client.get(page, {"as_of": today})
    assert [f.pk for f in r.context["on_record"]] == [proposal.pk]
    assert client.get(page, {"as_of": "yesterday"}).status_code == 400


def test_it_invalidates_and_supersedes_from_the_subject_page(client, reviewer, proposal):
    facts.approve_fact(fact_id=proposal.pk, actor="user:r")
    r = client.post(f"/facts/{proposal.pk}/supersede", {"text": "Prefers swaps", "reason": "wording"})
    assert r.status_code == 302
    new = Fact.objects.get(text="Prefers swaps")
    # The subject page's form leads to the confirmation, carrying what was typed; nothing changes yet.
    r = client.post(f"/facts/{new.pk}/invalidate", {"reason": "changed mind", "invalid_at": ""})
    html = r.content.decode()
    assert r.status_code == 422 and f"Invalidate fact {new.pk}?" in html and 'value="changed mind"' in html
    assert "Prefers swaps" in html and "no longer recall" in html
    assert Fact.objects.get(pk=new.pk).invalid_at is None and not FactEvent.objects.filter(kind="invalidated").exists()
    r = client.post(f"/facts/{new.pk}/invalidate", {"reason": "changed mind", "invalid_at": "", "confirm": "yes"})
    assert r.status_code == 302
    assert Fact.objects.get(pk=new.pk).invalid_at is not None
    # Twice: refused with a message, nothing written.
    r = client.post(f"/facts/{new.pk}/invalidate", {"reason": "again", "confirm": "yes"}, follow=True)
    assert "already invalidated" in r.content.decode()
    assert FactEvent.objects.filter(fact=new, kind="invalidated").count() == 1


def test_the_forgetting_page_asks_before_it_invalidates(client, reviewer, proposal, settings):
    facts.approve_fact(fact_id=proposal.pk, actor="user:r")
    settings.MEMORYUI_FORGET_THRESHOLD = 2  # every current fact is a candidate
    html = client.get("/facts/forgetting/").content.decode()
    link = f'href="/facts/{proposal.pk}/invalidate?next=%2Ffacts%2Fforgetting%2F&amp;reason=no+longer+used"'
    assert link in html and "<button type=\"submit\">Invalidate</button>" not in html
    panel = client.get(f"/facts/{proposal.pk}/invalidate", {"next": "/facts/forgetting/", "reason": "no longer used"})
    assert panel.status_code == 200 and b'value="no longer used"' in panel.content
    assert b'name="next" value="/facts/forgetting/"' in panel.content
    assert Fact.objects.get(pk=proposal.pk).invalid_at is None
    done = client.post(f"/facts/{proposal.pk}/invalidate",
                       {"reason": "no longer used", "next": "/facts/forgetting/", "confirm": "yes"})
    assert done.status_code == 302 and done["Location"] == "/facts/forgetting/"
    assert Fact.objects.get(pk=proposal.pk).invalid_at is not None


def test_it_lists_expiring_facts(client, reviewer):
    f = facts.propose_fact(subject="s", text="soon gone", importance=1, created_by="k", retention_days=3)
    facts.propose_fact(subject="s", text="stays", importance=1, created_by="k", retention_days=300)
    html = client.get("/facts/expiring/").content.decode()
    assert "soon gone" in html and "stays" not in html
    assert f.pk


def test_it_lists_forgetting_candidates_and_keeps_one(client, reviewer, settings):
    settings.MEMORYUI_FORGET_THRESHOLD = 0.5
    f = facts.propose_fact(subject="s", text="Drinks oolong", importance=1, created_by="k")
    facts.approve_fact(fact_id=f.pk, actor="u")
    Fact.objects.filter(pk=f.pk).update(last_accessed_at=timezone.now() - timezone.timedelta(days=3))
    assert "Drinks oolong" in client.get("/facts/forgetting/").content.decode()
    assert client.post(f"/facts/{f.pk}/keep", {"next": "/facts/forgetting/"}).status_code == 302
    assert "Drinks oolong" not in client.get("/facts/forgetting/").content.decode()
    assert Fact.objects.filter(pk=f.pk, status="approved").exists()


def test_it_shows_the_access_log_to_admins_only(client, proposal):
    login(client, REVIEWER, name="rev")
    client.get(f"/facts/subject/{proposal.pk}/")
    assert client.get("/facts/access-log/").status_code == 403
    client.logout()
    login(client, ADMIN, name="boss")
    r = client.get("/facts/access-log/")
    assert r.status_code == 200
    assert "user:rev" in r.content.decode() and "cust:7" in r.content.decode()
    assert client.get("/facts/access-log/", {"before": "x"}).status_code == 400


def test_it_404s_a_fact_id_too_large_for_the_database(client, reviewer):
    assert client.post(f"/facts/{10**30}/approve").status_code == 404
    assert client.get(f"/facts/{10**30}/").status_code == 404


@pytest.mark.parametrize("as_of", ["2026-13-45", "2026-02-30T25:00", "x" * 500])
def test_it_answers_a_bad_as_of_with_400(client, reviewer, as_of):
    fact = facts.propose_fact(subject="cust:7", text="t", importance=1, created_by="k")
    assert client.get(f"/facts/subject/{fact.pk}/", {"as_of": as_of}).status_code == 400


def test_the_open_form_posts_the_subject_and_lands_on_an_address_without_it(client, reviewer, proposal):
    r = client.post("/facts/subject/", {"s": " cust:7 "})
    assert r.status_code == 302 and r["Location"] == f"/facts/subject/{proposal.pk}/"
    assert "cust" not in r["Location"]
    page = client.get(r["Location"])
    assert "Prefers &lt;replacements&gt;" in page.content.decode()
    # A subject with no facts: its (empty) page, answered to the POST, the read still logged.
    r = client.post("/facts/subject/", {"s": "cust:nobody"})
    assert r.status_code == 200 and "cust:nobody" in r.content.decode()
    assert FactAccess.objects.filter(subject="cust:nobody").exists()
    assert client.post("/facts/subject/", {"s": "x\x00"}).status_code == 400


def test_a_subject_in_the_address_is_not_read(client, reviewer, proposal):
    r = client.get("/facts/subject/", {"s": "cust:7"})
    assert r.status_code == 200 and "Subjects with facts" in r.content.decode()
    assert not FactAccess.objects.exists()


def test_the_access_log_filters_by_a_row_not_by_a_subject_in_the_address(client, proposal):
    facts.record_access(actor="user:a", subject="cust:7")
    facts.record_access(actor="user:b", subject="cust:8")
    login(client, ADMIN, name="boss")
    html = client.get("/facts/access-log/").content.decode()
    assert "?subject=" not in html and "cust%3A7" not in html
    r = client.post("/facts/access-log/", {"subject": "cust:7"})
    assert r.status_code == 302 and "cust" not in r["Location"] and "?like=" in r["Location"]
    rows = client.get(r["Location"]).context["rows"]
    assert {row.subject for row in rows} == {"cust:7"}
    assert client.get("/facts/access-log/", {"like": "999999"}).status_code == 404
