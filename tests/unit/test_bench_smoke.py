"""The benchmark harness runs end to end at its tiniest size (no timing is asserted)."""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path
from types import ModuleType

from deltatx.log.delta_log import DeltaLog

ROOT = Path(__file__).resolve().parents[2]


def _bench(name: str) -> ModuleType:
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    return importlib.import_module(f"benchmarks.{name}")


def test_commit_case_and_report_run_end_to_end(tmp_path: Path) -> None:
    cases = _bench("metadata_cases")
    report = _bench("report")
    harness = _bench("harness")

    rows = cases.case_commit(str(tmp_path / "work"), cases.TINY)
    rows += cases.case_conflicts(cases.TINY)

    names = [r.name for r in rows]
    assert any(n.startswith("commit 1 add") for n in names)
    assert any(n.startswith("check ") for n in names)
    for r in rows:
        assert r.deltatx.stats is not None and r.deltatx.stats.n >= harness.MIN_RUNS
    commit = next(r for r in rows if r.name.startswith("commit 1 add"))
    assert commit.peer is not None and commit.peer.engine == "delta-rs"
    assert commit.ratio is not None

    out = tmp_path / "results"
    out.mkdir()
    meta = {
        "suite": "smoke",
        "command": "pytest",
        "started": "now",
        "elapsed_s": 0.0,
        "machine": harness.machine(),
        "versions": harness.versions(),
        "load_start": "n/a",
        "load_end": "n/a",
        "spark_startup_s": None,
    }
    plots = report.write_plots(str(out / "plots"), rows)
    report.write_json(str(out / "latest.json"), meta, rows)
    report.write_markdown(str(out / "latest.md"), meta, rows, plots, "plots")
    saved = json.loads((out / "latest.json").read_text())
    assert len(saved["rows"]) == len(rows)
    assert "## 1 commit" in (out / "latest.md").read_text()


def test_large_commit_case_builds_a_log_both_engines_load(tmp_path: Path) -> None:
    case = _bench("replay_case")
    case.build_wide_log(str(tmp_path / "wide"), 7)
    snap = DeltaLog.for_table(str(tmp_path / "wide")).snapshot()
    assert snap.version == case.COMMITS - 1 and snap.num_files == 7
    stats = json.loads(snap.add_files()[0].stats or "{}")
    assert len(stats["minValues"]) == case.COLUMNS
    (row,) = case.case_large_commits(str(tmp_path / "work"), 9, 1, lambda _: None)
    assert row.deltatx.stats is not None and row.peer is not None and row.ratio is not None
