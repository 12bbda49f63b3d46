"""Schemathesis against the API's own OpenAPI schema, in process (WSGI).

Every operation of the conversations API is called with generated requests,
valid and invalid (schemathesis' positive and negative modes), carrying a valid
admin key. No response may be a 5xx, and every response must match what the
schema documents: its status code, content type, headers and body; invalid
input must be refused. Every other operation of the API is checked for 5xx.
"""

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.core.parameters import ParameterLocation

from memoryui.wsgi import application
from tests.api_support import make_key
from tests.schemathesis_support import CHECKS

pytestmark = pytest.mark.usefixtures("keep_the_test_connection")


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
