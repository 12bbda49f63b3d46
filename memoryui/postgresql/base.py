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

from conversations import projects

# The two settings row-level security reads (conversations/migrations/0010_row_level_security.py).
_SET_SCOPE = ("SELECT set_config('memoryui.project', %s, false), "
              "set_config('memoryui.all_projects', %s, false)")


def _settings_of(scope) -> tuple[str, str]:
    return ("" if scope.project_id is None or scope.every else str(scope.project_id),
            "on" if scope.every else "off")


class DatabaseWrapper(base.DatabaseWrapper):
    """Also hands the current project scope (conversations/projects.py) to the server before a
    statement runs under it: the row-level security policies read it. The settings are the
    session's, sent again only when the scope changed since they were last sent, and forgotten
    when a rollback may have undone them."""

    _scope_sent = None

    def sync_scope(self) -> None:
        """Send the current scope's two settings if the server does not hold them yet. Called
        before a statement runs (every cursor, and the append path's own statements), never
        while Django opens a connection or switches autocommit: a statement there would open a
        transaction under it."""
        wanted = _settings_of(projects.current())
        if self._scope_sent == wanted or self.connection is None:
            return
        if self.connection.info.transaction_status == TransactionStatus.INERROR or self.needs_rollback:
            return  # the statement that follows fails anyway; the rollback forgets what was sent
        with self.connection.cursor() as cursor:
            cursor.execute(_SET_SCOPE, wanted)
        self._scope_sent = wanted

    def _cursor(self, name=None):
        cursor = super()._cursor(name)
        self.sync_scope()
        return cursor

    def connect(self):
        self._scope_sent = None
        super().connect()

    def _rollback(self):
        self._scope_sent = None
        super()._rollback()

    def _savepoint_rollback(self, sid):
        self._scope_sent = None
        super()._savepoint_rollback(sid)

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
