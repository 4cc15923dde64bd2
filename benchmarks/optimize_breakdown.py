"""Where compaction's time goes: executor CPU of each step, side by side (issue 16).

Not in ``make bench``. Compacts the same files several ways, interleaved, and prints for each
the Spark jobs and the executor CPU seconds of their stages (Spark's own task metrics, which a
machine shared with other work inflates far less than wall time)::

    python -m benchmarks.optimize_breakdown --rows 1000000 --files 200 --runs 4

``plain`` reads the files and coalesces them into one (no row addresses); ``sorted`` also
sorts each row by its file path and row index; ``deltatx`` is the compaction's own write
(:func:`write_bins`), which reads a bin written alone without deletion vectors in the order
Spark's scan plans it, each file's place checked; ``by_path`` is the same write sorted by path
and row index instead (as bins written together are); ``indexed`` sorts by each row's file
index, looked up (the read bins with deletion vectors still take). Wall seconds are printed
too.
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

from benchmarks.spark_cases import events, start_session


def _stage_cpu(spark: SparkSession, group: str) -> tuple[int, float]:
    """Jobs run in ``group`` and the executor CPU seconds of their stages."""
    sc = spark.sparkContext
    jobs = sc.statusTracker().getJobIdsForGroup(group)
    stages = {s for j in jobs if (info := sc.statusTracker().getJobInfo(j)) for s in info.stageIds}
    store = sc._jsc.sc().statusStore()
    cpu_ns = sum(int(store.lastStageAttempt(s).executorCpuTime()) for s in stages)
    return len(jobs), cpu_ns / 1e9


def main() -> None:
    """Prints each variant's executor CPU seconds per run and their medians."""
    import deltatx
    from deltatx import DeltaTable
    from deltatx.log.transaction import OptimisticTransaction
    from deltatx.spark.commands import compaction_write
    from deltatx.spark.commands.compaction_write import write_bins

    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--files", type=int, default=200)
    parser.add_argument("--runs", type=int, default=4)
    args = parser.parse_args()
    spark, _ = start_session()
    work = tempfile.mkdtemp(prefix="optimize-breakdown-")
    table = os.path.join(work, "table")
    deltatx.write(events(spark, args.rows).repartition(args.files), table, mode="append")
    log = DeltaTable.for_path(spark, table)._log
    txn = OptimisticTransaction(log, log.snapshot())
    files = sorted(txn.scan(None), key=lambda f: f.path)
    paths = [os.path.join(table, f.path) for f in files]
    columns = ["id", "day", "v", "s"]

    def out() -> str:
        path = os.path.join(work, "out")
        shutil.rmtree(path, ignore_errors=True)
        return path

    variants: dict[str, Callable[[], object]] = {
        "plain": lambda: spark.read.parquet(*paths).coalesce(1).write.parquet(out()),
        "sorted": lambda: (
            spark.read.parquet(*paths)
            .select("*", "_metadata.file_path", "_metadata.row_index")
            .coalesce(1)
            .sortWithinPartitions("file_path", "row_index")
            .select(*columns)
            .write.parquet(out())
        ),
        "deltatx": lambda: write_bins(spark, txn, [files]),
        "by_path": lambda: _without(
            ["read_in_scan_order"], lambda: write_bins(spark, txn, [files])
        ),
        "indexed": lambda: _without(
            ["read_in_scan_order", "_bins_in_path_order"], lambda: write_bins(spark, txn, [files])
        ),
    }

    def _without(steps: list[str], op: Callable[[], object]) -> None:
        """Runs ``op`` with the write's ``steps`` declining, as where they cannot apply."""
        saved = {name: getattr(compaction_write, name) for name in steps}
        for name in steps:
            setattr(compaction_write, name, lambda *_args, **_kw: None)
        try:
            op()
        finally:
            for name, step in saved.items():
                setattr(compaction_write, name, step)

    cpu: dict[str, list[float]] = {name: [] for name in variants}
    wall: dict[str, list[float]] = {name: [] for name in variants}
    try:
        for run in range(args.runs + 1):
            for name, op in variants.items():
                group = f"breakdown-{uuid.uuid4().hex}"
                spark.sparkContext.setJobGroup(group, group)
                started = time.perf_counter()
                op()
                elapsed = time.perf_counter() - started
                jobs, seconds = _stage_cpu(spark, group)
                print(
                    f"run {run} {name:8s} jobs {jobs} executor cpu {seconds:.2f} s "
                    f"wall {elapsed:.2f} s"
                )
                if run:  # the first round warms the JVM up
                    cpu[name].append(seconds)
                    wall[name].append(elapsed)
        for name, values in cpu.items():
            print(
                f"{name:8s} median executor cpu {statistics.median(values):.2f} s "
                f"wall {statistics.median(wall[name]):.2f} s"
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
