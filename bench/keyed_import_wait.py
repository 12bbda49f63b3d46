"""The longest wait of another process's append while a ~2 MB session is imported over
the API, with and without an Idempotency-Key. SQLite, a fresh
database in a temporary data folder. Usage: python bench/keyed_import_wait.py [CHECKOUT]
(a checkout to measure; default this one)."""
import json
import os
import subprocess
import sys
import tempfile
import time

root = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
data = tempfile.mkdtemp(prefix="kiw-")
os.environ.update(MEMORYUI_MAX_MESSAGE_BYTES="2097152", MEMORYUI_DATA_DIR=data,
                  DJANGO_SETTINGS_MODULE="memoryui.settings", PYTHONPATH=root)
os.environ.pop("DATABASE_URL", None)
sys.path.insert(0, root)
os.chdir(root)
import django

django.setup()
from django.core.management import call_command

call_command("migrate", verbosity=0)
from django.test import Client

from conversations import api_keys, store

APPENDER = """
import json, os, sys, time, django
django.setup()
from conversations import api_keys, store
cid, stop = sys.argv[1], sys.argv[2]
waits = []
print("ready", flush=True)
while not os.path.exists(stop):
    t = time.monotonic()
    store.append_message(conversation_id=cid, message={"kind": "note", "text": "still here"})
    waits.append(time.monotonic() - t)
    time.sleep(0.01)
print(json.dumps({"appends": len(waits), "max": max(waits), "p99": sorted(waits)[int(len(waits) * .99)]}))
"""

def session(sid, turns):
    lines, parent = [], None
    filler = "the cart total applies the coupon before the refund is checked " * 12
    for n in range(turns):
        for kind, msg in (("user", {"role": "user", "content": f"step {n} " + filler}),
                          ("assistant", {"id": f"m{n}", "role": "assistant",
                                         "content": [{"type": "text", "text": f"done {n} " + filler}]})):
            uid = f"u{len(lines):07d}"
            lines.append(json.dumps({"parentUuid": parent, "isSidechain": False, "sessionId": sid, "type": kind,
                                     "uuid": uid, "timestamp": "2025-11-02T10:00:00.000Z", "message": msg}))
            parent = uid
    return "\n".join(lines) + "\n"

_, secret = api_keys.create_api_key(name="bench", scopes=["read", "write"], created_by="bench")
client = Client(HTTP_HOST="localhost")
for keyed in (False, True, False, True):
    busy = store.create_conversation(title="busy")
    text = session(f"sess-{keyed}-{time.monotonic_ns()}", 1050)
    stop = os.path.join(data, f"stop-{time.monotonic_ns()}")
    env = dict(os.environ)
    p = subprocess.Popen([sys.executable, "-c", APPENDER, str(busy.pk), stop], cwd=root, env=env,
                         stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "ready"
    time.sleep(0.3)
    headers = {"Authorization": f"Bearer {secret}"}
    if keyed:
        headers["Idempotency-Key"] = f"k-{time.monotonic_ns()}"
    t = time.monotonic()
    r = client.post("/api/v1/imports", json.dumps({"content": text}), content_type="application/json", headers=headers)
    seconds = time.monotonic() - t
    time.sleep(0.3)
    open(stop, "w").close()
    out = json.loads(p.communicate(timeout=60)[0].strip().splitlines()[-1])
    print(f"{'keyed  ' if keyed else 'unkeyed'} {len(text.encode()) / 1e6:.2f} MB: "
          f"status {r.status_code}, import {seconds:.2f} s; "
          f"{out['appends']} appends meanwhile, longest wait {out['max']:.3f} s, p99 {out['p99']:.3f} s", flush=True)
