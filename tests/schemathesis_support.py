"""The checks the schemathesis tests (tests/test_*schemathesis.py) hold every response to.

Their fixtures (keep_the_test_connection, agent_key, sample_conversation) are in
tests/api_support.py, registered for every module; this module imports schemathesis,
so only the modules that use it pay for that import.
"""

from schemathesis.checks import (
    content_type_conformance,
    negative_data_rejection,
    not_a_server_error,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)


# Not positive_data_acceptance: a request can match the schema and still be
# refused for a reason no schema can state (a position past the end of this
# conversation, a cursor this API never gave out), and that 4xx is correct.
def negative_data_rejected(ctx, response, case):
    """schemathesis' negative_data_rejection, with 413 and 414 counted as rejections: a
    query string past the server's address limit (an overlong cursor) is refused before
    any parameter is read, which is a rejection too. (A parameter sent twice is a 422:
    memoryui/api.py's parser.)"""
    if response.status_code in (413, 414):
        return None
    # A query parameter generated as an object goes on the wire as its Python text (one string,
    # a valid value of a text parameter): nothing the server receives is out of its schema.
    if any(isinstance(value, dict) for value in (case.query or {}).values()):
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
