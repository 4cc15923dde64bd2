"""Runs the suite: ``python -m benchmarks.run [--quick] [--only metadata|spark|peer]``.

Writes ``<out>/latest.json``, ``<out>/latest.md`` and ``<out>/plots/*.png``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from dataclasses import replace
from datetime import UTC, datetime

from benchmarks import metadata_cases, replay_case, report
from benchmarks.harness import Row, host_gauge_s, machine, versions

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")


def _log(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def _load() -> str:
    try:
        return " ".join(f"{x:.1f}" for x in os.getloadavg())
    except OSError:
        return "n/a"


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit code."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="small sizes (under 5 minutes)")
    parser.add_argument(
        "--only",
        choices=("metadata", "spark", "contention", "peer", "s3", "scale"),
        help="one part of the suite, only case 10 (contended DML with re-execution), or only "
        "case 15 (DML cost against table size, not part of the full suite)",
    )
    parser.add_argument(
        "--out", help="results directory (default: benchmarks/results, quick: .../results/quick)"
    )
    parser.add_argument("--workdir", help="where tables are built (default: a temp dir)")
    parser.add_argument(
        "--rows",
        type=int,
        help="with --only spark: the table size of the DML, DV and OPTIMIZE cases (7-9)",
    )
    parser.add_argument(
        "--cases",
        help="with --only spark: the case numbers to run, comma-separated (e.g. 7,8,9)",
    )
    parser.add_argument(
        "--sizes",
        help="with --only scale: table sizes in rows, comma-separated "
        "(default 2000000,10000000,50000000; --quick: 100000,200000)",
    )
    parser.add_argument(
        "--runs", type=int, help="with --only scale: timed runs per figure (at least 3)"
    )
    args = parser.parse_args(argv)

    suite = "quick" if args.quick else "full"
    out = args.out or (os.path.join(RESULTS, "quick") if args.quick else RESULTS)
    workdir = args.workdir or tempfile.mkdtemp(prefix="deltatx-bench-")
    os.makedirs(workdir, exist_ok=True)
    started = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    load_start = _load()
    gauge_start = host_gauge_s()
    t0 = time.perf_counter()
    rows: list[Row] = []
    startup: float | None = None
    notes: list[str] = []
    try:
        if args.only == "contention":
            from benchmarks import reexecution_case, spark_cases

            sizes = spark_cases.QUICK if args.quick else spark_cases.FULL
            spark, startup = spark_cases.start_session()
            rows += reexecution_case.case_contention(spark, workdir, sizes.contention_s, _log)
        if args.only == "scale":
            from benchmarks import scale_case, spark_cases

            scale = scale_case.ScaleSizes(
                sizes=scale_case.parse_sizes(args.sizes)
                if args.sizes
                else (scale_case.QUICK_SIZES if args.quick else scale_case.FULL_SIZES)
            )
            if args.runs:
                scale = replace(scale, runs=args.runs)
            spark, startup = spark_cases.start_session()
            rows += scale_case.case_scale(spark, workdir, scale, _log)
            notes.append(
                f"Case 15 holds {scale.rows_per_file:,} rows per file at every size; the "
                f"driver JVM's maximum heap is {scale_case.jvm_max_heap_mb(spark):,.0f} MB."
            )
        if args.only in (None, "metadata"):
            sizes = metadata_cases.QUICK if args.quick else metadata_cases.FULL
            rows += metadata_cases.run_all(workdir, sizes, _log)
            adds = replay_case.QUICK_ADDS if args.quick else replay_case.FULL_ADDS
            rows += replay_case.case_large_commits(workdir, adds, 3, _log)
        if args.only in (None, "spark"):
            from benchmarks import spark_cases

            spark_sizes = spark_cases.QUICK if args.quick else spark_cases.FULL
            if args.rows:
                spark_sizes = replace(
                    spark_sizes, dml_rows=args.rows, dv_rows=args.rows, optimize_rows=args.rows
                )
            chosen = frozenset(args.cases.split(",")) if args.cases else None
            spark_rows, startup = spark_cases.run_all(workdir, spark_sizes, _log, chosen)
            rows += spark_rows
            if not args.quick:
                notes.append(
                    f"Case 6 appends {spark_sizes.write_rows:,} rows per run rather than the "
                    "10 million of the issue, so that the full suite finishes in about 10 "
                    "minutes on this machine; the ratio is what the goal is about."
                )
        if args.only in (None, "s3"):
            from benchmarks import s3_cases

            rows += s3_cases.run_all(s3_cases.QUICK if args.quick else s3_cases.FULL, _log)
        if args.only in (None, "peer"):
            from benchmarks import delta_spark_cases

            peer_sizes = delta_spark_cases.QUICK if args.quick else delta_spark_cases.FULL
            rows += delta_spark_cases.run_all(workdir, peer_sizes, _log)
    finally:
        if not args.workdir:
            shutil.rmtree(workdir, ignore_errors=True)
    elapsed = time.perf_counter() - t0
    argv_text = " ".join(argv if argv is not None else sys.argv[1:])
    meta = {
        "suite": suite,
        "command": f"python -m benchmarks.run {argv_text}".strip(),
        "started": started,
        "elapsed_s": elapsed,
        "machine": machine(),
        "versions": versions(),
        "load_start": load_start,
        "load_end": _load(),
        "host_gauge_start": gauge_start,
        "host_gauge_end": host_gauge_s(),
        "spark_startup_s": startup,
        "notes": notes,
    }
    os.makedirs(out, exist_ok=True)
    plot_dir = os.path.join(out, "plots")
    plots = report.write_plots(plot_dir, rows)
    report.write_json(os.path.join(out, "latest.json"), meta, rows)
    report.write_markdown(os.path.join(out, "latest.md"), meta, rows, plots, "plots")
    _log(f"wrote {out}/latest.md and latest.json in {elapsed:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
