"""Case 15: how the cost of DML grows with the table (issue 16).

At each size, MERGE, UPDATE and DELETE of 1% of the rows (the case-7 operations, through
:func:`spark_cases.dml_ops`) run on a copy-on-write table and on one with deletion vectors,
the latter also without fsync (``spark.deltatx.storage.fsync=false``, as delta-rs, which never
syncs, runs; its own rows and verdict), beside the plain-Spark copy-on-write baseline and
delta-rs measured in the same run. Every
figure carries its peak memory: the driver's resident set and the JVM's heap for deltatx and
plain Spark (one driver, so its RSS is the peak of the process so far), the resident set of
the spawned process for delta-rs (a fresh one per operation and size). Files hold
``rows_per_file`` rows at every size, so a larger table has more files, as in production.

A size this machine cannot hold (free disk in the work directory, available memory) is
reported as skipped with the reason instead of failing half-way.

Also alone: ``python -m benchmarks.run --only scale --sizes 2000000,10000000,50000000``.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from pyspark.sql import SparkSession

from benchmarks import rs_workers, spark_cases
from benchmarks.harness import Figure, Row, Stats, run_in_spawned
from benchmarks.spark_cases import Timer
from deltatx.spark.durability import FSYNC_CONF

CASE = "15 scale"
FULL_SIZES = (2_000_000, 10_000_000, 50_000_000)
QUICK_SIZES = (100_000, 200_000)
# Until a template is written and measured: Parquet bytes per row of (id, k, v), generously.
_BYTES_PER_ROW_GUESS = 24.0
# Copies alive at once: two templates, the run copy, a plain-Spark output and delta-rs's copy,
# with room for Spark's shuffle files.
_DISK_COPIES = 8
# delta-rs rewrites the touched files in Arrow memory and a MERGE may scan the whole target:
# a rough upper bound of the resident bytes per target row, to refuse sizes that cannot fit.
_MEMORY_BYTES_PER_ROW = 64.0


@dataclass(frozen=True, slots=True)
class _Variant:
    """One way deltatx runs the operation: its table kind and whether commits are fsynced."""

    label: str
    dv: bool
    fsync: bool = True


# delta-rs never fsyncs: deltatx is measured synced (its default) and, as delta-rs, without.
_RUNS = (
    _Variant("copy-on-write", dv=False),
    _Variant("deletion vectors", dv=True),
    _Variant("deletion vectors, no fsync", dv=True, fsync=False),
)
# Issue 16: at this many rows and more, DML touching 1% must be ahead of delta-rs.
AHEAD_FROM_ROWS = 10_000_000
AHEAD_TARGET = "ahead of delta-rs at 10M rows and more"
AHEAD_UNSYNCED_TARGET = "ahead of delta-rs at 10M rows and more, both without fsync"
_GROWTH_TARGET = "report how cost grows with size"


@dataclass(frozen=True, slots=True)
class ScaleSizes:
    """The table sizes of case 15 and how each is measured."""

    sizes: tuple[int, ...] = FULL_SIZES
    rows_per_file: int = 100_000
    runs: int = 3
    warmup: int = 1


def parse_sizes(text: str) -> tuple[int, ...]:
    """``"2000000,10000000"`` -> ``(2000000, 10000000)`` (underscores allowed, sorted)."""
    sizes = sorted({int(part.replace("_", "")) for part in text.split(",") if part.strip()})
    if not sizes or sizes[0] < 100:
        raise ValueError(f"sizes must be at least 100 rows: {text!r}")
    return tuple(sizes)


def jvm_max_heap_mb(spark: SparkSession) -> float:
    """The most heap the driver's JVM may grow to, in MB."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    return float(jvm.java.lang.Runtime.getRuntime().maxMemory()) / 2**20


def _available_memory() -> float | None:
    try:
        with open("/proc/meminfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return float(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _tree_bytes(path: str) -> int:
    total = 0
    for root, _dirs, files in os.walk(path):
        total += sum(os.path.getsize(os.path.join(root, f)) for f in files)
    return total


def why_not(rows: int, workdir: str, bytes_per_row: float) -> str | None:
    """Why a ``rows``-row run does not fit this machine (disk, memory), or None when it does."""
    need_disk = rows * bytes_per_row * _DISK_COPIES
    free_disk = shutil.disk_usage(workdir).free
    if need_disk > free_disk:
        return (
            f"needs about {need_disk / 2**30:.1f} GiB of disk in {workdir}, "
            f"{free_disk / 2**30:.1f} GiB free"
        )
    need_memory = rows * _MEMORY_BYTES_PER_ROW
    available = _available_memory()
    if available is not None and need_memory > available:
        return (
            f"needs about {need_memory / 2**30:.1f} GiB of memory, "
            f"{available / 2**30:.1f} GiB available"
        )
    return None


def _skipped(rows: int, reason: str) -> Row:
    return Row(
        case=CASE,
        name="MERGE, UPDATE, DELETE 1%",
        size=f"{rows:,} rows",
        unit="s",
        deltatx=Figure("deltatx", spark_cases.DELTATX_VERSION, None, {"scale_skipped": reason}),
        target="-",
        x=float(rows),
        notes=f"skipped: {reason}",
    )


def _memory_text(memory: dict[str, float]) -> str:
    return (
        f"driver RSS {memory['driver_peak_rss_mb']:.0f} MB, "
        f"JVM heap {memory['jvm_peak_heap_mb']:.0f} MB"
    )


def _measure_size(
    spark: SparkSession,
    workdir: str,
    n: int,
    sizes: ScaleSizes,
    log: Callable[[str], None],
) -> tuple[list[Row], float]:
    """Every row of one size, and the measured on-disk bytes per row of its target."""
    from deltatx import DeltaTable

    timer = Timer(spark)
    spark_version, rs_version = spark_cases._versions()
    files = max(1, n // sizes.rows_per_file)
    size = f"{n:,} rows in {files} files, 1% changed"
    templates = spark_cases.dml_templates(spark, workdir, n, files, name="scale-template")
    bytes_per_row = max(_tree_bytes(t) for t in templates.values()) / n
    run_dir = os.path.join(workdir, "scale-run")
    rows: list[Row] = []
    for op, fn in spark_cases.dml_ops(spark, n).items():
        log(f"  {n:,} rows: {op}")
        ours: dict[_Variant, Figure] = {}
        for variant in _RUNS:
            handle: dict[str, DeltaTable] = {}

            def setup(
                src: str = templates[variant.dv],
                h: dict[str, DeltaTable] = handle,
                fsync: bool = variant.fsync,
            ) -> None:
                spark_cases._copy(src, run_dir)
                # A handle reads the setting when it is made.
                spark.conf.set(FSYNC_CONF, str(fsync).lower())
                try:
                    h["dt"] = DeltaTable.for_path(spark, run_dir)
                finally:
                    spark.conf.unset(FSYNC_CONF)

            def dx_op(h: dict[str, DeltaTable] = handle, f: Any = fn) -> None:
                f(h["dt"])

            stats, jobs = timer.measure(dx_op, runs=sizes.runs, warmup=sizes.warmup, setup=setup)
            extra: dict[str, Any] = {"scale_op": op, "scale_variant": variant.label}
            extra.update(timer.memory)
            extra["rewrote"] = spark_cases._files_rewritten(run_dir)
            if variant.dv and not spark_cases._has_dvs(run_dir):
                extra["rewrote"] += " (no deletion vector was written)"
            extra["durability"] = (
                "commits fsynced (default)" if variant.fsync else "no fsync, as delta-rs"
            )
            ours[variant] = spark_cases._dx(stats, jobs, **extra)

        counter = iter(range(10**6))

        def plain_op(o: str = op, c: Any = counter) -> None:
            out = spark_cases._fresh(os.path.join(workdir, f"scale-plain-{next(c)}"))
            spark_cases._plain_dml(spark, templates[False], out, o, n)

        plain_stats, plain_jobs = timer.measure(plain_op, runs=sizes.runs, warmup=sizes.warmup)
        plain = Figure(
            "plain Spark",
            spark_version,
            plain_stats,
            {"spark_jobs_per_op": plain_jobs, **timer.memory},
        )
        for i in range(next(counter)):
            shutil.rmtree(os.path.join(workdir, f"scale-plain-{i}"), ignore_errors=True)

        rs_error = ""
        rs_stats: Stats | None = None
        rs_extra: dict[str, Any] = {}
        try:
            samples, rs_rss = run_in_spawned(
                rs_workers.rs_dml_with_memory,
                templates[False],
                workdir,
                op,
                n,
                sizes.runs,
                sizes.warmup,
            )
            rs_stats = Stats.of(samples)
            rs_extra["peak_rss_mb"] = rs_rss
        except Exception as exc:
            rs_error = f"{type(exc).__name__}: {exc}"[:200]
            rs_extra["error"] = rs_error
        rs = Figure("delta-rs", rs_version, rs_stats, rs_extra)

        for variant in _RUNS:
            mine = ours[variant]
            for peer in (plain, rs):
                if peer is rs:
                    peer_memory = (
                        f"delta-rs RSS {rs_extra['peak_rss_mb']:.0f} MB" if rs_stats else rs_error
                    )
                else:
                    peer_memory = "plain Spark " + _memory_text(plain.extra)
                judged = peer is rs and n >= AHEAD_FROM_ROWS
                ahead = AHEAD_TARGET if variant.fsync else AHEAD_UNSYNCED_TARGET
                row = Row(
                    case=CASE,
                    name=f"{op.upper()} 1%, {variant.label} vs {peer.engine}",
                    size=size,
                    unit="s",
                    deltatx=Figure(mine.engine, mine.version, mine.stats, dict(mine.extra)),
                    peer=peer,
                    target=ahead if judged else _GROWTH_TARGET,
                    x=float(n),
                    notes=(
                        f"deltatx {mine.extra['durability']}; "
                        f"peak memory: deltatx {_memory_text(mine.extra)}; {peer_memory}; "
                        f"deltatx rewrote {mine.extra['rewrote']}"
                    ),
                )
                ratio = row.ratio
                rows.append(replace(row, met=None if not judged or ratio is None else ratio < 1.0))
    for path in (*templates.values(), run_dir):
        shutil.rmtree(path, ignore_errors=True)
    return rows, bytes_per_row


def case_scale(
    spark: SparkSession, workdir: str, sizes: ScaleSizes, log: Callable[[str], None]
) -> list[Row]:
    """Case 15: 1% MERGE/UPDATE/DELETE at every size, skipping those that do not fit."""
    rows: list[Row] = []
    bytes_per_row = _BYTES_PER_ROW_GUESS
    for n in sizes.sizes:
        reason = why_not(n, workdir, bytes_per_row)
        if reason is not None:
            log(f"case {CASE}: {n:,} rows skipped ({reason})")
            rows.append(_skipped(n, reason))
            continue
        log(f"case {CASE}: {n:,} rows ...")
        try:
            size_rows, measured = _measure_size(spark, workdir, n, sizes, log)
        except Exception as exc:
            # A size that fails half-way (out of memory or disk after all) is reported, and
            # the larger ones are not attempted.
            reason = f"failed: {type(exc).__name__}: {exc}"[:300]
            log(f"case {CASE}: {n:,} rows {reason}")
            rows.append(_skipped(n, reason))
            rows += [
                _skipped(m, f"not attempted after {n:,} rows failed") for m in sizes.sizes if m > n
            ]
            break
        rows += size_rows
        bytes_per_row = max(measured, 1.0)
    return rows
