"""MERGE of 1%, side by side, for iterating on issue 16 (not part of ``make bench``).

Case 7's MERGE (upsert: 0.5% of the rows updated, 0.5% inserted) on a 20-file target:
deltatx copy-on-write, the plain-Spark rewrite of the touched files (case 7's peer), deltatx
with deletion vectors, and, with ``--spark-path``, deltatx forced onto its Spark matching
path; interleaved in each round so that machine load hits all alike. delta-rs runs the same
MERGE in a spawned process after the rounds. Prints medians, Spark jobs and process time (the
driver's CPU) per operation, and the ratios::

    PYTHONPATH=src:. python -m benchmarks.merge_side_by_side --rows 1000000 --rounds 3
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable

from benchmarks import rs_workers
from benchmarks.harness import spawn_context
from benchmarks.spark_cases import _COW, _DV, _plain_dml, dml_ops, dml_target


def main() -> None:
    """Runs the comparison and prints one line per variant and the ratios."""
    import deltatx
    from deltatx import DeltaTable
    from deltatx.spark.commands import merge_driver_source

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--files", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--spark-path", action="store_true", help="also time the Spark path")
    parser.add_argument("--no-delta-rs", action="store_true")
    args = parser.parse_args()
    spark = deltatx.spark_session()
    spark.range(1).count()
    sc = spark.sparkContext
    workdir = tempfile.mkdtemp(prefix="merge-side-by-side-")
    templates = {}
    for name, props in (("cow", _COW), ("dv", _DV)):
        templates[name] = os.path.join(workdir, f"template-{name}")
        target = dml_target(spark, args.rows, args.files)
        deltatx.write(target, templates[name], mode="append", properties=props)
    merge = dml_ops(spark, args.rows)["merge"]
    cap = merge_driver_source.DRIVER_SOURCE_BYTES

    def once(fn: Callable[[], object]) -> tuple[float, float, int]:
        group = uuid.uuid4().hex
        sc.setJobGroup(group, group)
        t0, p0 = time.perf_counter(), time.process_time()
        fn()
        wall, cpu = time.perf_counter() - t0, time.process_time() - p0
        return wall, cpu, len(sc.statusTracker().getJobIdsForGroup(group))

    def deltatx_merge(template: str, *, spark_path: bool) -> tuple[float, float, int]:
        run = os.path.join(workdir, "run")
        shutil.rmtree(run, ignore_errors=True)
        shutil.copytree(template, run)
        dt = DeltaTable.for_path(spark, run)
        merge_driver_source.DRIVER_SOURCE_BYTES = -1 if spark_path else cap
        try:
            return once(lambda: merge(dt))
        finally:
            merge_driver_source.DRIVER_SOURCE_BYTES = cap

    variants: dict[str, Callable[[], tuple[float, float, int]]] = {
        "cow": lambda: deltatx_merge(templates["cow"], spark_path=False),
        "plain": lambda: once(
            lambda: _plain_dml(
                spark,
                templates["cow"],
                os.path.join(workdir, f"plain-{uuid.uuid4().hex}"),
                "merge",
                args.rows,
            )
        ),
        "dv": lambda: deltatx_merge(templates["dv"], spark_path=False),
    }
    if args.spark_path:
        variants["cow-spark"] = lambda: deltatx_merge(templates["cow"], spark_path=True)
        variants["dv-spark"] = lambda: deltatx_merge(templates["dv"], spark_path=True)
    samples: dict[str, list[tuple[float, float, int]]] = {}
    for round_ in range(args.rounds + 1):  # the first round warms up
        for name, run_variant in variants.items():
            figure = run_variant()
            if round_:
                samples.setdefault(name, []).append(figure)
    medians = {}
    for name, figures in samples.items():
        walls = sorted(w for w, _, _ in figures)
        cpus = sorted(c for _, c, _ in figures)
        medians[name] = walls[len(walls) // 2]
        jobs = [j for _, _, j in figures]
        print(
            f"{name:9s} median {medians[name]:.3f}s  driver cpu {cpus[len(cpus) // 2]:.3f}s"
            f"  jobs {jobs}"
        )
    print(f"MERGE copy-on-write / plain Spark: {medians['cow'] / medians['plain']:.2f}")
    print(f"MERGE deletion vectors / copy-on-write: {medians['dv'] / medians['cow']:.2f}")
    if args.spark_path:
        print(f"copy-on-write, driver / Spark path: {medians['cow'] / medians['cow-spark']:.2f}")
    if not args.no_delta_rs:
        with spawn_context().Pool(1) as pool:
            rs = pool.apply(
                rs_workers.rs_dml, (templates["cow"], workdir, "merge", args.rows, args.rounds, 1)
            )
        rs_median = sorted(rs)[len(rs) // 2]
        print(f"delta-rs  median {rs_median:.3f}s")
        print(f"MERGE copy-on-write / delta-rs: {medians['cow'] / rs_median:.2f}")
    shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
