"""The entries door (the Claude Agent SDK's SessionStore appends) never answers 500: batches of
entries with any shape of link, type, content block and value, on both databases."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.api_support import Api, make_key

pytestmark = pytest.mark.django_db

_vals = st.one_of(st.none(), st.integers(-2, 3), st.text(max_size=5), st.sampled_from(["u1", "a1", "u2", "x\x00", "s"]),
                  st.lists(st.integers(), max_size=2), st.dictionaries(st.text(max_size=3), st.integers(), max_size=2))
_entry = st.fixed_dictionaries({}, optional={
    "type": st.sampled_from(["user", "assistant", "system", "summary", "custom-title", "progress", "martian", 5]),
    "uuid": st.sampled_from(["u1", "a1", "u2", "a2", "cb", "u\x00"]) | _vals,
    "parentUuid": st.sampled_from(["u1", "a1", "u2", None, "zz"]) | _vals,
    "logicalParentUuid": _vals, "subtype": st.sampled_from(["compact_boundary", "x"]) | _vals,
    "isSidechain": st.booleans() | _vals, "agentId": st.sampled_from(["ag1"]) | _vals,
    "isCompactSummary": st.booleans() | _vals, "isMeta": st.booleans(), "sessionId": st.sampled_from(["s"]) | _vals,
    "timestamp": st.sampled_from(["2025-11-02T09:00:00Z", "bad", ""]) | _vals,
    "message": st.fixed_dictionaries({}, optional={
        "id": st.sampled_from(["m1", "m2"]) | _vals, "role": _vals, "model": _vals, "usage": _vals,
        "content": st.one_of(_vals, st.lists(st.fixed_dictionaries({}, optional={
            "type": st.sampled_from(["text", "tool_use", "tool_result", "thinking", "image", "redacted_thinking",
                                     ""]) | _vals,
            "text": _vals, "id": _vals, "name": _vals, "input": _vals, "tool_use_id": _vals, "content": _vals,
            "thinking": _vals, "is_error": _vals}), max_size=3))}) | _vals,
    "summary": _vals, "leafUuid": _vals, "customTitle": _vals,
})


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(st.lists(_entry, max_size=5), min_size=1, max_size=4), st.sampled_from(["s", "s/subagents/agent-ag1"]))
def test_the_entries_door_never_answers_500(client, batches, key):
    api = Api(client, make_key(["read", "write"]))
    for batch in batches:
        r = api.post("/imports", {"format": "claude-code", "namespace": "fz", "external_id": key, "entries": batch})
        assert r.status_code < 500, r.content[:500]
    r = api.get("/imports/entries", {"namespace": "fz", "external_id": key})
    assert r.status_code < 500
