"""The test suite's live server answers kept-alive requests at once (tests/conftest.py)."""

import socket

import pytest
from django.core.servers.basehttp import WSGIRequestHandler
from django.test.testcases import LiveServerThread


@pytest.mark.database_independent
def test_every_connection_the_live_server_accepts_has_tcp_nodelay():
    # Without it the head and the body of a response, sent apart, wait 40 ms for the
    # client's delayed acknowledgement on every request after a connection's first.
    server = LiveServerThread.server_class(("127.0.0.1", 0), WSGIRequestHandler)
    client = socket.create_connection(server.server_address)
    try:
        accepted, _ = server.get_request()
        try:
            assert accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 1
        finally:
            accepted.close()
    finally:
        client.close()
        server.server_close()
