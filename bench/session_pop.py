"""`pop_item` of an OpenAI Agents session (imports/sessions.py) on a 2,000-item session:
17 pops in a row (what the SDK's rewind_session_items does), the time of each and the
conversations the session has afterwards (before: 850-926 ms a pop and 18
conversations before). A fresh database: SQLite in a temporary data folder, or the
PostgreSQL database named by BENCH_DATABASE_URL (it is migrated; give an empty one).

Usage: python bench/session_pop.py [CHECKOUT]   (a checkout to measure; default this one)
"""
import json
import os
import statistics
import sys
import tempfile
import time

root = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
os.environ.update(MEMORYUI_DATA_DIR=tempfile.mkdtemp(prefix="pop-"), DJANGO_SETTINGS_MODULE="memoryui.settings",
                  PYTHONPATH=root)
os.environ.pop("DATABASE_URL", None)
if os.environ.get("BENCH_DATABASE_URL"):
    os.environ["DATABASE_URL"] = os.environ["BENCH_DATABASE_URL"]
sys.path.insert(0, root)
os.chdir(root)
import django

django.setup()
from django.core.management import call_command

call_command("migrate", verbosity=0)
from django.db import connection

from conversations.imports import sessions
from conversations.models import Conversation

ITEMS, POPS = 2000, 17
session_id = f"pop-bench-{time.monotonic_ns()}"
items = []
for n in range(ITEMS // 4):
    items += [{"role": "user", "content": f"question {n} " + "about the invoice export " * 8},
              {"type": "function_call", "id": f"fc_{n}", "call_id": f"call_{n}", "name": "lookup",
               "arguments": json.dumps({"n": n}), "status": "completed"},
              {"type": "function_call_output", "call_id": f"call_{n}", "output": f"result {n} " * 20},
              {"type": "message", "id": f"msg_{n}", "role": "assistant", "status": "completed",
               "content": [{"type": "output_text", "text": f"answer {n} " * 20, "annotations": []}]}]
for start in range(0, ITEMS, 1000):
    sessions.append_items(namespace="bench", session_id=session_id, items=items[start:start + 1000])
times = []
for _ in range(POPS):
    t = time.perf_counter()
    sessions.pop_item(namespace="bench", session_id=session_id)
    times.append((time.perf_counter() - t) * 1000)
small = f"{session_id}-small"
sessions.append_items(namespace="bench", session_id=small, items=items[:8])
t = time.perf_counter()
sessions.pop_item(namespace="bench", session_id=small)
small_ms = (time.perf_counter() - t) * 1000
left, _ = sessions.active_items(namespace="bench", session_id=session_id)
print(json.dumps({
    "database": connection.vendor, "items": ITEMS, "pops": POPS,
    "pop_ms_median": round(statistics.median(times), 1), "pop_ms_max": round(max(times), 1),
    "pop_ms_on_8_items": round(small_ms, 1),
    "conversations": Conversation.objects.filter(namespace="bench", external_id__startswith=session_id + "")
    .exclude(external_id__startswith=small).count(),
    "items_left": len(left),
}))
