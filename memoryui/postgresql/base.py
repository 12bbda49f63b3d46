"""Django's PostgreSQL backend with a health check that costs no round trip while the server is there.

Connections stay open across requests (CONN_MAX_AGE) and are checked before a request
uses one (CONN_HEALTH_CHECKS), so a server that restarted is reconnected to instead of
failing the request. Django checks with `SELECT 1`: a round trip on every request,
one of eight in an append. A server that closes a connection (a restart, a terminated
backend, an idle timeout) sends the client an error message and closes its socket, so
an idle connection whose socket has nothing to read is still open: that costs a
`select()` with no wait. When there is something to read, Django's `SELECT 1` decides.
"""

import select

from django.db.backends.postgresql import base
from psycopg.pq import TransactionStatus


class DatabaseWrapper(base.DatabaseWrapper):
    def is_usable(self):
        conn = self.connection
        if conn is None or conn.closed or conn.broken:
            return False
        # An aborted transaction fails Django's SELECT 1 too: the connection is not usable until
        # rolled back (a test case's teardown then skips its constraint check, as with Django's).
        if conn.info.transaction_status == TransactionStatus.INERROR:
            return False
        try:
            readable, _, _ = select.select([conn.fileno()], [], [], 0)
        except (OSError, ValueError):
            return False
        if not readable:
            return True
        return super().is_usable()
