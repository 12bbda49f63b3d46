"""gunicorn settings for `make run` and benchmark workload 8 (chosen by measurement: docs/BENCHMARKS.md).

SQLite: one worker process with threads. Its writers then queue on the process's
writer lock (memoryui/sqlite/base.py) instead of sleeping in SQLite's busy handler,
which is what several processes would do; the threads overlap request parsing,
JSON and the network with the one writer's fsync. PostgreSQL: a worker per core,
each with threads, since its writers lock rows, not the database.

MEMORYUI_WORKERS and MEMORYUI_THREADS override the choice.

With MEMORYUI_METRICS_TOKEN set, the workers' metrics add up (memoryui/metrics.py):
each writes them under a folder private to this server (the data folder's
prometheus/<master pid>, emptied at start), and a worker that exits is marked dead.
With MEMORYUI_LOG_FORMAT=json gunicorn's own lines are JSON too (memoryui/logs.py).

Unless MEMORYUI_EMBED_WORKER=0, the server runs one embedding process beside its workers
(`manage.py embed --follow`, conversations/embeddings/worker.py), started when the server
is ready, started again if it exits, and stopped with the server. In a web worker its
model and batches cost a 200 MB import's worker 1.5× the memory of a 2 MB one's
(bench/w21_import_formats.py), and every worker loaded the model again.
"""

import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

_postgres = os.environ.get("DATABASE_URL", "").strip().startswith(("postgres", "postgresql"))

worker_class = "gthread"
workers = int(os.environ.get("MEMORYUI_WORKERS") or (max(2, os.cpu_count() or 1) if _postgres else 1))
threads = int(os.environ.get("MEMORYUI_THREADS") or 8)
# Agents keep their connection open between steps (httpx does).
keepalive = 30
# Request lines up to gunicorn's ceiling, so that the app itself answers an address
# over 8,000 characters (414, as JSON under /api/) instead of gunicorn's plain page.
limit_request_line = 8190
# The access log holds who asked for which path, when, and the answer: never the query
# string (a subject may be in `?subject=` of the API) nor the Referer (a page's full URL).
access_log_format = '%(h)s %(t)s "%(m)s %(U)s %(H)s" %(s)s %(B)s %(D)sus "%(a)s"'


def _data_dir() -> Path:
    from memoryui.settings import DATA_DIR  # the one place its default is written

    return DATA_DIR


def _prepare_metrics_dir() -> None:
    if not os.environ.get("MEMORYUI_METRICS_TOKEN", "").strip():
        return
    parent = _data_dir() / "prometheus"
    parent.mkdir(mode=0o700, exist_ok=True)
    for old in parent.iterdir():  # folders of servers that are gone; a live one keeps its own
        if old.name.isdigit() and not _alive(int(old.name)):
            shutil.rmtree(old, ignore_errors=True)
    mine = parent / str(os.getpid())
    shutil.rmtree(mine, ignore_errors=True)
    mine.mkdir(mode=0o700)
    # Before any worker imports prometheus_client: it picks its storage by this at import.
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(mine)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


class _Embedder:
    """The server's one embedding process, watched by a thread of the master."""

    RESTART_MAX_SECONDS = 60.0

    def __init__(self, log):
        self.log, self.stopping, self.lock = log, threading.Event(), threading.Lock()
        self.proc = self._spawn()  # in the master's own thread, before any worker is forked
        self.thread = threading.Thread(target=self._watch, name="memoryui-embedder-watch", daemon=True)

    @staticmethod
    def _spawn() -> subprocess.Popen:
        # close_fds=False lets Python use posix_spawn, which reports a failed exec without a
        # pipe: Popen's usual error pipe, open while a worker is forked from the master, would
        # be inherited by that worker, and Popen would then wait on it for ever. The master's
        # own descriptors are not inheritable (PEP 446), so nothing else crosses.
        return subprocess.Popen([sys.executable, str(Path(__file__).resolve().parent.parent / "manage.py"),
                                 "embed", "--follow"], close_fds=False)

    def _watch(self):
        pause = 1.0
        while True:
            started = time.monotonic()
            code = self.proc.wait()
            if self.stopping.is_set():
                return
            # A process that ran a while is started again at once; one that keeps failing, ever
            # more slowly (its log says why), so a broken setting does not spin the machine.
            pause = 1.0 if time.monotonic() - started > self.RESTART_MAX_SECONDS else min(
                pause * 2, self.RESTART_MAX_SECONDS)
            self.log.warning("the embedding process exited (code %s); starting it again in %.0f s", code, pause)
            with self.lock:  # stop() either sees the new process or keeps it from starting
                if self.stopping.wait(pause):
                    return
                self.proc = self._spawn()

    def stop(self, timeout: float = 30.0):
        self.stopping.set()
        with self.lock:
            proc = self.proc
        if proc.poll() is None:
            proc.terminate()  # it ends after the batch it is writing
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()


_embedder: _Embedder | None = None
# conversations.embeddings.worker.OWN_PROCESS_ENV, written out: the master reads no app module
# before Django is set up (only the workers set it up).
_OWN_PROCESS_ENV = "MEMORYUI_EMBEDDER_PROCESS"


def on_starting(server):
    _prepare_metrics_dir()
    from memoryui.settings import MEMORYUI_EMBED_WORKER

    if MEMORYUI_EMBED_WORKER:
        # Before any worker is forked: they then leave embedding to the process (memoryui/wsgi.py).
        os.environ[_OWN_PROCESS_ENV] = "1"


def when_ready(server):
    global _embedder
    if os.environ.get(_OWN_PROCESS_ENV) and _embedder is None:
        _embedder = _Embedder(server.log)
        _embedder.thread.start()


def pre_request(worker, req):
    # The app may answer before reading a body (413): it then asks for `Connection: close`.
    from conversations import connections

    connections.serving(req)


def post_request(worker, req, environ, resp):
    from conversations import connections

    connections.serving(None)


def child_exit(server, worker):
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(worker.pid)


def on_exit(server):
    if _embedder is not None:
        _embedder.stop()
    folder = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if folder:
        shutil.rmtree(folder, ignore_errors=True)


if os.environ.get("MEMORYUI_LOG_FORMAT", "").strip().lower() == "json":
    logconfig_dict = {
        "formatters": {"json": {"()": "memoryui.logs.JsonFormatter"}},
        "handlers": {
            "console": {"class": "logging.StreamHandler", "formatter": "json", "stream": "ext://sys.stdout"},
            "error_console": {"class": "logging.StreamHandler", "formatter": "json", "stream": "ext://sys.stderr"},
        },
        # Not propagated: the root logger has a handler too, and each line would be written twice.
        "loggers": {
            "gunicorn.error": {"level": "INFO", "handlers": ["error_console"], "propagate": False},
            "gunicorn.access": {"level": "INFO", "handlers": ["console"], "propagate": False},
        },
    }
