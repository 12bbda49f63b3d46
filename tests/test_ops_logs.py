"""MEMORYUI_LOG_FORMAT=json under gunicorn: every line on its output is one JSON object, a
request has its line with its id, the id is echoed in X-Request-ID (a proxy's own when it
is a sane token), and a traceback is a field of a line carrying the request's id."""

import http.client
import json
import re
import time

import pytest

from tests.server_support import gunicorn

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


@pytest.fixture(scope="module")
def _gunicorn(django_db_setup, tmp_path_factory):
    """One server for the module; its log is not checked for tracebacks: a test makes one."""
    with gunicorn(tmp_path_factory.mktemp("json-logs") / "gunicorn.log", check_shutdown=False, workers=1,
                  MEMORYUI_LOG_FORMAT="json", DJANGO_SETTINGS_MODULE="tests.ops_settings") as server:
        yield server


@pytest.fixture
def server(_gunicorn):
    """Its port, and its log from this test's start on (what the test made it write)."""
    return _gunicorn.port, _gunicorn.tail()


def get(port, path, request_id=None):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request("GET", path, headers={"X-Request-ID": request_id} if request_id is not None else {})
    response = conn.getresponse()
    response.read()
    conn.close()
    return response


def lines_until(log, done, deadline=30.0):
    """The log's lines as JSON, once `done(lines)` holds (a worker writes after it answers)."""
    stop = time.monotonic() + deadline
    while True:
        text = log.read_text()
        parsed = [json.loads(line) for line in text.splitlines() if line.strip()]
        if done(parsed) or time.monotonic() > stop:
            return parsed, text
        time.sleep(0.05)


def test_it_writes_one_json_line_per_request_with_its_id(server):
    port, log = server
    sane = get(port, "/healthz?subject=customer:secret@example.com", "lb-7f3a.1:b")
    assert sane.status == 200 and sane.getheader("X-Request-ID") == "lb-7f3a.1:b"
    odd = get(port, "/healthz", "has spaces; and=more")
    generated = odd.getheader("X-Request-ID")
    assert re.fullmatch(r"[0-9a-f]{32}", generated)
    fresh = get(port, "/readyz").getheader("X-Request-ID")
    assert re.fullmatch(r"[0-9a-f]{32}", fresh) and fresh != generated

    lines, text = lines_until(log, lambda ls: sum(1 for entry in ls if entry.get("logger") == "memoryui.request"
                                                   and entry.get("request_id") in (generated, fresh)) == 2)
    requests = {entry["request_id"]: entry for entry in lines if entry.get("logger") == "memoryui.request"}
    assert {"lb-7f3a.1:b", generated, fresh} <= set(requests), text
    line = requests["lb-7f3a.1:b"]
    assert (line["method"], line["path"], line["route"], line["status"]) == ("GET", "/healthz", "healthz", 200)
    assert isinstance(line["duration_ms"], float)
    assert requests[fresh]["route"] == "readyz"
    # Paths without their query strings: a subject in `?subject=` never reaches the log.
    assert "secret@example.com" not in text


def test_it_puts_a_traceback_in_the_same_stream_as_one_line(server):
    port, log = server
    response = get(port, "/boom/", "trace-me-1")
    assert response.status == 500 and response.getheader("X-Request-ID") == "trace-me-1"

    lines, text = lines_until(log, lambda ls: any(entry.get("exception") for entry in ls)
                              and any(entry.get("status") == 500 for entry in ls))
    failures = [entry for entry in lines if entry.get("exception")]
    assert len(failures) == 1, text
    failure = failures[0]
    assert failure["request_id"] == "trace-me-1" and failure["level"] == "ERROR"
    assert "Traceback (most recent call last)" in failure["exception"]
    assert "RuntimeError: boom: a view that fails" in failure["exception"]
    request_line = next(entry for entry in lines
                        if entry.get("logger") == "memoryui.request" and entry["request_id"] == "trace-me-1")
    assert request_line["status"] == 500 and request_line["route"] == "boom/"
