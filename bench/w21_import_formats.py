"""Workload 21: other agents' sessions (Gemini CLI, Aider, OpenCode, Cline) against the floor; an API import's memory.

Speed. A session of each format is generated (a realistic mix for each: prompts,
thoughts, replies with tool calls and their results, a compaction; Gemini CLI's JSONL
writes a reply twice, as the CLI does when a tool's result arrives; Aider's history holds
several sessions), with Claude Code's session of workload 12 beside them, all of about
the same number of entries. In the same run, for each, alternating:

  memoryui  a fresh child process imports the file with `manage.py import`'s function
            (importer.import_path) into a new SQLite database: parse, map, encode and write
            every row, checkpoint and original entry
  floor     the same kind of child reads the file once (json.loads of each line, or of
            the document; the Markdown split into lines) and inserts, with raw SQL through
            memoryui's schema and triggers, the rows and original entries the memoryui run
            wrote (read from its database beforehand, untimed), 5,000 per transaction:
            workload 12's floor for any format

Each format's row: its import's rows/s against the raw-SQL floor workload 12 measures for
Claude Code, in the same run (memoryui / floor ≥ 0.4); the note gives the format's own floor
too (its floor seconds over its import's: what parsing, mapping and validating that format
costs on top of keeping and indexing every row).

Memory. A gunicorn server (memoryui/gunicorn_conf.py, one worker) takes a Claude Code
session through POST /api/v1/imports, the file streamed as the body; the worker's peak
resident memory (VmHWM) is read after the import and after the server's embedding process
(beside the worker) has given every imported row its vector, so the worker has answered
whatever that work asked of it, for both sizes; a fresh server for each size: a session
of about 2 MB, and one of about 200 MB (quick: 0.2 MB and 2 MB). Target: the large
import's peak within 1.2× the small one's (the body is spooled, the content decoded to a
file, the session's tree kept in a few bytes per entry: conversations/bodies.py,
imports/body.py, formats/claude_code_tree.py).
"""

import http.client
import json
import os
import random
import socket
import subprocess
import sys
import time
from pathlib import Path

import common
import w12_import

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
WORDS = ("the cart total coupon apply checkout refund order test file read edit fix error function return value "
         "module import class raise expired guard clause").split()


def _text(rng, lo, hi) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(lo, hi)))


def gemini(path: Path, turns: int) -> int:
    """A Gemini CLI JSONL log: each reply written twice (its tool results added), $set lines."""
    rng, n = random.Random(19), 0
    with path.open("w") as f:
        def put(obj):
            nonlocal n
            f.write(json.dumps(obj, separators=(",", ":")) + "\n")
            n += 1

        put({"sessionId": "b19e0000-0000-4000-8000-000000000001", "projectHash": "f" * 64,
             "startTime": "2026-01-20T14:00:00.000Z", "lastUpdated": "2026-01-20T14:00:00.000Z", "kind": "main"})
        for t in range(turns):
            at = f"2026-01-20T{10 + t // 3600 % 10:02d}:{t // 60 % 60:02d}:{t % 60:02d}.000Z"
            put({"id": f"u{t}", "timestamp": at, "type": "user", "content": [{"text": _text(rng, 5, 60)}]})
            calls = [{"id": f"c{t}_{i}", "name": "read_file", "args": {"file_path": f"src/{rng.choice(WORDS)}.py"},
                      "status": "executing", "timestamp": at} for i in range(rng.randint(1, 3))]
            reply = {"id": f"g{t}", "timestamp": at, "type": "gemini", "content": [{"text": _text(rng, 5, 40)}],
                     "thoughts": [{"subject": "Reading", "description": _text(rng, 20, 80), "timestamp": at}],
                     "model": "gemini-2.5-pro", "toolCalls": calls}
            put(reply)
            done = [dict(c, status="success", result=[{"functionResponse": {
                "id": c["id"], "name": c["name"], "response": {"output": _text(rng, 30, 600)}}}]) for c in calls]
            put(dict(reply, toolCalls=done, tokens={"input": 1200, "output": 80, "cached": 0, "thoughts": 40,
                                                     "tool": 0, "total": 1320}))
            put({"$set": {"lastUpdated": at}})
            put({"id": f"a{t}", "timestamp": at, "type": "gemini", "content": [{"text": _text(rng, 20, 250)}],
                 "model": "gemini-2.5-pro"})
    return n


def aider(path: Path, turns: int) -> int:
    """An Aider history: sessions of prompts, replies with edit blocks, and aider's output."""
    rng, n = random.Random(19), 0
    with path.open("w") as f:
        for t in range(turns):
            if t % 500 == 0:
                f.write(f"\n# aider chat started at 2025-03-{1 + t // 500 % 28:02d} 09:14:07\n\n")
                f.write("> Aider v0.75.1  \n> Main model: anthropic/claude-3-7-sonnet with diff edit format  \n\n")
            f.write(f"#### {_text(rng, 5, 60)}  \n\n{_text(rng, 20, 120)}\n\nsrc/app.py\n```python\n"
                    f"<<<<<<< SEARCH\n{_text(rng, 5, 20)}\n=======\n{_text(rng, 5, 20)}\n>>>>>>> REPLACE\n```\n\n"
                    f"> Applied edit to src/app.py  \n> Commit {t:07x} {_text(rng, 3, 8)}  \n")
            n += 1
    return n


def opencode(path: Path, turns: int) -> int:
    """One OpenCode session as `opencode export` writes it: steps of reasoning, text and tools."""
    rng = random.Random(19)
    messages = []
    for t in range(turns):
        created = 1762100000000 + t * 1000
        messages.append({"info": {"id": f"msg_{2 * t:08d}", "sessionID": "ses_bench", "role": "user",
                                  "time": {"created": created}, "agent": "build"},
                         "parts": [{"id": f"prt_{2 * t:08d}_0", "type": "text", "text": _text(rng, 5, 60)}]})
        tools = [{"id": f"prt_{2 * t + 1:08d}_{2 + i}", "type": "tool", "callID": f"toolu_{t}_{i}", "tool": "read",
                  "state": {"status": "completed", "input": {"filePath": f"src/{rng.choice(WORDS)}.py"},
                            "output": _text(rng, 30, 600), "title": "read", "metadata": {},
                            "time": {"start": created, "end": created + 5}}} for i in range(rng.randint(1, 3))]
        parts = [{"id": f"prt_{2 * t + 1:08d}_0", "type": "step-start"},
                 {"id": f"prt_{2 * t + 1:08d}_1", "type": "reasoning", "text": _text(rng, 20, 80),
                  "time": {"start": created}}, *tools,
                 {"id": f"prt_{2 * t + 1:08d}_8", "type": "step-finish", "reason": "tool-calls", "cost": 0.01,
                  "tokens": {"input": 1200, "output": 80, "reasoning": 40, "cache": {"read": 0, "write": 0}}},
                 {"id": f"prt_{2 * t + 1:08d}_9", "type": "text", "text": _text(rng, 20, 250)}]
        messages.append({"info": {"id": f"msg_{2 * t + 1:08d}", "sessionID": "ses_bench", "role": "assistant",
                                  "time": {"created": created + 1}, "modelID": "claude-sonnet-4-5",
                                  "providerID": "anthropic"}, "parts": parts})
    doc = {"info": {"id": "ses_bench", "title": "bench", "directory": "/w", "projectID": "p",
                    "time": {"created": 1762100000000, "updated": 1762100000000}}, "messages": messages}
    path.write_text(json.dumps(doc, separators=(",", ":")))
    return sum(1 + len(m["parts"]) for m in messages) + 1


def cline(path: Path, turns: int) -> int:
    """A Cline task with its panel: tool_use and tool_result blocks, api_req_started usage."""
    rng = random.Random(19)
    history = [{"role": "user", "content": [{"type": "text", "text": "<task>\n" + _text(rng, 5, 60) + "\n</task>"}]}]
    ui = []
    for t in range(turns):
        calls = [{"type": "tool_use", "id": f"toolu_{t}_{i}", "name": "read_file",
                  "input": {"path": f"src/{rng.choice(WORDS)}.py"}} for i in range(rng.randint(1, 3))]
        history.append({"role": "assistant", "content": [{"type": "text", "text": _text(rng, 20, 120)}, *calls]})
        history.append({"role": "user", "content": [
            *[{"type": "tool_result", "tool_use_id": c["id"], "content": _text(rng, 30, 600)} for c in calls],
            {"type": "text", "text": "<environment_details>\n" + _text(rng, 10, 30) + "\n</environment_details>"}]})
        ui.append({"ts": 1761900000000 + t, "type": "say", "say": "api_req_started",
                   "text": json.dumps({"tokensIn": 1200, "tokensOut": 80, "cacheReads": 0, "cacheWrites": 0})})
    path.write_text(json.dumps({"api_conversation_history": history, "ui_messages": ui}, separators=(",", ":")))
    return len(history) + len(ui)


FORMATS = {"gemini": (gemini, "session.jsonl"), "aider": (aider, ".aider.chat.history.md"),
           "opencode": (opencode, "session.json"), "cline": (cline, "task.json")}


def child(mode: str, path: Path, db: Path, fmt: str, *extra) -> dict:
    out = subprocess.run([sys.executable, str(HERE / "import_child.py"), mode, str(path), str(db), *map(str, extra),
                          "--format", fmt], capture_output=True, text=True, cwd=HERE)
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-3000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


# ---- memory of an import through the API ------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def api_key(workdir: Path) -> str:
    """A database for the API imports (Django is set up once per process), and a key to it."""
    common.setup_django(workdir / "api.sqlite3", workdir / "data-api")
    from conversations import api_keys

    _, secret = api_keys.create_api_key(name="bench", scopes=["read", "write"])
    common.close_django()
    return secret


def api_import_peak(path: Path, workdir: Path, name: str, secret: str) -> dict:
    """A fresh one-worker gunicorn; the file streamed to POST /api/v1/imports; the worker's VmHWM."""
    port = free_port()
    env = {**os.environ, "MEMORYUI_WORKERS": "1", "MEMORYUI_THREADS": "2"}
    log = workdir / f"gunicorn-{name}.log"
    server = subprocess.Popen([str(Path(sys.executable).parent / "gunicorn"), "memoryui.wsgi", "-c",
                               "memoryui/gunicorn_conf.py", "-b", f"127.0.0.1:{port}", "--log-level", "warning",
                               "--timeout", "3600"], cwd=ROOT, env=env, stdout=log.open("w"),
                              stderr=subprocess.STDOUT)
    try:
        worker = _ready(server, port, log)
        started = time.perf_counter()
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=3600)
        with path.open("rb") as body:
            conn.request("POST", f"/api/v1/imports?format=claude-code&namespace={name}", body=body, headers={
                "Authorization": f"Bearer {secret}", "Content-Type": "application/x-ndjson",
                "Content-Length": str(path.stat().st_size)})
            response = conn.getresponse()
            answer = json.loads(response.read())
        seconds = time.perf_counter() - started
        if response.status != 201:
            raise RuntimeError(f"{response.status}: {str(answer)[:500]}")
        embedded = _embedded_all(workdir / "api.sqlite3")
        status = Path(f"/proc/{worker}/status").read_text()
        peak = int(next(ln for ln in status.splitlines() if ln.startswith("VmHWM")).split()[1]) / 1024
        return {"peak_mb": peak, "seconds": seconds, "messages": answer["messages"], "bytes": path.stat().st_size,
                "embedded_seconds": embedded}
    finally:
        server.terminate()
        server.wait(timeout=60)


def _embedded_all(db: Path, timeout: float = 1800.0) -> float:
    """Seconds until the server's embedding process has given every imported row its vector
    (its queue is empty): the worker's peak is read at the same point of the work for the
    small import as for the large one."""
    import sqlite3

    started = time.perf_counter()
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)
    try:
        while time.perf_counter() - started < timeout:
            (left,) = conn.execute("SELECT count(*) FROM search_meaning_pending").fetchone()
            if not left:
                return time.perf_counter() - started
            time.sleep(0.5)
    finally:
        conn.close()
    raise RuntimeError(f"the background embedder left rows waiting after {timeout:.0f} s")


def _ready(server, port: int, log: Path) -> int:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"gunicorn exited: {log.read_text()[-2000:]}")
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            conn.request("GET", "/login/")
            conn.getresponse().read()
            children = Path(f"/proc/{server.pid}/task/{server.pid}/children").read_text().split()
            # The web worker, not the embedding process the server runs beside it.
            workers = [int(c) for c in children if b"embed" not in Path(f"/proc/{c}/cmdline").read_bytes()]
            if workers:
                return workers[0]
        except OSError:
            pass
        time.sleep(0.2)
    raise RuntimeError("gunicorn did not answer within 60 s")


def main(argv=None):
    args = common.parse_args(__doc__.splitlines()[0], argv)
    reps = args.reps or (1 if args.quick else 2)
    turns = 100 if args.quick else 4000
    started = time.perf_counter()
    res = common.Results("21 other agents' imports")
    files = {}
    for fmt, (make, name) in FORMATS.items():
        path = args.workdir / f"{fmt}-{name}"
        files[fmt] = (path, make(path, turns))
    cc = args.workdir / "claude-code-session.jsonl"
    w12_import.generate(cc, turns * 6)
    files["claude-code"] = (cc, sum(1 for _ in cc.open()))
    measured_formats = {}
    for fmt, (path, entries) in files.items():
        runs = {"memoryui": [], "floor": []}
        for rep in range(reps):
            db = args.workdir / f"{fmt}-memoryui-{rep}.sqlite3"
            runs["memoryui"].append(child("memoryui", path, db, fmt))
            runs["floor"].append(child("floor", path, args.workdir / f"{fmt}-floor-{rep}.sqlite3", fmt, db))
        last = runs["memoryui"][-1]
        measured_formats[fmt] = {"seconds": common.median([r["seconds"] for r in runs["memoryui"]]),
                                 "floor": common.median([r["seconds"] for r in runs["floor"]]),
                                 "rows": last["messages"], "last": last, "path": path, "entries": entries}
        res.sizes[fmt] = {"entries": entries, "bytes": path.stat().st_size, "messages": last["messages"],
                          "checkpoints": last["checkpoints"], "conversations": last["conversations"]}
    cc = measured_formats["claude-code"]
    floor_rate = cc["rows"] / cc["floor"]  # the floor of workload 12, Claude Code's
    for fmt, m in measured_formats.items():
        rate = m["rows"] / m["seconds"]
        ratio = rate / floor_rate
        res.add(metric=f"import a {fmt} session ({m['path'].stat().st_size / 1e6:,.1f} MB, {m['rows']:,} rows)",
                memoryui=rate, raw=floor_rate, unit="rows/s", target="memoryui / Claude Code's floor ≥ 0.4",
                ratio=ratio, passed=ratio >= 0.4,
                note=f"{m['seconds']:.2f} s; Claude Code's raw-SQL floor (json.loads of each line, raw inserts of its "
                     f"rows and lines) {cc['floor']:.2f} s for {cc['rows']:,} rows; this format's own floor "
                     f"{m['floor']:.2f} s ({m['floor'] / m['seconds']:.2f}× its import)")
    small, large = (200_000, 2_000_000) if args.quick else (2_000_000, 200_000_000)
    measured, secret = {}, api_key(args.workdir)
    for label, size in (("small", small), ("large", large)):
        path = args.workdir / f"api-{label}.jsonl"
        w12_import.generate(path, max(200, size // 990))
        measured[label] = api_import_peak(path, args.workdir, label, secret)
    ratio = measured["large"]["peak_mb"] / measured["small"]["peak_mb"]
    res.sizes["api"] = measured
    res.add(metric=f"peak memory of a {measured['large']['bytes'] / 1e6:,.0f} MB import through POST /api/v1/imports",
            memoryui=measured["large"]["peak_mb"], raw=measured["small"]["peak_mb"], unit="MB",
            target="large / small ≤ 1.2", ratio=ratio, passed=ratio <= 1.2,
            note=f"the gunicorn worker's VmHWM; the small import ({measured['small']['bytes'] / 1e6:,.1f} MB) in the "
                 f"raw column; the large one took {measured['large']['seconds']:.0f} s for "
                 f"{measured['large']['messages']:,} rows, and its worker's background embedder "
                 f"{measured['large']['embedded_seconds']:.0f} s more to give them their vectors")
    res.seconds = time.perf_counter() - started
    res.write(args.out)


if __name__ == "__main__":
    sys.exit(main())
