"""Child process of workload 12: import one file (or only json.loads it); report time and peak memory.

  memoryui  conversations.imports.importer.import_path into a fresh SQLite database
  raw       json.loads of every line of the same file, nothing else
  baseline  Django set up on a fresh database, nothing imported
"""

import json
import resource
import sys
import time
from pathlib import Path

import common


def main():
    mode, path, db = sys.argv[1], sys.argv[2], Path(sys.argv[3])
    out = {"mode": mode}
    if mode == "raw":
        t0 = time.perf_counter()
        n = 0
        with open(path, encoding="utf-8") as f:
            for line in f:
                json.loads(line)
                n += 1
        out["seconds"] = time.perf_counter() - t0
    else:
        common.setup_django(db)
        if mode == "memoryui":
            from conversations.imports import importer

            t0 = time.perf_counter()
            result = importer.import_path(path, format="claude-code", namespace="bench")
            out["seconds"] = time.perf_counter() - t0
            out["messages"] = result.messages
            out["conversations"] = len(result.created)
            out["checkpoints"] = result.checkpoints
    out["peak_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(out))


if __name__ == "__main__":
    main()
