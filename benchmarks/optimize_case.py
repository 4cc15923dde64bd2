"""Case 9: OPTIMIZE (compaction) and OPTIMIZE ZORDER BY vs plain Spark on the same files."""

from __future__ import annotations

import os
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from benchmarks.harness import Figure, Row, Stats
from benchmarks.spark_cases import (
    SparkSizes,
    Timer,
    _copy,
    _dx,
    _fresh,
    _note_memory,
    _versions,
    events,
)


def case_optimize(spark: SparkSession, workdir: str, sizes: SparkSizes) -> list[Row]:
    """Case 9: compaction throughput vs a plain Parquet rewrite of the same rows."""
    import deltatx
    from deltatx import DeltaTable

    timer = Timer(spark)
    spark_version, _ = _versions()
    n = sizes.optimize_rows
    template = _fresh(os.path.join(workdir, "optimize-template"))
    deltatx.write(events(spark, n).repartition(sizes.optimize_files), template, mode="append")
    run_dir = os.path.join(workdir, "optimize-run")
    handle: dict[str, Any] = {}

    def setup() -> None:
        _copy(template, run_dir)
        handle["dt"] = DeltaTable.for_path(spark, run_dir)

    def dx_op() -> None:
        handle["metrics"] = handle["dt"].optimize().execute_compaction()

    def out_files() -> int:
        return max(int(handle["metrics"].num_added_files), 1)

    counter = iter(range(10**6))

    def plain_op() -> None:
        out = _fresh(os.path.join(workdir, f"optimize-plain-{next(counter)}"))
        spark.read.parquet(template).coalesce(out_files()).write.parquet(out)

    # In turn, round by round: neither pays alone for a cold JVM or a slow stretch of the host
    # (the copy before each is not timed, and the plain rewrite reads the template).
    (dx, dx_jobs), (pl, pl_jobs) = timer.measure_side_by_side(
        [dx_op, plain_op], runs=sizes.optimize_runs, warmup=sizes.warmup, setup=setup
    )
    dx_memory = timer.memories[0]
    dx_tp, pl_tp = _throughput(dx, n), _throughput(pl, n)
    row = Row(
        case="9 OPTIMIZE",
        name=f"compact {sizes.optimize_files} files into {out_files()}",
        size=f"{n:,} rows",
        unit="rows/s",
        higher_is_better=True,
        deltatx=_dx(dx_tp, dx_jobs, seconds_median=dx.median),
        peer=Figure(
            "plain Spark",
            spark_version,
            pl_tp,
            {
                "spark_jobs_per_op": pl_jobs,
                "seconds_median": pl.median,
                "what": f"spark.read.parquet(...).coalesce({out_files()}).write.parquet",
            },
        ),
        target=">= 0.8x plain Spark throughput",
        notes=(
            f"{dx.median:.2f} s vs {pl.median:.2f} s; Spark jobs per operation: deltatx "
            f"{dx_jobs:g}, plain Spark {pl_jobs:g}"
        ),
    )
    _note_memory(row, dx_memory)
    row.met = dx_tp.median >= 0.8 * pl_tp.median
    return [row, _z_order_row(spark, workdir, sizes, template, run_dir)]


_Z_COLUMNS = ("id", "v")
_Z_BITS = 8


def plain_z_order(spark: SparkSession, sources: list[str], out: str, out_files: int) -> None:
    """Case 9's baseline: each column into 2**8 quantile buckets (approxQuantile + Bucketizer,
    on the JVM), the buckets' bits interleaved, then range-partitioned and sorted on that key."""
    from pyspark.ml.feature import QuantileDiscretizer

    df = spark.read.parquet(*sources)
    buckets = [f"{c}_bucket" for c in _Z_COLUMNS]
    df = (
        QuantileDiscretizer(
            numBuckets=2**_Z_BITS,
            inputCols=list(_Z_COLUMNS),
            outputCols=buckets,
            relativeError=0.001,
        )
        .fit(df)
        .transform(df)
    )
    z = F.lit(0).cast("long")
    for bit in range(_Z_BITS):
        for position, b in enumerate(buckets):
            shifted = F.shiftright(F.col(b).cast("long"), bit).bitwiseAND(F.lit(1))
            z = z.bitwiseOR(F.shiftleft(shifted, bit * len(buckets) + position))
    (
        df.withColumn("z", z)
        .repartitionByRange(out_files, "z")
        .sortWithinPartitions("z")
        .drop("z", *buckets)
        .write.parquet(out)
    )


def _z_order_row(
    spark: SparkSession, workdir: str, sizes: SparkSizes, template: str, run_dir: str
) -> Row:
    """Case 9, ZORDER BY: deltatx vs the same Z-order sort done with plain Spark."""
    from deltatx import DeltaTable

    timer = Timer(spark)
    spark_version, _ = _versions()
    n = sizes.optimize_rows
    handle: dict[str, Any] = {}

    def setup() -> None:
        _copy(template, run_dir)
        handle["dt"] = DeltaTable.for_path(spark, run_dir)

    def dx_op() -> None:
        handle["metrics"] = handle["dt"].optimize().execute_z_order_by(*_Z_COLUMNS)

    dx, dx_jobs = timer.measure(dx_op, runs=sizes.runs, warmup=sizes.warmup, setup=setup)
    dx_memory = timer.memory
    out_files = max(int(handle["metrics"].num_added_files), 1)
    sources = sorted(
        os.path.join(template, f) for f in os.listdir(template) if f.endswith(".parquet")
    )
    counter = iter(range(10**6))

    def plain_op() -> None:
        # Each column into 2**8 quantile buckets (approxQuantile + Bucketizer, on the JVM),
        # the buckets' bits interleaved, then range-partitioned and sorted on that key.
        out = _fresh(os.path.join(workdir, f"zorder-plain-{next(counter)}"))
        plain_z_order(spark, sources, out, out_files)

    pl, pl_jobs = timer.measure(plain_op, runs=sizes.runs, warmup=sizes.warmup)
    ratio = dx.median / pl.median
    row = Row(
        case="9 OPTIMIZE",
        name=f"ZORDER BY {', '.join(_Z_COLUMNS)}: {sizes.optimize_files} files into {out_files}",
        size=f"{n:,} rows",
        unit="s",
        higher_is_better=False,
        deltatx=_dx(dx, dx_jobs, seconds_median=dx.median),
        peer=Figure(
            "plain Spark",
            spark_version,
            pl,
            {
                "spark_jobs_per_op": pl_jobs,
                "seconds_median": pl.median,
                "what": (
                    "the same Z-order sort of the same files: QuantileDiscretizer(2**8 "
                    "buckets per column), bits interleaved with shiftleft/bitwiseOR, "
                    f"repartitionByRange({out_files}, z).sortWithinPartitions(z).write.parquet"
                ),
            },
        ),
        target="<= 1.5x plain Spark time",
        notes=(
            f"{dx.median:.2f} s vs {pl.median:.2f} s ({ratio:.2f}x); Spark jobs per operation: "
            f"deltatx {dx_jobs:g}, plain Spark {pl_jobs:g}"
        ),
    )
    _note_memory(row, dx_memory)
    row.met = ratio <= 1.5
    return row


def _throughput(stats: Stats, rows: int) -> Stats:
    # Rows per second; the slowest run gives the p99 throughput.
    return Stats(
        median=rows / stats.median,
        p99=rows / stats.p99,
        min=rows / stats.max,
        max=rows / stats.min,
        n=stats.n,
    )
