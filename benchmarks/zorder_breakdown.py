"""Where OPTIMIZE ZORDER BY's time goes, beside case 9's plain-Spark Z-order sort (issue 16).

Not in ``make bench``. Runs deltatx's ZORDER BY and case 9's plain-Spark baseline (quantile
buckets, interleaved bits, range partitioning, sort, write) on the same files, interleaved,
and prints for each the Spark jobs, the executor CPU seconds of their stages (Spark's own task
metrics, which a machine shared with other work inflates far less than wall time), the driver's
Python CPU and the wall time; ``--stages`` also prints every stage::

    python -m benchmarks.zorder_breakdown --rows 1000000 --files 200 --runs 4
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable

from pyspark.sql import SparkSession

from benchmarks.optimize_case import plain_z_order
from benchmarks.spark_cases import events, start_session

_Z_COLUMNS = ("id", "v")


def _stage_cpu(spark: SparkSession, group: str, *, show: bool) -> tuple[int, float]:
    """Jobs run in ``group`` and the executor CPU seconds of their stages."""
    sc = spark.sparkContext
    jobs = sc.statusTracker().getJobIdsForGroup(group)
    stages = sorted(
        {s for j in jobs if (info := sc.statusTracker().getJobInfo(j)) for s in info.stageIds}
    )
    store = sc._jsc.sc().statusStore()
    total = 0
    for s in stages:
        try:
            stage = store.lastStageAttempt(s)
        except Exception:  # a stage skipped (its shuffle reused) has no attempt
            continue
        cpu = int(stage.executorCpuTime())
        total += cpu
        if show:
            print(f"    stage {s:4d} {cpu / 1e9:6.2f} s  {stage.name()[:90]}")
    return len(jobs), total / 1e9


def _plain(spark: SparkSession, sources: list[str], out: str, out_files: int) -> None:
    """Case 9's baseline, the very function ``benchmarks.optimize_case`` measures."""
    plain_z_order(spark, sources, out, out_files)


def main() -> None:
    """Prints each variant's jobs and CPU per run, then their medians."""
    import deltatx
    from deltatx import DeltaTable

    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--files", type=int, default=200)
    parser.add_argument("--runs", type=int, default=4)
    parser.add_argument("--stages", action="store_true")
    parser.add_argument("--profile", action="store_true", help="cProfile deltatx's driver")
    args = parser.parse_args()
    spark, _ = start_session()
    work = tempfile.mkdtemp(prefix="zorder-breakdown-")
    template = os.path.join(work, "template")
    deltatx.write(events(spark, args.rows).repartition(args.files), template, mode="append")
    sources = sorted(
        os.path.join(template, f) for f in os.listdir(template) if f.endswith(".parquet")
    )
    run_dir = os.path.join(work, "run")
    out_dir = os.path.join(work, "out")

    def dx() -> None:
        DeltaTable.for_path(spark, run_dir).optimize().execute_z_order_by(*_Z_COLUMNS)

    def dx_setup() -> None:
        shutil.rmtree(run_dir, ignore_errors=True)
        shutil.copytree(template, run_dir)

    def plain_setup() -> None:
        shutil.rmtree(out_dir, ignore_errors=True)

    variants: dict[str, tuple[Callable[[], object], Callable[[], object]]] = {
        "plain": (lambda: _plain(spark, sources, out_dir, 1), plain_setup),
        "deltatx": (dx, dx_setup),
    }
    figures: dict[str, dict[str, list[float]]] = {
        name: {"jobs": [], "cpu": [], "driver": [], "wall": []} for name in variants
    }
    try:
        for run in range(args.runs + 1):
            for name, (op, setup) in variants.items():
                setup()
                group = f"zorder-{uuid.uuid4().hex}"
                spark.sparkContext.setJobGroup(group, group)
                profiler = None
                if args.profile and name == "deltatx" and run == args.runs:
                    import cProfile

                    profiler = cProfile.Profile()
                    profiler.enable()
                t0, c0 = time.perf_counter(), time.process_time()
                op()
                wall, driver = time.perf_counter() - t0, time.process_time() - c0
                if profiler is not None:
                    profiler.disable()
                    profiler.print_stats("cumulative")
                jobs, cpu = _stage_cpu(spark, group, show=args.stages)
                print(
                    f"run {run} {name:8s} jobs {jobs} executor cpu {cpu:.2f} s "
                    f"driver cpu {driver:.2f} s wall {wall:.2f} s"
                )
                if run:  # the first round warms the JVM up
                    for key, value in zip(
                        ("jobs", "cpu", "driver", "wall"), (jobs, cpu, driver, wall), strict=True
                    ):
                        figures[name][key].append(value)
        for name, values in figures.items():
            medians = {k: statistics.median(v) for k, v in values.items()}
            print(
                f"{name:8s} median jobs {medians['jobs']:g} executor cpu {medians['cpu']:.2f} s "
                f"driver cpu {medians['driver']:.2f} s wall {medians['wall']:.2f} s"
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
