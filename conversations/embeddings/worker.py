"""The background embedder: first vectors for texts that wait, new ones after a change of model.

A change of model (another `MEMORYUI_EMBEDDINGS_URL`/`…_MODEL`, another wordllama
configuration) leaves every stored vector stale: its model id is not the active
embedder's. Nothing is embedded again in a request; instead one loop takes the registered
jobs (`plugins.embedding_jobs`) a batch at a time, each batch its own transaction, until nothing waits and
nothing is stale, then looks again every few seconds (or when woken). Under gunicorn it
runs in one process of its own beside the web workers (`manage.py embed --follow`,
started and restarted by memoryui/gunicorn_conf.py), so the model's tables, its batches
and its CPU stay out of the processes that answer requests; under another server
(runserver, any WSGI host) memoryui/wsgi.py starts it as a thread of each process.
`MEMORYUI_EMBED_WORKER=0` runs neither. Two loops doing the same batch write the same
vectors: harmless. `manage.py embed` does the work once in the foreground, and the admin
page (views.py) shows the counts as progress.
"""

import logging
import os
import threading
import time
from dataclasses import dataclass, field

from django.db import close_old_connections

from conversations import plugins, projects

from . import embedders
from .models import model_id

log = logging.getLogger("memoryui.embeddings")

BATCH = 256
IDLE_SECONDS = 5.0


@dataclass
class State:
    """What this process's thread is doing, for the admin page."""

    running: bool = False
    done: int = 0
    last_error: str = ""
    last_batch_at: float = 0.0
    by_job: dict = field(default_factory=dict)


state = State()
_thread: threading.Thread | None = None
_thread_lock = threading.Lock()
_wake = threading.Event()
_stopping = threading.Event()


def current_model_id(embedder=None) -> int:
    embedder = embedder or embedders.active()
    return model_id(embedder.name, embedder.dimension())


def run_once(limit: int = BATCH) -> int:
    """One batch of each job; how many vectors were written."""
    embedder = embedders.active()
    with projects.scoped(projects.EVERY):
        current = current_model_id(embedder)
        total = 0
        for job in plugins.embedding_jobs.registered():
            done = job.run(embedder, current, limit)
            state.by_job[job.name] = state.by_job.get(job.name, 0) + done
            total += done
    state.done += total
    state.last_batch_at = time.time()
    return total


def run_until_done(limit: int = BATCH, *, progress=None) -> int:
    total = 0
    while True:
        done = run_once(limit)
        total += done
        if progress is not None and done:
            progress(total)
        if not done:
            return total


def progress() -> list[dict]:
    """Per job: vectors of the current model, stale ones, texts waiting, and the share done."""
    with projects.scoped(projects.EVERY):
        current = current_model_id()
        rows = []
        for job in plugins.embedding_jobs.registered():
            counts = job.counts(current)
            total = counts["current"] + counts["stale"] + counts["waiting"]
            rows.append({"name": job.name, "label": job.label, **counts, "total": total,
                         "percent": 100.0 if not total else round(100.0 * counts["current"] / total, 1)})
        return rows


def _close_quietly():
    # Closing a connection the database has dropped may raise too; it must not end
    # the thread either, or embedding stops until the process restarts.
    try:
        close_old_connections()
    except Exception as exc:
        log.warning("closing the embedder's connection failed: %s", exc)


def _loop():
    while not _stopping.is_set():
        try:
            close_old_connections()
            done = run_once()
            state.last_error = ""
        except Exception as exc:  # a failing endpoint must not end the thread
            log.warning("background embedding failed: %s", exc)
            state.last_error = str(exc)[:300]
            done = 0
        finally:
            _close_quietly()
        if not done and not _stopping.is_set():
            _wake.wait(IDLE_SECONDS)
            _wake.clear()
    state.running = False


# Set by memoryui/gunicorn_conf.py before it forks its web workers, when it runs the loop
# in a process of its own (`manage.py embed --follow`) beside them.
OWN_PROCESS_ENV = "MEMORYUI_EMBEDDER_PROCESS"


def runs_in_own_process() -> bool:
    """Whether this server embeds in a process of its own: its web workers then run no loop."""
    return bool(os.environ.get(OWN_PROCESS_ENV))


def follow() -> None:
    """The same loop in the foreground, until `ask_to_stop` (manage.py embed --follow: the
    one embedding process gunicorn runs beside its web workers, memoryui/gunicorn_conf.py)."""
    _stopping.clear()
    state.running = True
    _loop()


def ask_to_stop() -> None:
    """End the loop after the batch it is writing (safe from a signal handler)."""
    _stopping.set()
    _wake.set()


def wake() -> None:
    """Have this process's thread look for waiting texts now, not at its next idle check
    (without a thread, the texts wait for the next one or for `manage.py embed`)."""
    _wake.set()


def start() -> bool:
    """Start this process's thread (once); False when it was already running."""
    global _thread
    with _thread_lock:
        if _thread is not None and _thread.is_alive():
            _wake.set()
            return False
        _stopping.clear()
        _thread = threading.Thread(target=_loop, name="memoryui-embedder", daemon=True)
        _thread.start()
        state.running = True
        return True


def stop(timeout: float = 30.0) -> bool:
    """Stop this process's thread after the batch it is writing (each batch is its own
    transaction, so nothing is left half-written); True once no thread runs."""
    with _thread_lock:
        thread = _thread
        if thread is None or not thread.is_alive():
            return True
        _stopping.set()
        _wake.set()
    thread.join(timeout)
    if thread.is_alive():
        return False
    _stopping.clear()  # asked of the thread that ended; the next one runs until asked again
    return True
