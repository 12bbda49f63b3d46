"""Schemathesis against the API's own OpenAPI schema, in process (WSGI).

Every operation of the conversations API is called with generated requests,
valid and invalid (schemathesis' positive and negative modes), carrying a valid
admin key. No response may be a 5xx, and every response must match what the
schema documents: its status code, content type, headers and body; invalid
input must be refused. Every other operation of the API is checked for 5xx.
"""

import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from hypothesis import HealthCheck, settings
from schemathesis.checks import (
    content_type_conformance,
    negative_data_rejection,
    not_a_server_error,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)
from schemathesis.core.parameters import ParameterLocation

from conversations import store
from conversations.models import Conversation
from memoryui.wsgi import application
from tests.api_support import make_key


# Not positive_data_acceptance: a request can match the schema and still be
# refused for a reason no schema can state (a position past the end of this
# conversation, a cursor this API never gave out), and that 4xx is correct.
def negative_data_rejected(ctx, response, case):
    """schemathesis' negative_data_rejection, with 413 and 414 counted as rejections: a
    query string past the server's address limit (an overlong cursor) is refused before
    any parameter is read, which is a rejection too."""
    if response.status_code in (413, 414):
        return None
    return negative_data_rejection(ctx, response, case)


CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    negative_data_rejected,
]


@pytest.fixture(autouse=True)
def _keep_the_test_connection():
    # The app runs in this thread, inside the test's transaction; Django would
    # close that connection around each request (its own test client prevents
    # that the same way).
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


@pytest.fixture
def agent_key(db):
    return make_key(["admin"], name="schemathesis")


@pytest.fixture
def sample_conversation(db):
    """A conversation with a few messages and a checkpoint; a new one once deleted."""
    made = []

    def get(fresh: bool = False):
        if made and not fresh and Conversation.objects.live().filter(pk=made[-1].pk).exists():
            return made[-1]
        c = store.create_conversation(title="fuzzed", subject="customer:1")
        for text in ("one", "two", "three"):
            store.append_message(conversation_id=c.pk, message={"kind": "note", "text": text})
        store.checkpoint_at(conversation_id=c.pk, position=0, summary="folded")
        made.append(c)
        return c

    return get


# Loaded when the module is collected (pytest-django has set Django up by then);
# the schema view touches no database. Other apps' routers have their own tests.
schema = schemathesis.openapi.from_wsgi("/api/v1/openapi.json", application).include(tag="conversations")


@schema.parametrize()
@settings(
    max_examples=25,
    deadline=None,
    derandomize=True,
    suppress_health_check=list(HealthCheck),
)
def test_no_request_makes_a_5xx_and_every_response_matches_the_schema(case, agent_key, sample_conversation):
    # Valid requests aim at a real conversation, so the happy paths run too;
    # invalid ones keep whatever id was generated (a 404 is documented).
    path_is_negative = case.meta is not None and case.meta.is_negative_at(ParameterLocation.PATH)
    if "conversation_id" in (case.path_parameters or {}) and not path_is_negative:
        fresh = case.method.upper() == "DELETE"
        case.path_parameters["conversation_id"] = str(sample_conversation(fresh=fresh).pk)
    case.call_and_validate(headers={"Authorization": f"Bearer {agent_key}"}, checks=CHECKS)


# The other apps' routers (facts, retention) document their own shapes; over
# them this checks the promise every endpoint makes: no input produces a 5xx.
# Committed transactions (transactional_db), since some of those operations
# must run outside one (VACUUM after a deletion request).
rest_of_the_api = schemathesis.openapi.from_wsgi("/api/v1/openapi.json", application).exclude(tag="conversations")


@rest_of_the_api.parametrize()
@settings(max_examples=10, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
def test_no_request_to_the_rest_of_the_api_makes_a_5xx(case, transactional_db):
    key = make_key(["admin", "facts:read", "facts:write"], name="schemathesis-all")
    case.call_and_validate(headers={"Authorization": f"Bearer {key}"}, checks=[not_a_server_error])
