"""Child process of workload 6: export one conversation as JSONL, report time and peak memory.

Run in its own process so ru_maxrss is the peak of this export alone.
  memoryui  conversations.export.export_stream(id, "jsonl"), every chunk written to /dev/null
  raw       sqlite3 rows streamed from the same file, each written as the same JSON line shape
  baseline  Django set up and the conversation looked up, nothing exported (the floor of the process)
"""

import json
import resource
import sqlite3
import sys
import time

import common


def main():
    mode, db, cid = sys.argv[1], sys.argv[2], sys.argv[3]
    written = 0
    t0 = time.perf_counter()
    with open("/dev/null", "w") as sink:
        if mode == "raw":
            conn = sqlite3.connect(db)
            conn.executescript(common.RAW_PRAGMAS)
            rows = conn.execute("SELECT position, kind, created_at, content FROM conversations_message "
                                "WHERE conversation_id = ? ORDER BY position", (cid.replace("-", ""),))
            for position, kind, created_at, content in rows:
                line = json.dumps({"position": position, "kind": kind, "created_at": created_at,
                                   "message": json.loads(content)}, ensure_ascii=False) + "\n"
                written += len(line)
                sink.write(line)
        else:
            from pathlib import Path

            common.setup_django(Path(db))
            from conversations.export import export_stream
            from conversations.models import Conversation

            if mode == "baseline":
                Conversation.objects.get_live(cid)
            else:
                for chunk in export_stream(cid, "jsonl").chunks:
                    written += len(chunk)
                    sink.write(chunk)
    seconds = time.perf_counter() - t0
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: kilobytes
    print(json.dumps({"seconds": seconds, "peak_mb": rss_mb, "chars": written}))


if __name__ == "__main__":
    main()
