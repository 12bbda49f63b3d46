"""Child process of workload 18: one export of a subject's data, its time and peak memory.

Run in its own process so ru_maxrss is the peak of this export alone.
  zip       conversations.proofs.bundle: the subject access export ZIP, every chunk to /dev/null
  jsonl     the same conversations exported one after another as JSONL (conversations.export), to /dev/null
  baseline  Django set up and the subject's conversations counted, nothing exported (the process's floor)
"""

import json
import resource
import sys
import time
from pathlib import Path

import common


def main():
    mode, db, subject = sys.argv[1], sys.argv[2], sys.argv[3]
    common.setup_django(Path(db))
    from conversations.export import export_stream
    from conversations.models import Conversation
    from conversations.proofs import bundle

    written = 0
    t0 = time.perf_counter()
    with open("/dev/null", "wb") as sink:
        if mode == "zip":
            for chunk in bundle.prepare(subject).chunks():
                written += len(chunk)
                sink.write(chunk)
        elif mode == "jsonl":
            for cid in Conversation.objects.about(subject).values_list("id", flat=True):
                for chunk in export_stream(cid, "jsonl").chunks:
                    data = chunk.encode("utf-8")
                    written += len(data)
                    sink.write(data)
        else:
            Conversation.objects.about(subject).count()
    seconds = time.perf_counter() - t0
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: kilobytes
    print(json.dumps({"seconds": seconds, "peak_mb": rss_mb, "bytes": written}))


if __name__ == "__main__":
    main()
