"""The benchmarks must not rot: `bench/run.py --quick` runs every workload once.

The benchmarks configure their own SQLite files whatever DATABASE_URL says, so
`.ci/run` runs this file once, in the SQLite pass, and leaves it out of the
PostgreSQL pass (`--ignore`), where it would only repeat the same work.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import skip_or_fail

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_it_runs_every_workload_quick(tmp_path):
    try:
        import langgraph.checkpoint.sqlite  # noqa: F401
    except ImportError:
        skip_or_fail("bench/requirements.txt is not installed (LangGraph's SqliteSaver is the peer)")
    report_before = (ROOT / "docs" / "BENCHMARKS.md").read_bytes() if (ROOT / "docs" / "BENCHMARKS.md").exists() \
        else None
    env = {k: v for k, v in os.environ.items()
           if k not in ("DATABASE_URL", "MEMORYUI_DATA_DIR", "DJANGO_SETTINGS_MODULE")}
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "run.py"), "--quick", "--out", str(tmp_path)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    results = json.loads((tmp_path / "results.json").read_text())["results"]
    # Every workload (15 measures PostgreSQL and runs only where it is reachable).
    measured = {r["workload"].split()[0] for r in results}
    assert {str(n) for n in (*range(1, 15), 16, 17, 18, 20, 21)} <= measured
    if os.environ.get("CI") == "true":  # .ci/run starts PostgreSQL before this pass
        assert "15" in measured, "workload 15 was not run: PostgreSQL was not reachable"
    for result in results:
        assert result["rows"], result["workload"]
        for row in result["rows"]:
            assert row["memoryui"] is not None and row["memoryui"] > 0, row
    report = (tmp_path / "BENCHMARKS.md").read_text()
    assert "| 1 | appends/s" in report and "SQLite" in report
    # Quick numbers never replace the committed full-run table.
    after = (ROOT / "docs" / "BENCHMARKS.md").read_bytes() if (ROOT / "docs" / "BENCHMARKS.md").exists() else None
    assert after == report_before


def test_it_merges_one_workload_into_the_committed_results(tmp_path):
    """`run.py --only N --merge` replaces workload N's rows and keeps every other workload's."""
    sys.path.insert(0, str(ROOT / "bench"))
    import run

    base = [{"workload": f"{n} w{n}", "rows": [], "sizes": {}, "seconds": 1.0} for n in (1, 2, 10)]
    fresh = [{"workload": "2 new", "rows": [], "sizes": {}, "seconds": 2.0},
             {"workload": "9 new", "rows": [], "sizes": {}, "seconds": 3.0}]
    merged = run.merge(base, fresh)
    assert [r["workload"] for r in merged] == ["1 w1", "2 new", "9 new", "10 w10"]
    # The committed results render the committed table (its rows; the notes may be edited since).
    meta, results = run.read_results(ROOT / "docs" / "benchmarks.json")
    numbers = [int(run.number_of(r)) for r in results]
    # Every workload of the suite once, in order (15 needs PostgreSQL; each is merged as it is run).
    assert numbers == sorted(set(numbers)) and set(range(1, 15)) <= set(numbers) <= set(range(1, 23))
    report = run.render(results, quick=False, seconds=meta["seconds"], load=meta.get("load", ""),
                        date=meta.get("date", ""), merged=meta.get("merged"))
    table = [line for line in report.splitlines() if line.startswith("| ")]
    assert table == [line for line in (ROOT / "docs" / "BENCHMARKS.md").read_text().splitlines()
                     if line.startswith("| ")]


def test_the_summary_on_top_counts_each_workloads_targets():
    """BENCHMARKS.md opens with one line per workload: the targets it met out of those it
    set, and the names of the ones it missed, without their parenthesised detail."""
    sys.path.insert(0, str(ROOT / "bench"))
    import run

    def row(metric, passed):
        return {"metric": metric, "passed": passed}

    results = [
        {"workload": "1 append", "rows": [row("appends/s", True), row("latency @100", None)]},
        {"workload": "2 bytes on disk", "rows": [row("bytes at 1,000 (text 564 B)", False),
                                                 row("bytes at 10,000 (text 562 B)", False)]},
        {"workload": "3 load history", "rows": [row("load", None)]},
        {"workload": "8 HTTP append", "rows": [row(f"case {n}", n % 2 == 0) for n in range(9)]},
    ]
    lines = run.summary(results)
    assert lines[2] == "| 1 | append | 1 of 1 | — |"
    assert lines[3] == "| 2 | bytes on disk | 0 of 2 | bytes at 1,000; bytes at 10,000 |"
    assert lines[4] == "| 3 | load history | no target | — |"
    assert lines[5] == "| 8 | HTTP append | 5 of 9 | case 1; case 3; case 5; and 1 more |"
    assert lines[-1] == "| | every workload | 6 of 12 | |"
    # The committed page carries it above the full table.
    page = (ROOT / "docs" / "BENCHMARKS.md").read_text()
    assert page.index("| # | workload | targets met | missed |") < page.index("| # | what | memoryui |")
