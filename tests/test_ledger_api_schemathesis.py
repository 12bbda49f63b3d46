"""Schemathesis against the ledger's endpoints: no 5xx, and every response as documented.

The same checks as tests/test_api_schemathesis.py applies to the conversations API,
over the operations tagged "task state and actions".
"""

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.core.parameters import ParameterLocation

from memoryui.wsgi import application
from tests.schemathesis_support import CHECKS

pytestmark = pytest.mark.usefixtures("keep_the_test_connection")

schema = schemathesis.openapi.from_wsgi("/api/v1/openapi.json", application).include(tag="task state and actions")


@schema.parametrize()
@settings(max_examples=25, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
def test_no_ledger_request_makes_a_5xx_and_every_response_matches_the_schema(case, agent_key, sample_conversation):
    path_is_negative = case.meta is not None and case.meta.is_negative_at(ParameterLocation.PATH)
    if "conversation_id" in (case.path_parameters or {}) and not path_is_negative:
        case.path_parameters["conversation_id"] = str(sample_conversation().pk)
    case.call_and_validate(headers={"Authorization": f"Bearer {agent_key}"}, checks=CHECKS)
