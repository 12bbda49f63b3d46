"""/readyz while PostgreSQL goes away under a running gunicorn server, and comes back.

Other tests share this machine's PostgreSQL, so this one starts a throw-away cluster of
its own (initdb into a temporary folder, on a free port, its socket in that folder;
as root through `runuser -u postgres`, since initdb refuses root), migrates it, serves
from it, stops it and starts it again. SQLite has no server to stop: its readiness
checks fail on their own in tests/test_ops_health.py.
"""

import http.client
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from tests.conftest import skip_or_fail
from tests.retention_support import ROOT, subprocess_env
from tests.server_support import free_port, start_gunicorn

pytestmark = pytest.mark.slow
BIN = Path("/usr/lib/postgresql/15/bin")


def as_owner(args: list[str]) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *args] if os.geteuid() == 0 else args


class Cluster:
    def __init__(self):
        self.root = Path(tempfile.mkdtemp(prefix="memoryui-outage-"))
        self.data, self.port = self.root / "data", free_port()
        if os.geteuid() == 0:
            shutil.chown(self.root, "postgres")
        self.root.chmod(0o755)
        self.run(BIN / "initdb", "-D", self.data, "-A", "trust", "-U", "postgres", "--no-sync")

    def run(self, *args):
        done = subprocess.run(as_owner([str(a) for a in args]), capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stdout + done.stderr
        return done

    def start(self):
        self.run(BIN / "pg_ctl", "-D", self.data, "-l", self.root / "log", "-w", "-o",
                 f"-p {self.port} -k {self.root} -c listen_addresses='' -c fsync=off", "start")

    def stop(self):
        self.run(BIN / "pg_ctl", "-D", self.data, "-m", "fast", "-w", "stop")

    @property
    def url(self) -> str:
        return f"postgres://postgres@{str(self.root).replace('/', '%2F')}:{self.port}/memoryui"

    def remove(self):
        subprocess.run(as_owner([str(BIN / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "stop"]),
                       capture_output=True)
        shutil.rmtree(self.root, ignore_errors=True)


@pytest.fixture
def cluster():
    if not (BIN / "initdb").exists() or (os.geteuid() == 0 and not shutil.which("runuser")):
        skip_or_fail("PostgreSQL 15's initdb (and runuser, as root) are needed for a private cluster")
    c = Cluster()
    try:
        c.start()
        c.run(BIN / "createdb", "-h", c.root, "-p", c.port, "-U", "postgres", "memoryui")
        yield c
    finally:
        c.remove()


def readyz(port) -> tuple[int, dict]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("GET", "/readyz")
        response = conn.getresponse()
        return response.status, json.loads(response.read())
    finally:
        conn.close()


def scrape(port) -> str:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("GET", "/metrics", headers={"Authorization": "Bearer scrape-token"})
        response = conn.getresponse()
        body = response.read().decode()
        assert response.status == 200, body[:500]
        return body
    finally:
        conn.close()


def wait_for(port, status: int, deadline_s=60.0) -> dict:
    deadline, seen = time.monotonic() + deadline_s, None
    while time.monotonic() < deadline:
        seen = readyz(port)
        if seen[0] == status:
            return seen[1]
        time.sleep(0.1)
    raise AssertionError(f"/readyz never answered {status}; last {seen}")


def test_readyz_answers_503_while_postgresql_is_down_and_recovers_by_itself(cluster, tmp_path):
    env = subprocess_env(DATABASE_URL=cluster.url, MEMORYUI_DATA_DIR=str(tmp_path))
    done = subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    port = free_port()
    server = start_gunicorn(port, tmp_path / "gunicorn.log", workers=2, DATABASE_URL=cluster.url,
                            MEMORYUI_DATA_DIR=str(tmp_path), MEMORYUI_METRICS_TOKEN="scrape-token")
    try:
        assert readyz(port) == (200, {"status": "ready", "checks": {"database": "ok", "migrations": "ok",
                                                                    "erasures": "ok", "maintenance": "ok"}})
        cluster.stop()
        down = wait_for(port, 503)
        assert down == {"status": "not_ready", "checks": {"database": "unavailable", "migrations": "unknown",
                                                          "erasures": "unknown", "maintenance": "unknown"}}
        # Every probe while it is down says so, whichever worker answers; /healthz stays up.
        for _ in range(6):
            assert readyz(port)[0] == 503
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        conn.request("GET", "/healthz")
        assert conn.getresponse().status == 200
        conn.close()
        # A scrape still answers, and says the database could not be read.
        assert "memoryui_database_up 0.0" in scrape(port)
        cluster.start()
        assert wait_for(port, 200)["status"] == "ready"
        for _ in range(6):  # both workers reconnected, not just one
            assert readyz(port)[0] == 200
        assert "memoryui_database_up 1.0" in scrape(port)
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)
