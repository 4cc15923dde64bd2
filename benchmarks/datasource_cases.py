"""Case 10: deltatx inside Spark (``format("delta")`` and ``dt.to_df()``) vs plain Parquet.

Every comparison reads the same files: the plain-Parquet peer is ``spark.read.parquet`` of the
table directory (Spark's own partition discovery and pruning; ``_delta_log`` is ignored as a
hidden directory), or, for the deletion-vector case, the same table purged. Run on its own
with ``python -m benchmarks.datasource_cases [rows]``.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from benchmarks.harness import Figure, Row
from benchmarks.spark_cases import Timer, _copy, _dx, _fresh, start_session

CASE = "10 deltatx inside Spark"


@dataclass(frozen=True, slots=True)
class DatasourceSizes:
    """Sizes of case 10."""

    scan_rows: int = 4_000_000
    scan_files: int = 16
    skip_files: int = 100
    day_rows_per_partition: int = 4_000
    dv_rows: int = 4_000_000
    dv_files: int = 16
    # Reads of a third of a second: at 3 runs, one slow run moved a median by 10%, and at 5 a
    # ratio near 1.0 still came out between 0.93 and 1.34 from run to run.
    runs: int = 9
    warmup: int = 1
    # The deletion-vector read against the purged table: its medians moved by 0.1-0.3 from
    # run to run at 5 reads.
    dv_runs: int = 9
    dv_warmup: int = 2


FULL = DatasourceSizes()
QUICK = DatasourceSizes(
    scan_rows=400_000,
    scan_files=8,
    skip_files=100,
    day_rows_per_partition=300,
    dv_rows=400_000,
    dv_files=8,
    runs=3,
    dv_runs=3,
    dv_warmup=1,
)


def _frame(spark: SparkSession, rows: int, files: int) -> DataFrame:
    """id (sorted within files, so min/max statistics separate the files), and three values."""
    ident = F.col("id")
    return spark.range(0, rows, numPartitions=files).select(
        ident,
        (ident % 365).cast("int").alias("k"),
        ((ident * 7919) % 1_000_003 / F.lit(1_000_003.0)).alias("v"),
        F.concat(F.lit("s"), (ident % 1000).cast("string")).alias("s"),
    )


def dv_and_purged(
    spark: SparkSession, workdir: str, rows: int, files: int, *, name: str
) -> tuple[str, str]:
    """``(table, purged copy)``: :func:`_frame` in ``files`` files, deletion vectors over 10%.

    Both under ``workdir``, as ``name`` and ``name-purged``: the deletion-vector read cases
    compare the two.
    """
    import deltatx
    from deltatx import DeltaTable

    dv = _fresh(os.path.join(workdir, name))
    deltatx.write(_frame(spark, rows, files), dv)
    DeltaTable.for_path(spark, dv).delete("id % 10 = 0")
    purged = os.path.join(workdir, f"{name}-purged")
    _copy(dv, purged)
    DeltaTable.for_path(spark, purged).reorg_purge()
    return dv, purged


def _agg(df: DataFrame) -> None:
    df.agg(F.sum("v"), F.count("*")).collect()


def _row(
    name: str,
    size: str,
    ours: tuple[object, float],
    peer_name: str,
    peer: tuple[object, float],
    target: float,
) -> Row:
    row = Row(
        case=CASE,
        name=name,
        size=size,
        unit="s",
        deltatx=_dx(ours[0], ours[1]),  # type: ignore[arg-type]
        peer=Figure(peer_name, "", peer[0], {"spark_jobs_per_op": peer[1]}),  # type: ignore[arg-type]
        target=f"<= {target:g}x {peer_name}",
    )
    row.met = row.ratio is not None and row.ratio <= target
    return row


def _python_source_read(spark: SparkSession, path: str) -> DataFrame:
    """The table read by deltatx's Python data source rather than the native scan."""
    from pyspark.sql.readwriter import DataFrameReader

    load = getattr(DataFrameReader.load, "__wrapped__", DataFrameReader.load)
    frame: DataFrame = load(spark.read.format("deltatx"), path)
    return frame


def run_all(
    spark: SparkSession, workdir: str, sizes: DatasourceSizes, log: Callable[[str], None]
) -> list[Row]:
    """The four comparisons of case 10, each through both doors, and the choice for DVs."""
    import deltatx
    from deltatx import DeltaTable

    timer = Timer(spark)

    def measure(op: Callable[[], object]) -> tuple[object, float]:
        return timer.measure(op, runs=sizes.runs, warmup=sizes.warmup)

    def side_by_side(*ops: Callable[[], object], dv: bool = False) -> list[tuple[object, float]]:
        runs, warmup = (sizes.dv_runs, sizes.dv_warmup) if dv else (sizes.runs, sizes.warmup)
        return list(timer.measure_side_by_side(list(ops), runs=runs, warmup=warmup))

    rows: list[Row] = []

    # Full scan.
    scan = _fresh(os.path.join(workdir, "ds-scan"))
    deltatx.write(_frame(spark, sizes.scan_rows, sizes.scan_files), scan)
    size = f"{sizes.scan_rows:,} rows x 4 columns in {sizes.scan_files} files"
    log("case 10: full scan")
    parquet, via_format, via_to_df = side_by_side(
        lambda: _agg(spark.read.parquet(scan)),
        lambda: _agg(spark.read.format("delta").load(scan)),
        lambda: _agg(DeltaTable.for_path(spark, scan).to_df()),
    )
    rows.append(
        _row("full scan via format('delta')", size, via_format, "read.parquet", parquet, 1.2)
    )
    rows.append(_row("full scan via dt.to_df()", size, via_to_df, "read.parquet", parquet, 1.2))

    # A filter whose rows lie in 1% of the files (statistics on id).
    skip = _fresh(os.path.join(workdir, "ds-skip"))
    skip_rows = sizes.skip_files * 10_000
    deltatx.write(_frame(spark, skip_rows, sizes.skip_files), skip)
    lo = skip_rows // 2
    cond = f"id >= {lo} AND id < {lo + 10_000 // 2}"
    size = f"{skip_rows:,} rows in {sizes.skip_files} files, filter on 1 file's id range"
    log("case 10: selective filter")
    parquet, via_format, via_to_df = side_by_side(
        lambda: _agg(spark.read.parquet(skip).filter(cond)),
        lambda: _agg(spark.read.format("delta").load(skip).filter(cond)),
        lambda: _agg(DeltaTable.for_path(spark, skip).to_df().filter(cond)),
    )
    rows.append(
        _row("1% of files via format('delta')", size, via_format, "read.parquet", parquet, 1.0)
    )
    rows.append(_row("1% of files via dt.to_df()", size, via_to_df, "read.parquet", parquet, 1.0))

    # One day of a 365-partition table.
    days = _fresh(os.path.join(workdir, "ds-days"))
    day_rows = 365 * sizes.day_rows_per_partition
    deltatx.write(_frame(spark, day_rows, 4), days, partition_by=["k"])
    size = f"{day_rows:,} rows in 365 partitions, one partition read"
    log("case 10: one day of 365 partitions")
    parquet, via_format, via_to_df = side_by_side(
        lambda: _agg(spark.read.parquet(days).filter("k = 100")),
        lambda: _agg(spark.read.format("delta").load(days).filter("k = 100")),
        lambda: _agg(DeltaTable.for_path(spark, days).to_df().filter("k = 100")),
    )
    rows.append(
        _row("one day via format('delta')", size, via_format, "read.parquet pruned", parquet, 1.2)
    )
    rows.append(
        _row("one day via dt.to_df()", size, via_to_df, "read.parquet pruned", parquet, 1.2)
    )

    # Deletion vectors over 10% of the rows vs the same table purged.
    dv, purged = dv_and_purged(spark, workdir, sizes.dv_rows, sizes.dv_files, name="ds-dv")
    size = f"{sizes.dv_rows:,} rows in {sizes.dv_files} files, DVs delete 10%"
    log("case 10: deletion vectors")
    doors = (
        ("format('delta')", lambda p: spark.read.format("delta").load(p)),
        ("dt.to_df()", lambda p: DeltaTable.for_path(spark, p).to_df()),
    )
    # Both doors and both tables in one rotation: each read shares the machine's moments and
    # the JIT's progress with the reads it is compared with.
    measured = side_by_side(
        *(lambda r=read, t=table: _agg(r(t)) for _, read in doors for table in (dv, purged)),
        dv=True,
    )
    with_dvs_by_door: dict[str, tuple[object, float]] = {}
    for k, (label, _) in enumerate(doors):
        with_dvs, clean = measured[2 * k], measured[2 * k + 1]
        with_dvs_by_door[label] = with_dvs
        rows.append(_row(f"DVs 10% via {label}", size, with_dvs, "purged", clean, 1.3))
    # Not a target of issue 13 but the choice it asks for: batch reads take Spark's native
    # scan with the broadcast word join while that is no slower than the Python data source's
    # reader (still what streaming reads use; reached here past the load() wrapper).
    python_reader = measure(lambda: _agg(_python_source_read(spark, dv)))
    rows.append(
        _row(
            "DVs 10%: native scan vs Python reader",
            size,
            with_dvs_by_door["format('delta')"],
            "Python data source",
            python_reader,
            1.0,
        )
    )
    return rows


def main(argv: list[str]) -> int:
    """Runs case 10 alone and prints one line per comparison."""
    quick = "--quick" in argv
    sizes = QUICK if quick else FULL
    spark, startup = start_session()
    print(f"Spark ready in {startup:.1f} s", file=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="deltatx-bench-ds-") as workdir:
        rows = run_all(spark, workdir, sizes, lambda m: print(m, file=sys.stderr))
    for row in rows:
        ours = row.deltatx.stats.median if row.deltatx.stats else float("nan")
        peer = row.peer.stats.median if row.peer and row.peer.stats else float("nan")
        print(
            f"{row.name:<36} {row.size:<58} deltatx {ours:7.2f} s  "
            f"{row.peer.engine if row.peer else '-':<20} {peer:7.2f} s  "
            f"ratio {row.ratio or float('nan'):5.2f}  target {row.target}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
