"""Workload 6: export a 1,000,000-message conversation as JSONL: time and peak memory.

Each export runs in a fresh child process (bench/export_child.py) so that its
peak resident memory (ru_maxrss) is its own: memoryui through
`conversations.export.export_stream(id, "jsonl")`, raw sqlite3 streaming the same
rows from the same file into the same line shape, and a baseline child that only
sets Django up (what the process costs before exporting anything).
"""

import json
import subprocess
import sys
import time
from pathlib import Path

import common

HERE = Path(__file__).resolve().parent


def child(mode, db, cid) -> dict:
    out = subprocess.run([sys.executable, str(HERE / "export_child.py"), mode, str(db), cid],
                         capture_output=True, text=True, check=True, cwd=HERE)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None):
    args = common.parse_args(__doc__.splitlines()[0], argv)
    reps = args.reps or (1 if args.quick else 2)
    started = time.perf_counter()
    db, ids = common.big_database(args.shared, args.quick)
    common.close_django()
    n = max(ids)
    cid = ids[n]
    runs = common.alternate({"memoryui": lambda: child("memoryui", db, cid), "raw": lambda: child("raw", db, cid)},
                            reps)
    base = child("baseline", db, cid)
    t = {k: common.median([r["seconds"] for r in v]) for k, v in runs.items()}
    mem = {k: max(r["peak_mb"] for r in v) for k, v in runs.items()}
    res = common.Results("6 export")
    res.sizes = {"messages": n, "reps": reps, "jsonl_chars": runs["memoryui"][0]["chars"]}
    res.add(metric=f"export {n:,} messages as JSONL: time", memoryui=t["memoryui"], raw=t["raw"], unit="s",
            ratio=t["memoryui"] / t["raw"], target="memoryui/raw (no target)",
            note=f"{n / t['memoryui']:,.0f} rows/s; memoryui decodes every row into its model")
    res.add(metric=f"export {n:,} messages as JSONL: peak memory of the process", memoryui=mem["memoryui"],
            raw=mem["raw"], unit="MB", target="memoryui < 150 MB", ratio=mem["memoryui"],
            passed=mem["memoryui"] < 150,
            note=f"a process that only sets Django up peaks at {base['peak_mb']:.0f} MB")
    res.seconds = time.perf_counter() - started
    res.write(args.out)


if __name__ == "__main__":
    sys.exit(main())
