"""Telling gunicorn to close a connection after the answer, when the request's body was not read.

An answer given before the body was read (a 413 for a body over the limit) leaves the rest of
that body on the connection. gunicorn must then read it to find where the next request starts,
and gives up past a few megabytes or seconds by closing the socket: a client that kept the
connection for its next request (httpx, urllib3, any pool) sees that request fail with
"Server disconnected" though the server never read it. Announcing `Connection: close` with the
answer makes the client open a new connection instead.

A WSGI application cannot set `Connection` (gunicorn drops hop-by-hop headers), so gunicorn's
`pre_request` hook (memoryui/gunicorn_conf.py) hands its request object to the thread that serves
it, and `close_after_answer()` marks it: gunicorn then answers `Connection: close` and closes.
Under another server (runserver, the tests' live server) it does nothing: those close a connection
whose body was not read by themselves.
"""

import threading

_serving = threading.local()


def serving(gunicorn_request) -> None:
    """gunicorn's pre_request: the request this thread now serves (None when it is done)."""
    _serving.request = gunicorn_request


def close_after_answer() -> None:
    """The body of the request being served is left unread: close the connection after the answer."""
    request = getattr(_serving, "request", None)
    if request is not None:
        request.force_close()
