"""Each pytest-xdist worker gets its own data directory and, on PostgreSQL, its own cluster.

Loaded with `-p tests.parallel` (pytest.ini), so it runs before pytest-django reads the
settings: what it sets must be in the environment when `memoryui.settings` is imported,
and the servers, helpers and pg_repack the tests start inherit that environment.

- MEMORYUI_DATA_DIR becomes `<data dir>/xdist-<worker>`: uploads, signing keys and the
  SQLite test database of one worker are not another's.
- MEMORYUI_TEST_PG_PORTS (set by .ci/run) lists the ports of throw-away PostgreSQL
  clusters, one per worker; worker N talks to the Nth through PGPORT, which every libpq
  client (Django, psql, pg_repack, the gunicorn servers the tests start) follows.
  A deletion receipt scans the cluster's whole write-ahead log for the erased text, so
  workers sharing one cluster would find each other's test strings in it.

Without xdist (or with one worker) nothing changes.
"""

import os
from pathlib import Path

WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")

# Deletion requests verify within the request in most tests (MEMORYUI_ERASURE_VERIFY=at-once, an
# operator's setting too), so each can assert its receipt; the default, two phases with a window,
# is tested by tests/test_erasure_window.py. Set here, before the settings are read; the servers
# and commands the tests start inherit it.
os.environ.setdefault("MEMORYUI_ERASURE_VERIFY", "at-once")


def _index(worker: str) -> int:
    return int(worker.removeprefix("gw")) if worker.removeprefix("gw").isdigit() else 0


def _isolate(worker: str) -> None:
    base = Path(os.environ.get("MEMORYUI_DATA_DIR") or Path(__file__).resolve().parent.parent / "data")
    os.environ["MEMORYUI_DATA_DIR"] = str(base / f"xdist-{worker}")
    if os.environ.get("MEMORYUI_TEST_DB"):
        os.environ["MEMORYUI_TEST_DB"] += f"-{worker}"
    ports = os.environ.get("MEMORYUI_TEST_PG_PORTS", "").split()
    if ports:
        if _index(worker) >= len(ports):
            raise RuntimeError(f"MEMORYUI_TEST_PG_PORTS lists {len(ports)} clusters: too few for worker {worker}")
        os.environ["PGPORT"] = ports[_index(worker)]


if WORKER:
    _isolate(WORKER)
