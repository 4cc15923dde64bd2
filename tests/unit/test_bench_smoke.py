"""The benchmark harness runs end to end at its tiniest size (no timing is asserted)."""

from __future__ import annotations

import importlib
import json
import os
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
    if os.path.isdir(cases.RAM_FS) and os.access(cases.RAM_FS, os.W_OK):
        ram = next(r for r in rows if "RAM file system" in r.name)
        assert ram.peer is not None and ram.ratio is not None and ram.met is None

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
        "host_gauge_start": harness.host_gauge_s(),
        "host_gauge_end": 1.5,
        "spark_startup_s": None,
    }
    plots = report.write_plots(str(out / "plots"), rows)
    report.write_json(str(out / "latest.json"), meta, rows)
    report.write_markdown(str(out / "latest.md"), meta, rows, plots, "plots")
    saved = json.loads((out / "latest.json").read_text())
    assert len(saved["rows"]) == len(rows)
    text = (out / "latest.md").read_text()
    assert "## 1 commit" in text
    assert f"{meta['host_gauge_start']:.2f} s / 1.50 s of CPU" in text


def test_large_commit_case_builds_a_log_both_engines_load(tmp_path: Path) -> None:
    case = _bench("replay_case")
    case.build_wide_log(str(tmp_path / "wide"), 7)
    snap = DeltaLog.for_table(str(tmp_path / "wide")).snapshot()
    assert snap.version == case.COMMITS - 1 and snap.num_files == 7
    stats = json.loads(snap.add_files()[0].stats or "{}")
    assert len(stats["minValues"]) == case.COLUMNS
    (row,) = case.case_large_commits(str(tmp_path / "work"), 9, 1, lambda _: None)
    assert row.deltatx.stats is not None and row.peer is not None and row.ratio is not None


def test_scale_report_tabulates_every_engine_and_skipped_sizes(tmp_path: Path) -> None:
    harness = _bench("harness")
    report = _bench("report")

    def fig(engine: str, seconds: float, **extra: object) -> object:
        return harness.Figure(engine, "1", harness.Stats.of([seconds]), dict(extra))

    memory = {"driver_peak_rss_mb": 100.0, "jvm_peak_heap_mb": 200.0}
    rows = []
    for n in (1_000.0, 2_000.0):
        for variant, seconds in (
            ("copy-on-write", 2.0),
            ("deletion vectors", 1.0),
            ("deletion vectors, no fsync", 0.15),
        ):
            mine = {"scale_op": "delete", "scale_variant": variant, **memory}
            for peer in (fig("plain Spark", 3.0, **memory), fig("delta-rs", 0.5, peak_rss_mb=50.0)):
                rows.append(
                    harness.Row(
                        case="15 scale",
                        name=f"DELETE 1%, {variant} vs {peer.engine}",
                        size=f"{n:,.0f} rows",
                        unit="s",
                        deltatx=fig("deltatx", seconds * n / 1000, **mine),
                        peer=peer,
                        x=n,
                    )
                )
    skipped = harness.Row(
        case="15 scale",
        name="MERGE, UPDATE, DELETE 1%",
        size="9 rows",
        unit="s",
        deltatx=harness.Figure("deltatx", "1", None, {"scale_skipped": "no disk"}),
        x=9e12,
        notes="skipped: no disk",
    )
    plots = report.write_scale_plots(str(tmp_path), [*rows, skipped])
    assert list(plots) == ["scale: DELETE 1% of the rows"]
    assert (tmp_path / plots["scale: DELETE 1% of the rows"]).exists()
    text = "\n".join(report.scale_section([*rows, skipped], plots, "plots"))
    assert (
        "| DELETE 1% | 2,000 | 4.00 s | 2.00 s | 300.00 ms | 3.00 s | 500.00 ms | 8.00 | 4.00 "
        "| 0.60 | synced: no; no fsync: yes (not judged below 10M rows) |"
    ) in text
    assert "delta-rs: 50 / -" in text and "plain Spark: 100 / 200" in text
    assert "| all | 9,000,000,000,000 |" in text and "skipped: no disk" in text
