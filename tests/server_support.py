"""A real gunicorn server (memoryui/gunicorn_conf.py, several worker processes) over
the test database, for the tests that must cross processes the way production does."""

import http.client
import socket
import subprocess
import sys
import time
from pathlib import Path

from tests.retention_support import ROOT, database_url, subprocess_env


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_gunicorn(port: int, log: Path, *, workers: int, threads: int = 2, **env) -> subprocess.Popen:
    """Started in its own session (stop it with os.killpg(proc.pid, SIGTERM)); returns once it answers."""
    # The test database unless the caller names another (DATABASE_URL=…).
    env = subprocess_env(**{"DATABASE_URL": database_url(), "MEMORYUI_WORKERS": str(workers),
                            "MEMORYUI_THREADS": str(threads), **env})
    proc = subprocess.Popen(
        [str(Path(sys.executable).parent / "gunicorn"), "memoryui.wsgi", "-c", "memoryui/gunicorn_conf.py",
         "-b", f"127.0.0.1:{port}", "--log-level", "warning", "--timeout", "120"],
        cwd=ROOT, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT, start_new_session=True,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert proc.poll() is None, log.read_text()[-3000:]
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            conn.request("GET", "/login/")
            conn.getresponse().read()
            return proc
        except OSError:
            time.sleep(0.2)
    raise AssertionError("gunicorn did not answer within 60 s")
