"""UPDATE and DELETE of 1%, side by side, for iterating on issue 16 (not part of ``make bench``).

deltatx copy-on-write (20 files) vs the plain-Spark rewrite of the touched files (case 7's
peer), and deltatx with deletion vectors vs copy-on-write on the same 100-file layout (case
8), interleaved in each round so that machine load hits all alike. Prints medians and Spark
jobs per operation::

    PYTHONPATH=src:. python -m benchmarks.dml_side_by_side --rows 1000000 --rounds 3
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable
from typing import Any

from benchmarks import rs_workers
from benchmarks.spark_cases import _COW, _DV, _plain_dml, dml_target


def main() -> None:
    """Runs the comparison and prints one line per (operation, variant) and the ratios."""
    import deltatx
    from deltatx import DeltaTable

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    spark = deltatx.spark_session()
    spark.range(1).count()
    sc = spark.sparkContext
    workdir = tempfile.mkdtemp(prefix="dml-side-by-side-")
    lo, hi, _, _ = rs_workers.dml_bounds(args.rows)
    layouts = {"cow": (20, _COW), "dv": (100, _DV), "cow100": (100, _COW)}
    templates = {}
    for name, (files, props) in layouts.items():
        templates[name] = os.path.join(workdir, f"template-{name}")
        target = dml_target(spark, args.rows, files)
        deltatx.write(target, templates[name], mode="append", properties=props)
    ops: dict[str, Callable[[Any], object]] = {
        "delete": lambda dt: dt.delete(f"id >= {lo} AND id < {hi}"),
        "update": lambda dt: dt.update(condition=f"id >= {lo} AND id < {hi}", set={"v": "v + 1.0"}),
    }

    def once(fn: Callable[[], object]) -> tuple[float, int]:
        group = uuid.uuid4().hex
        sc.setJobGroup(group, group)
        t0 = time.perf_counter()
        fn()
        return time.perf_counter() - t0, len(sc.statusTracker().getJobIdsForGroup(group))

    samples: dict[tuple[str, str], list[tuple[float, int]]] = {}
    for round_ in range(args.rounds + 1):  # the first round warms up
        for op, fn in ops.items():
            for variant in ("cow", "plain", "dv", "cow100"):
                if variant == "plain":
                    out = os.path.join(workdir, f"plain-{uuid.uuid4().hex}")
                    figure = once(
                        lambda o=op, p=out: _plain_dml(spark, templates["cow"], p, o, args.rows)
                    )
                else:
                    run = os.path.join(workdir, "run")
                    shutil.rmtree(run, ignore_errors=True)
                    shutil.copytree(templates[variant], run)
                    dt = DeltaTable.for_path(spark, run)
                    figure = once(lambda f=fn, t=dt: f(t))
                if round_:
                    samples.setdefault((op, variant), []).append(figure)
    medians = {}
    for (op, variant), figures in sorted(samples.items()):
        times = sorted(t for t, _ in figures)
        medians[op, variant] = times[len(times) // 2]
        jobs = [j for _, j in figures]
        print(f"{op:7s} {variant:7s} median {medians[op, variant]:.3f}s jobs {jobs}")
    for op in ops:
        cow_plain = medians[op, "cow"] / medians[op, "plain"]
        dv_cow = medians[op, "dv"] / medians[op, "cow100"]
        print(f"{op}: copy-on-write/plain {cow_plain:.2f}, DV/copy-on-write {dv_cow:.2f}")
    shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
