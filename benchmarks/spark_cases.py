"""Cases 6-9: the data path on Spark, against plain Spark (and delta-rs for DML).

The session is started once (its start-up is reported on its own). Each Spark figure comes
with the number of Spark jobs one operation ran, counted through a job group and the status
tracker (no listener). Tables that an operation changes are copied fresh, untimed, before
every run so that each run does the same work.
"""

from __future__ import annotations

import os
import resource
import shutil
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from benchmarks import reexecution_case, rs_workers
from benchmarks.harness import MIN_RUNS, Figure, Row, Stats, spawn_context
from deltatx.version import __version__ as DELTATX_VERSION

if TYPE_CHECKING:
    from deltatx import DeltaTable


@dataclass(frozen=True, slots=True)
class SparkSizes:
    """Sizes of the Spark cases."""

    write_rows: int = 2_000_000
    dml_rows: int = 2_000_000
    dml_files: int = 20
    optimize_rows: int = 2_000_000
    optimize_files: int = 200
    # The compaction row is judged at 0.8x with a few tenths of a second to spare, on a host
    # whose speed moves by as much between rounds: its median takes more rounds.
    optimize_runs: int = 5
    # The deletion-vector issue asks for a 10-million-row table.
    dv_rows: int = 10_000_000
    dv_files: int = 100
    runs: int = 3
    warmup: int = 1
    # Case 10: each window (without, then with re-execution) runs this long.
    contention_s: float = 45.0


FULL = SparkSizes()
QUICK = SparkSizes(
    write_rows=200_000,
    dml_rows=100_000,
    optimize_rows=200_000,
    optimize_files=50,
    optimize_runs=3,
    dv_rows=100_000,
    dv_files=20,
    contention_s=15.0,
)


def start_session() -> tuple[SparkSession, float]:
    """deltatx's local session and how long it took to be ready for a first job."""
    import deltatx

    t0 = time.perf_counter()
    spark = deltatx.spark_session()
    spark.range(1).count()
    return spark, time.perf_counter() - t0


def _versions() -> tuple[str, str]:
    import deltalake
    import pyspark

    return str(pyspark.__version__), str(deltalake.__version__)


class Timer:
    """Times Spark operations, counts the Spark jobs each one ran and notes peak memory.

    After :meth:`measure`, ``memory`` holds the driver's peak resident set (the Python
    process, over its life so far) and the JVM's peak heap during the measured runs, in MB;
    after :meth:`measure_side_by_side`, ``memories`` holds the same for each operation.
    """

    def __init__(self, spark: SparkSession) -> None:
        self.spark = spark
        self.memory: dict[str, float] = {}
        self.memories: list[dict[str, float]] = []

    def _jvm_heap_peak_mb(self, *, reset: bool) -> float:
        jvm = self.spark.sparkContext._jvm
        assert jvm is not None
        total = 0
        for pool in jvm.java.lang.management.ManagementFactory.getMemoryPoolMXBeans():
            if str(pool.getType().toString()) != "Heap memory":
                continue
            if reset:
                pool.resetPeakUsage()
            else:
                total += int(pool.getPeakUsage().getUsed())
        return total / 2**20

    def once(self, op: Callable[[], object]) -> tuple[float, int]:
        """Runs ``op`` in its own job group: (seconds, Spark jobs)."""
        sc = self.spark.sparkContext
        group = f"bench-{uuid.uuid4().hex}"
        sc.setJobGroup(group, group)
        t0 = time.perf_counter()
        op()
        elapsed = time.perf_counter() - t0
        return elapsed, len(sc.statusTracker().getJobIdsForGroup(group))

    def measure(
        self,
        op: Callable[[], object],
        *,
        runs: int,
        warmup: int,
        setup: Callable[[], object] | None = None,
    ) -> tuple[Stats, float]:
        """(time stats, median Spark jobs per operation) over ``runs`` runs after warm-up."""
        (measured,) = self.measure_side_by_side([op], runs=runs, warmup=warmup, setup=setup)
        return measured

    def measure_side_by_side(
        self,
        ops: list[Callable[[], object]],
        *,
        runs: int,
        warmup: int,
        setup: Callable[[], object] | None = None,
    ) -> list[tuple[Stats, float]]:
        """:meth:`measure` of operations whose ratios are the figures, run in turn.

        Each round runs every operation once, in order, so all share the same moments of a
        machine whose speed drifts and the same progress of the JVM's compiler; timed one
        after the other, the first pays for warming up code they all use.
        """
        samples: list[list[float]] = [[] for _ in ops]
        jobs: list[list[int]] = [[] for _ in ops]
        jvm_peaks = [0.0 for _ in ops]
        for i in range(warmup + max(runs, MIN_RUNS)):
            for k, op in enumerate(ops):
                if setup is not None:
                    setup()
                self._jvm_heap_peak_mb(reset=True)
                elapsed, n = self.once(op)
                if i >= warmup:
                    samples[k].append(elapsed)
                    jobs[k].append(n)
                    jvm_peaks[k] = max(jvm_peaks[k], self._jvm_heap_peak_mb(reset=False))
        driver = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        self.memories = [
            {"driver_peak_rss_mb": driver, "jvm_peak_heap_mb": peak} for peak in jvm_peaks
        ]
        self.memory = {"driver_peak_rss_mb": driver, "jvm_peak_heap_mb": max(jvm_peaks)}
        return [
            (Stats.of(times), float(sorted(counts)[len(counts) // 2]))
            for times, counts in zip(samples, jobs, strict=True)
        ]


def _dx(stats: Stats | None, jobs: float | None = None, **extra: Any) -> Figure:
    if jobs is not None:
        extra["spark_jobs_per_op"] = jobs
    return Figure("deltatx", DELTATX_VERSION, stats, extra)


def _fresh(path: str) -> str:
    if os.path.exists(path):
        shutil.rmtree(path)
    return path


def _copy(src: str, dst: str) -> None:
    shutil.copytree(src, _fresh(dst))
    # The copy's dirty pages would otherwise be written back during the timed statement,
    # whose fsynced commit then waits behind them (delta-rs's copies are synced alike).
    os.sync()


# -- case 6: write and read ------------------------------------------------------------------


def events(spark: SparkSession, rows: int) -> DataFrame:
    """A deterministic frame: id, day (8 values), v in [0, 1), s (1,000 values)."""
    ident = F.col("id")
    return spark.range(rows).select(
        ident,
        F.concat(F.lit("d"), (ident % 8).cast("string")).alias("day"),
        ((ident * 7919) % 1_000_003 / F.lit(1_000_003.0)).alias("v"),
        F.concat(F.lit("s"), (ident % 1000).cast("string")).alias("s"),
    )


def case_write_read(spark: SparkSession, workdir: str, sizes: SparkSizes) -> list[Row]:
    """Case 6: append via deltatx.write vs df.write.parquet; filtered read vs read.parquet."""
    import deltatx
    from deltatx import DeltaTable

    timer = Timer(spark)
    spark_version, _ = _versions()
    rows: list[Row] = []
    n = sizes.write_rows
    df = events(spark, n)
    for partitioned in (False, True):
        label = "partitioned by day" if partitioned else "not partitioned"
        delta_path = _fresh(os.path.join(workdir, f"write-delta-{int(partitioned)}"))
        plain_path = _fresh(os.path.join(workdir, f"write-plain-{int(partitioned)}"))
        parts = ["day"] if partitioned else None

        def dx_write(p: str = delta_path, by: list[str] | None = parts) -> None:
            deltatx.write(df, p, mode="append", partition_by=by)

        def plain_write(p: str = plain_path, by: list[str] | None = parts) -> None:
            writer = df.write.mode("append")
            if by:
                writer = writer.partitionBy(*by)
            writer.parquet(p)

        (dx, dx_jobs), (pl, pl_jobs) = timer.measure_side_by_side(
            [dx_write, plain_write], runs=sizes.runs, warmup=sizes.warmup
        )
        rows.append(
            _spark_row(
                "6 write",
                f"append {n:,} rows, {label}",
                f"{n:,} rows",
                dx,
                dx_jobs,
                pl,
                pl_jobs,
                spark_version,
                peer_what="df.write.mode('append').parquet",
                target_ratio=1.15,
            )
        )

        cond = "day = 'd3' AND v < 0.5" if partitioned else "v < 0.1"
        total = (sizes.warmup + max(sizes.runs, MIN_RUNS)) * n

        def dx_read(p: str = delta_path, c: str = cond) -> None:
            DeltaTable.for_path(spark, p).to_df().filter(c).agg(F.sum("v"), F.count("*")).collect()

        def plain_read(p: str = delta_path, c: str = cond) -> None:
            spark.read.parquet(p).filter(c).agg(F.sum("v"), F.count("*")).collect()

        (dx, dx_jobs), (pl, pl_jobs) = timer.measure_side_by_side(
            [dx_read, plain_read], runs=sizes.runs, warmup=sizes.warmup
        )
        rows.append(
            _spark_row(
                "6 read",
                f"filtered read ({cond}), {label}",
                f"{total:,} rows in the table",
                dx,
                dx_jobs,
                pl,
                pl_jobs,
                spark_version,
                peer_what="spark.read.parquet of the same files",
                target_ratio=1.15,
            )
        )
        shutil.rmtree(plain_path, ignore_errors=True)
    return rows


def _spark_row(
    case: str,
    name: str,
    size: str,
    dx: Stats,
    dx_jobs: float,
    peer: Stats,
    peer_jobs: float,
    spark_version: str,
    *,
    peer_what: str,
    target_ratio: float | None,
    engine: str = "plain Spark",
    memory: dict[str, float] | None = None,
) -> Row:
    row = Row(
        case=case,
        name=name,
        size=size,
        unit="s",
        deltatx=_dx(dx, dx_jobs),
        peer=Figure(
            engine, spark_version, peer, {"spark_jobs_per_op": peer_jobs, "what": peer_what}
        ),
        notes=f"Spark jobs per operation: deltatx {dx_jobs:g}, {engine} {peer_jobs:g}",
    )
    if memory:
        _note_memory(row, memory)
    if target_ratio is not None:
        row.target = f"<= {target_ratio:g}x {engine}"
        row.met = row.ratio is not None and row.ratio <= target_ratio
    return row


def _note_memory(row: Row, memory: dict[str, float]) -> None:
    """Records deltatx's peak driver and JVM memory on the row."""
    row.deltatx.extra.update(memory)
    row.notes += (
        f"; deltatx peak memory: driver RSS {memory['driver_peak_rss_mb']:.0f} MB, "
        f"JVM heap {memory['jvm_peak_heap_mb']:.0f} MB"
    )


# -- case 7: MERGE, UPDATE, DELETE ------------------------------------------------------------

_COW = {"delta.enableDeletionVectors": "false"}
_DV = {"delta.enableDeletionVectors": "true"}


def dml_target(spark: SparkSession, rows: int, files: int) -> DataFrame:
    """The DML target: id, k (10 values), v; range-partitioned by id into ``files`` files."""
    ident = F.col("id")
    return (
        spark.range(rows)
        .select(
            ident,
            F.concat(F.lit("k"), (ident % 10).cast("string")).alias("k"),
            ident.cast("double").alias("v"),
        )
        .repartitionByRange(files, "id")
    )


def dml_source(spark: SparkSession, lo: int, hi: int, *, step: int = 1) -> DataFrame:
    """The MERGE source: ids ``range(lo, hi, step)`` with new values (as the delta-rs worker's)."""
    ident = F.col("id")
    return spark.range(lo, hi, step).select(
        ident,
        F.concat(F.lit("k"), (ident % 10).cast("string")).alias("k"),
        (ident.cast("double") * 2.0).alias("v"),
    )


class ChangeShape(StrEnum):
    """Where the 1% of rows a DML case changes lie in a table written sorted by id."""

    #: one id range: the rows lie in one or two files, the case copy-on-write rewrites cheaply.
    RANGE = "range"
    #: every hundredth id: the rows lie in every file, the case deletion vectors exist for.
    SPREAD = "spread"


def dml_ops(
    spark: SparkSession, rows: int, *, shape: ChangeShape = ChangeShape.RANGE
) -> dict[str, Callable[[DeltaTable], Any]]:
    """The 1% DELETE, UPDATE and MERGE of a ``rows``-row DML target, each applied to a table."""
    lo, hi, src_lo, src_hi = rs_workers.dml_bounds(rows)
    if shape is ChangeShape.RANGE:
        cond, source = f"id >= {lo} AND id < {hi}", (src_lo, src_hi, 1)
    else:
        # The source's ids below ``rows`` (every 200th) update 0.5% of the rows, in every file;
        # the rest are new: 1% of the table in all, as in the range shape.
        cond, source = "id % 100 = 0", (0, 2 * rows, 200)
    s_lo, s_hi, s_step = source
    return {
        "delete": lambda dt: dt.delete(cond),
        "update": lambda dt: dt.update(condition=cond, set={"v": "v + 1.0"}),
        "merge": lambda dt: (
            dt.alias("t")
            .merge(dml_source(spark, s_lo, s_hi, step=s_step).alias("s"), "t.id = s.id")
            .when_matched_update_all()
            .when_not_matched_insert_all()
            .execute()
        ),
    }


def _plain_dml(spark: SparkSession, template: str, out: str, op: str, rows: int) -> None:
    """The same change by hand: find the touched files, rewrite them as new Parquet files."""
    lo, hi, src_lo, src_hi = rs_workers.dml_bounds(rows)
    target = spark.read.parquet(template)
    cond = (F.col("id") >= lo) & (F.col("id") < hi)
    if op == "merge":
        source = dml_source(spark, src_lo, src_hi)
        hits = target.select("id", F.input_file_name().alias("_f")).join(source.select("id"), "id")
    else:
        hits = target.filter(cond).select(F.input_file_name().alias("_f"))
    touched = [r[0] for r in hits.select("_f").distinct().collect()]
    if op == "merge" and not touched:
        dml_source(spark, src_lo, src_hi).write.parquet(out)
        return
    old = spark.read.parquet(*touched)
    if op == "delete":
        new = old.filter(~cond)
    elif op == "update":
        new = old.withColumn("v", F.when(cond, F.col("v") + 1.0).otherwise(F.col("v")))
    else:
        t, s = old.alias("t"), dml_source(spark, src_lo, src_hi).alias("s")
        new = t.join(s, F.col("t.id") == F.col("s.id"), "full_outer").select(
            F.coalesce(F.col("s.id"), F.col("t.id")).alias("id"),
            F.coalesce(F.col("s.k"), F.col("t.k")).alias("k"),
            F.coalesce(F.col("s.v"), F.col("t.v")).alias("v"),
        )
    new.write.parquet(out)


def case_dml(spark: SparkSession, workdir: str, sizes: SparkSizes) -> list[Row]:
    """Case 7: 1% MERGE/UPDATE/DELETE vs plain-Spark copy-on-write and vs delta-rs."""
    import deltatx
    from deltatx import DeltaTable

    timer = Timer(spark)
    spark_version, rs_version = _versions()
    n = sizes.dml_rows
    template = _fresh(os.path.join(workdir, "dml-template"))
    # Case 7 is the copy-on-write path; deletion vectors are case 8.
    deltatx.write(dml_target(spark, n, sizes.dml_files), template, mode="append", properties=_COW)
    run_dir = os.path.join(workdir, "dml-run")
    rows: list[Row] = []
    ops = dml_ops(spark, n)
    with spawn_context().Pool(1) as pool:
        for op, fn in ops.items():
            handle: dict[str, DeltaTable] = {}
            counter = iter(range(10**6))

            def setup(h: dict[str, DeltaTable] = handle) -> None:
                _copy(template, run_dir)
                h["dt"] = DeltaTable.for_path(spark, run_dir)

            def dx_op(h: dict[str, DeltaTable] = handle, f: Any = fn) -> None:
                f(h["dt"])

            def plain_op(o: str = op, c: Any = counter) -> None:
                out = _fresh(os.path.join(workdir, f"dml-plain-{next(c)}"))
                _plain_dml(spark, template, out, o, n)

            dx, dx_jobs = timer.measure(dx_op, runs=sizes.runs, warmup=sizes.warmup, setup=setup)
            dx_memory = timer.memory
            files_touched = _files_rewritten(run_dir)
            pl, pl_jobs = timer.measure(plain_op, runs=sizes.runs, warmup=sizes.warmup)
            rs_samples: list[float] | None
            rs_error = ""
            try:
                rs_samples = pool.apply(
                    rs_workers.rs_dml, (template, workdir, op, n, sizes.runs, sizes.warmup)
                )
            except Exception as exc:
                rs_samples, rs_error = None, f"{type(exc).__name__}: {exc}"[:200]
            size = f"{n:,}-row target in {sizes.dml_files} files, 1% changed"
            row = _spark_row(
                "7 DML",
                f"{op.upper()} 1% vs plain-Spark copy-on-write",
                size,
                dx,
                dx_jobs,
                pl,
                pl_jobs,
                spark_version,
                peer_what="find touched files with input_file_name(), rewrite them as Parquet",
                target_ratio=1.3,
                memory=dx_memory,
            )
            row.notes += f"; deltatx rewrote {files_touched}"
            rows.append(row)
            rs_row = Row(
                case="7 DML",
                name=f"{op.upper()} 1% vs delta-rs",
                size=size,
                unit="s",
                deltatx=_dx(dx, dx_jobs),
                peer=Figure(
                    "delta-rs",
                    rs_version,
                    Stats.of(rs_samples) if rs_samples else None,
                    {"error": rs_error} if rs_error else {},
                ),
                target="report the ratio (goal: beat delta-rs once deletion vectors land)",
                notes=rs_error or "delta-rs runs on a copy of the same deltatx-written table",
            )
            rows.append(rs_row)
    return rows


def _files_rewritten(table: str) -> str:
    """'R of N files' for the last commit of ``table`` (only touched files are rewritten)."""
    from deltatx.log.delta_log import DeltaLog

    log = DeltaLog.for_table(table)
    snap = log.snapshot()
    info = log.history(1)[0].commit_info
    metrics = (info.operation_metrics or {}) if info is not None else {}
    removed = metrics.get("numRemovedFiles", "?")
    dvs = metrics.get("numDeletionVectorsAdded", "0")
    return (
        f"{removed} file(s), added {dvs} deletion vector(s) (table now has {snap.num_files} files)"
    )


# -- case 8: deletion vectors -----------------------------------------------------------------


def dml_templates(
    spark: SparkSession, workdir: str, rows: int, files: int, *, name: str
) -> dict[bool, str]:
    """The DML target copy-on-write (``False``) and with deletion vectors (``True``).

    One write, then a copy whose table property turns deletion vectors on: both hold the same
    data files, so the rows a statement touches lie in the same files on either side (two
    writes range-partition by a sample each, and a 1% range could span one file in one and
    two in the other).
    """
    import deltatx
    from deltatx import DeltaTable

    cow = _fresh(os.path.join(workdir, f"{name}-0"))
    deltatx.write(dml_target(spark, rows, files), cow, mode="append", properties=_COW)
    dv = os.path.join(workdir, f"{name}-1")
    _copy(cow, dv)
    DeltaTable.for_path(spark, dv).set_properties(_DV)
    return {False: cow, True: dv}


def case_deletion_vectors(spark: SparkSession, workdir: str, sizes: SparkSizes) -> list[Row]:
    """Case 8: DML with deletion vectors vs deltatx's own copy-on-write; reading with DVs."""
    from deltatx import DeltaTable

    timer = Timer(spark)
    n = sizes.dv_rows
    templates = dml_templates(spark, workdir, n, sizes.dv_files, name="dv-template")
    run_dir = os.path.join(workdir, "dv-run")
    rows: list[Row] = []
    for shape in ChangeShape:
        size = f"{n:,}-row target in {sizes.dv_files} files, {_SHAPE_SIZES[shape]}"
        goal, target = _SHAPE_GOALS[shape]
        for op, fn in dml_ops(spark, n, shape=shape).items():
            name = f"{op.upper()} 1% with deletion vectors"
            measured = _dv_and_cow(spark, timer, templates, run_dir, sizes, fn)
            if measured is None:
                rows.append(_not_available(name))
                continue
            ours, theirs, memory = measured
            row = _against_deltatx(
                f"{name} vs deltatx copy-on-write",
                size,
                ours,
                "copy-on-write",
                theirs,
                goal=goal,
                target=target,
            )
            _note_memory(row, memory)
            rows.append(row)

    # Reading: DVs over 10% of the rows (every file) vs the same table purged.
    with_dvs = _fresh(os.path.join(workdir, "dv-read"))
    _copy(templates[True], with_dvs)
    metrics = DeltaTable.for_path(spark, with_dvs).delete("id % 10 = 0")
    if not metrics.num_deletion_vectors_added:
        rows.append(_not_available("read a table whose DVs cover 10% of rows"))
        return rows
    purged = os.path.join(workdir, "dv-purged")
    _copy(with_dvs, purged)
    DeltaTable.for_path(spark, purged).reorg_purge()

    def read(p: str) -> None:
        DeltaTable.for_path(spark, p).to_df().agg(F.sum("v"), F.count("*")).collect()

    # In turn, as case 11's reads: timed one after the other, the first pays for the JIT.
    with_dvs_read, purged_read = timer.measure_side_by_side(
        [lambda: read(with_dvs), lambda: read(purged)],
        runs=max(sizes.runs, _READ_RUNS),
        warmup=sizes.warmup + 1,
    )
    rows.append(
        _against_deltatx(
            "full read, DVs cover 10% of rows vs the same table purged",
            f"{n:,} rows, {metrics.num_deletion_vectors_added} files with DVs",
            with_dvs_read,
            "purged",
            purged_read,
            goal=1.3,
            target="<= 1.3x the purged table",
        )
    )
    return rows


# The read comparison's figures are a few hundred milliseconds that move by a tenth between
# runs: more runs than the DML rows take.
_READ_RUNS = 7

_SHAPE_SIZES = {
    ChangeShape.RANGE: "1% changed, one id range",
    ChangeShape.SPREAD: "1% changed, every 100th id (all files)",
}
# Copy-on-write rewrites one id range's file on the driver when it is small: both paths then
# cost mostly what every statement costs, and only the spread shape carries the 5x goal.
_SHAPE_GOALS: dict[ChangeShape, tuple[float | None, str]] = {
    ChangeShape.RANGE: (None, "report the ratio (the 5x goal is on the spread rows)"),
    ChangeShape.SPREAD: (0.2, "DV path >= 5x faster than copy-on-write (ratio <= 0.2)"),
}


def _dv_and_cow(
    spark: SparkSession,
    timer: Timer,
    templates: dict[bool, str],
    run_dir: str,
    sizes: SparkSizes,
    fn: Callable[[DeltaTable], Any],
) -> tuple[tuple[Stats, float], tuple[Stats, float], dict[str, float]] | None:
    """A statement timed with deletion vectors, then copy-on-write; the first's memory.

    None when the statement added no deletion vector.
    """
    from deltatx import DeltaTable

    figures: list[tuple[Stats, float]] = []
    memory: dict[str, float] = {}
    for dv in (True, False):
        state: dict[str, Any] = {}

        def setup(src: str = templates[dv], st: dict[str, Any] = state) -> None:
            _copy(src, run_dir)
            st["dt"] = DeltaTable.for_path(spark, run_dir)

        def run(st: dict[str, Any] = state) -> None:
            fn(st["dt"])

        figures.append(timer.measure(run, runs=sizes.runs, warmup=sizes.warmup, setup=setup))
        if dv:
            if not _has_dvs(run_dir):
                return None
            memory = timer.memory
    return figures[0], figures[1], memory


def _against_deltatx(
    name: str,
    size: str,
    ours: tuple[Stats, float],
    other: str,
    theirs: tuple[Stats, float],
    *,
    goal: float | None,
    target: str,
) -> Row:
    """A case-8 row: deltatx with deletion vectors against deltatx ``other`` (a ratio goal)."""
    (mine, my_jobs), (peer, peer_jobs) = ours, theirs
    row = Row(
        case="8 deletion vectors",
        name=name,
        size=size,
        unit="s",
        deltatx=_dx(mine, my_jobs),
        peer=Figure(f"deltatx {other}", DELTATX_VERSION, peer, {"spark_jobs_per_op": peer_jobs}),
        target=target,
        notes=f"Spark jobs per operation: with DVs {my_jobs:g}, {other} {peer_jobs:g}",
    )
    row.met = None if goal is None else row.ratio is not None and row.ratio <= goal
    return row


def _has_dvs(table: str) -> bool:
    """Whether any live file of the table's latest version carries a deletion vector."""
    from deltatx.log.delta_log import DeltaLog

    files = DeltaLog.for_table(table).snapshot().files
    return bool(files.num_rows) and files.column("deletion_vector").null_count < files.num_rows


def _not_available(name: str) -> Row:
    return Row(
        case="8 deletion vectors",
        name=name,
        size="-",
        unit="s",
        deltatx=_dx(None),
        target="-",
        notes="not yet available: the table had no deletion vector after this DML with "
        "delta.enableDeletionVectors=true",
    )


def _optimize_case(spark: SparkSession, workdir: str, sizes: SparkSizes) -> list[Row]:
    from benchmarks import optimize_case

    return optimize_case.case_optimize(spark, workdir, sizes)


def _datasource_cases(
    spark: SparkSession, workdir: str, sizes: SparkSizes, log: Callable[[str], None]
) -> list[Row]:
    from benchmarks import datasource_cases

    chosen = datasource_cases.QUICK if sizes == QUICK else datasource_cases.FULL
    return datasource_cases.run_all(spark, workdir, chosen, log)


def run_all(
    workdir: str,
    sizes: SparkSizes,
    log: Callable[[str], None],
    cases: frozenset[str] | None = None,
) -> tuple[list[Row], float]:
    """Every Spark case (or those whose number is in ``cases``); rows and session start-up."""
    spark, startup = start_session()
    log(f"Spark session ready in {startup:.1f} s")
    rows: list[Row] = []
    for name, fn in (
        ("6 write and read", lambda: case_write_read(spark, workdir, sizes)),
        ("7 DML", lambda: case_dml(spark, workdir, sizes)),
        ("8 deletion vectors", lambda: case_deletion_vectors(spark, workdir, sizes)),
        ("9 OPTIMIZE", lambda: _optimize_case(spark, workdir, sizes)),
        (
            "10 contended DML",
            lambda: reexecution_case.case_contention(spark, workdir, sizes.contention_s, log),
        ),
        ("11 deltatx inside Spark", lambda: _datasource_cases(spark, workdir, sizes, log)),
    ):
        if cases is not None and name.split()[0] not in cases:
            continue
        t0 = time.perf_counter()
        log(f"case {name} ...")
        rows.extend(fn())
        log(f"case {name} done in {time.perf_counter() - t0:.1f} s")
    return rows, startup
