"""Every input a held-out audit drove to a 500, answered with a clear 4xx instead.

Each case names the door, the input and the field the answer must name; nothing is
written when a request is refused. Run on SQLite and PostgreSQL (NUL reaches a 500
only on PostgreSQL, which cannot store it; the 4xx is the same on both).
"""

import base64
import json
import uuid

import pytest

from conversations import api_keys, store
from conversations.facts import store as facts
from conversations.facts.models import Fact, FactAccess
from conversations.retention.models import DeletionReceipt, PruneRun
from tests.retention_support import make_user

pytestmark = pytest.mark.django_db

OVERFLOW_HIGH = "9999-12-31T23:59:59-23:59"  # past year 9999 once shifted to UTC
OVERFLOW_LOW = "0001-01-01T00:00:00+23:59"  # before year 1 once shifted to UTC


def bearer(*scopes):
    _, secret = api_keys.create_api_key(name="k-" + "-".join(scopes), scopes=list(scopes))
    return {"HTTP_AUTHORIZATION": f"Bearer {secret}"}


def post_json(client, url, raw: str, headers):
    return client.post(url, raw, content_type="application/json", **headers)


def error_of(response) -> dict:
    body = response.json()
    assert set(body) == {"error"}, body
    return body["error"]


def crafted_cursor(listing: str, at: str, key: str) -> str:
    raw = json.dumps([listing, at, key]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


@pytest.fixture
def admin(client):
    user = make_user("boss", "admin")
    client.force_login(user)
    return user


@pytest.fixture
def source():
    c = store.create_conversation(title="t", subject="cust:7")
    store.append_message(conversation_id=c.pk, message={"kind": "user", "content": "hello"})
    return c


# ---- facts API ----------------------------------------------------------------------

FACT = {"subject": "cust:7", "text": "Prefers replacements", "category": "preference", "importance": 5}


def fact_json(**change) -> str:
    """A fact body as raw JSON text, so a lone surrogate can be sent escaped as \\ud800."""
    body = {**FACT, **change}
    return json.dumps(body).replace("SURROGATE", "\\ud800")


@pytest.mark.parametrize("raw, field", [
    (fact_json(text="half a pair SURROGATE"), "text"),
    (fact_json(subject="cust:SURROGATE"), "subject"),
    (fact_json(retention_days=10**12), "retention_days"),
    (fact_json(valid_from=OVERFLOW_LOW), "valid_from"),
    (fact_json(expires_at=OVERFLOW_HIGH), "expires_at"),
    (fact_json(subject="cust:\u00007"), "subject"),
    (fact_json(text="nul\u0000byte"), "text"),
    (fact_json(importance="5"), "importance"),
    (fact_json(source_position=2**64), "source_position"),
    (fact_json(valid_from="yesterday"), "valid_from"),
    (fact_json(valid_from="2026-01-31T12:00:00"), "valid_from"),
    (fact_json(unknown_field=1), "unknown_field"),
])
def test_the_facts_api_refuses_what_reached_a_500_with_422(client, raw, field):
    response = post_json(client, "/api/v1/facts", raw, bearer("facts:write"))
    assert response.status_code == 422, response.content
    assert error_of(response)["field"] == field
    assert Fact.objects.count() == 0


def test_the_facts_api_refuses_a_surrogate_in_an_invalidation_reason(client):
    fact = facts.propose_fact(subject="cust:7", text="t", importance=5, created_by="test")
    facts.approve_fact(fact_id=fact.pk, actor="test")
    response = post_json(client, f"/api/v1/facts/{fact.pk}/invalidate", '{"reason": "moved \\udc00"}',
                         bearer("facts:write"))
    assert response.status_code == 422
    assert error_of(response)["field"] == "reason"
    fact.refresh_from_db()
    assert fact.invalid_at is None


def test_the_facts_api_refuses_an_overflowing_invalid_at(client):
    fact = facts.propose_fact(subject="cust:7", text="t", importance=5, created_by="test")
    facts.approve_fact(fact_id=fact.pk, actor="test")
    response = post_json(client, f"/api/v1/facts/{fact.pk}/invalidate",
                         json.dumps({"reason": "moved", "invalid_at": OVERFLOW_HIGH}), bearer("facts:write"))
    assert response.status_code == 422 and error_of(response)["field"] == "invalid_at"


@pytest.mark.parametrize("url", [
    "/api/v1/facts?subject=cust%007",
    "/api/v1/facts/recall?subject=cust%007",
    "/api/v1/facts/recall?subject=cust:7&query=a%00b",
])
def test_the_facts_api_refuses_nul_in_a_query_with_422(client, url):
    response = client.get(url, **bearer("facts:read"))
    assert response.status_code == 422, response.content
    assert error_of(response)["field"] in ("subject", "query")


def test_the_facts_store_refuses_an_overflowing_date_from_any_door():
    from datetime import datetime, timedelta, timezone

    from conversations.errors import InvalidInput

    late = datetime(9999, 12, 31, 23, 59, 59, tzinfo=timezone(-timedelta(hours=23, minutes=59)))
    with pytest.raises(InvalidInput) as exc:
        facts.propose_fact(subject="cust:7", text="t", importance=5, created_by="test", expires_at=late)
    assert exc.value.field == "expires_at"
    with pytest.raises(InvalidInput) as exc:
        facts.propose_fact(subject="cust:7", text="t", importance=5, created_by="test", retention_days=10**12)
    assert exc.value.field == "retention_days"
    assert Fact.objects.count() == 0


def test_a_far_future_expiry_that_fits_is_kept(client):
    response = post_json(client, "/api/v1/facts", fact_json(expires_at="9999-12-31T23:59:59Z"), bearer("facts:write"))
    assert response.status_code == 201, response.content
    assert response.json()["expires_at"].startswith("9999-12-31T23:59:59")


# ---- pages --------------------------------------------------------------------------


def test_the_list_refuses_a_cursor_that_overflows_in_utc(client, admin, source):
    for at in (OVERFLOW_HIGH, OVERFLOW_LOW):
        cursor = crafted_cursor("conversations", at, source.pk.hex)
        response = client.get("/", {"cursor": cursor})
        assert response.status_code == 400, at
        assert b"cursor" in response.content


def test_the_api_list_refuses_a_cursor_that_overflows_in_utc(client, source):
    cursor = crafted_cursor("recent", OVERFLOW_HIGH, source.pk.hex)
    response = client.get("/api/v1/conversations", {"cursor": cursor}, **bearer("read"))
    assert response.status_code == 400 and error_of(response)["code"] == "invalid_cursor"


def test_the_audit_log_refuses_a_cursor_that_overflows_in_utc(client, admin):
    for at in (OVERFLOW_HIGH, OVERFLOW_LOW):
        response = client.get("/admin/audit/", {"after": crafted_cursor("audit", at, "5")})
        assert response.status_code == 400, at


def test_the_audit_log_lists_until_the_last_day_of_the_calendar(client, admin):
    store.record_audit(actor="user:a", action="fork.created", target_type="conversation", target_id="c1", detail={})
    page = client.get("/admin/audit/", {"until": "9999-12-31"})
    assert page.status_code == 200 and b"fork.created" in page.content
    export = client.get("/admin/audit/export.jsonl", {"until": "9999-12-31", "since": "0001-01-01"})
    assert export.status_code == 200
    lines = [json.loads(line) for line in b"".join(export.streaming_content).decode().splitlines()]
    assert [e["action"] for e in lines] == ["fork.created"]


@pytest.mark.parametrize("query", ["actor=user%00x", "action=fork%00"])
def test_the_audit_log_refuses_nul_in_a_filter(client, admin, query):
    assert client.get(f"/admin/audit/?{query}").status_code == 422
    assert client.get(f"/admin/audit/export.jsonl?{query}").status_code == 422


def test_the_list_refuses_nul_in_the_search(client, admin, source):
    response = client.get("/?q=cust%00")
    assert response.status_code == 400 and b"q" in response.content


@pytest.mark.parametrize("digit", ["²", "٣", "1_0", "99999999999999999999999999999", "-1"])
def test_prune_runs_and_the_access_log_refuse_what_is_not_ascii_digits(client, admin, digit):
    assert client.get("/admin/prune/runs/", {"before": digit}).status_code == 400
    assert client.get("/facts/access-log/", {"before": digit}).status_code == 400


@pytest.mark.parametrize("days", ["²", "٣", " 9 0 ", "10**12"])
def test_the_prune_page_refuses_a_period_that_is_not_ascii_digits(client, admin, days):
    assert client.get("/admin/prune/", {"older_than_days": days}).status_code == 422
    assert client.post("/admin/prune/run/", {"older_than_days": days}).status_code == 422
    assert PruneRun.objects.count() == 0


@pytest.mark.parametrize("as_of", [OVERFLOW_HIGH, OVERFLOW_LOW, "10000-01-01", "2026-02-30", "٢٠٢٦-01-01"])
def test_a_subject_page_refuses_an_as_of_that_overflows(client, admin, as_of):
    fact = facts.propose_fact(subject="cust:7", text="t", importance=5, created_by="test")
    assert client.get(f"/facts/subject/{fact.pk}/", {"as_of": as_of}).status_code == 400


def test_a_subject_page_shows_the_last_day_of_the_calendar(client, admin):
    fact = facts.propose_fact(subject="cust:7", text="t", importance=5, created_by="test")
    assert client.get(f"/facts/subject/{fact.pk}/", {"as_of": "9999-12-31"}).status_code == 200


def test_the_deletion_preview_refuses_nul_in_the_subject(client, admin, source):
    response = client.post("/admin/deletion-requests/preview/", {"subject": "cust:\x007", "conversation_ids": ""})
    assert response.status_code == 422 and b"NUL" in response.content
    response = client.post("/admin/deletion-requests/execute/",
                           {"subject": "cust:\x007", "conversation_ids": "", "confirm": "yes"})
    assert response.status_code == 422
    assert DeletionReceipt.objects.count() == 0


def test_the_deletion_api_refuses_nul_and_surrogates_in_the_subject(client, source):
    for raw in ('{"subject": "cust:\\u00007", "dry_run": true}', '{"subject": "cust:\\ud8007"}'):
        response = post_json(client, "/api/v1/deletion-requests", raw, bearer("admin"))
        assert response.status_code == 422 and error_of(response)["field"] == "subject"
    assert DeletionReceipt.objects.count() == 0


def test_the_facts_access_log_refuses_nul_in_its_filter(client, admin):
    facts.record_access(actor="user:a", subject="cust:7")
    assert client.post("/facts/access-log/", {"subject": "cust\x00"}).status_code == 400
    assert FactAccess.objects.count() == 1


def test_the_api_refuses_nul_in_the_conversation_subject_filter(client):
    response = client.get("/api/v1/conversations?subject=cust%007", **bearer("read"))
    assert response.status_code == 422 and error_of(response)["field"] == "subject"


def test_an_unknown_cursor_listing_is_refused_everywhere(client, admin, source):
    # A cursor of one listing is refused by another: an API cursor on the page, and back.
    api_cursor = crafted_cursor("recent", "2026-01-01T00:00:00+00:00", source.pk.hex)
    page_cursor = crafted_cursor("conversations", "2026-01-01T00:00:00+00:00", source.pk.hex)
    assert client.get("/", {"cursor": api_cursor}).status_code == 400
    assert client.get("/api/v1/conversations", {"cursor": page_cursor}, **bearer("read")).status_code == 400
    assert client.get("/admin/audit/", {"after": crafted_cursor("audit", "2026-01-01T00:00:00+00:00",
                                                                 str(uuid.uuid4()))}).status_code == 400


@pytest.mark.parametrize("query, field", [
    ("to=9999-12-31", None),
    ("from=0001-01-01&to=9999-12-31", None),
    (f"from={OVERFLOW_LOW}", "from"),
    (f"to={OVERFLOW_HIGH}", "to"),
    ("limit=٣", "limit"),
    ("limit=²", "limit"),
    ("cursor=" + crafted_cursor("search", "٣", "1"), "cursor"),
])
def test_search_reads_dates_limits_and_cursors_by_the_same_rules(client, admin, source, query, field):
    page = client.get(f"/search/?q=hello&{query}")
    api = client.get(f"/api/v1/search?q=hello&{query}", **bearer("read"))
    if field is None:
        assert page.status_code == 200 and api.status_code == 200, (page.content[:200], api.content)
    else:
        assert page.status_code == 400
        assert api.status_code in (400, 422) and error_of(api)["field"] == field


@pytest.mark.parametrize("query", ["before=²", "before=٣", "actor=user%00x", "before=99999999999999999999999"])
def test_the_conversation_access_log_refuses_what_is_not_a_filter(client, admin, query):
    assert client.get(f"/admin/access/?{query}").status_code == 400
