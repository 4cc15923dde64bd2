"""Case 12: deltatx next to delta-spark, the reference engine, on the same data and settings.

delta-spark 4.4 needs Spark 4.2, so it runs in its own process (the peer environment of the
peer test suite, ``tests/peer/engine.py``) and times its operations there; deltatx is timed in
this process. Both start from the same Parquet source written once, both sessions get the same
Spark settings (those of deltatx's local session: master, shuffle partitions, memory, time zone),
and the two engines run one after the other, never at the same time. Tables an operation
changes are copied fresh, untimed, before every run, and each engine opens the copy (loads its
snapshot) untimed too.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from benchmarks.harness import MIN_RUNS, Figure, Row, Stats
from benchmarks.spark_cases import (
    Timer,
    _dx,
    _fresh,
    dml_source,
    dml_target,
    start_session,
)

# Issue 16's table shape (case 15): 100,000 rows a file, so 10M rows is 100 files.
SCALE_ROWS_PER_FILE = 100_000

SHARED_CONF_KEYS = (
    "spark.master",
    "spark.sql.shuffle.partitions",
    "spark.sql.session.timeZone",
    "spark.sql.parquet.outputTimestampType",
    "spark.driver.memory",
    "spark.driver.maxResultSize",
    "spark.ui.enabled",
    "spark.ui.showConsoleProgress",
    "spark.log.level",
    "spark.driver.bindAddress",
    "spark.driver.host",
)


@dataclass(frozen=True, slots=True)
class PeerSizes:
    """Sizes of case 12."""

    append_rows: int = 1_000_000
    dml_rows: int = 1_000_000
    dml_files: int = 20
    scale_dml_rows: int | None = 10_000_000
    optimize_files: int = 100
    optimize_rows: int = 500_000
    versions: int = 100
    dv_rows: int = 4_000_000
    dv_files: int = 16
    runs: int = 3
    warmup: int = 1


FULL = PeerSizes()
QUICK = PeerSizes(
    append_rows=100_000,
    dml_rows=100_000,
    dml_files=10,
    scale_dml_rows=None,
    optimize_files=30,
    optimize_rows=50_000,
    versions=30,
    dv_rows=400_000,
    dv_files=8,
)

# Runs in the delta-spark driver: the same timing loop as Timer.measure, measured there.
PRELUDE = """
import os, shutil, time, uuid
from delta.tables import DeltaTable as DT
def _fresh(p):
    if os.path.exists(p):
        shutil.rmtree(p)
    return p
def measure(op, setup=None, runs=3, warmup=1):
    sc = spark.sparkContext
    samples, jobs = [], []
    for i in range(warmup + max(runs, 3)):
        if setup is not None:
            setup()
        group = 'bench-' + uuid.uuid4().hex
        sc.setJobGroup(group, group)
        t0 = time.perf_counter()
        op()
        elapsed = time.perf_counter() - t0
        if i >= warmup:
            samples.append(elapsed)
            jobs.append(len(sc.statusTracker().getJobIdsForGroup(group)))
    return {'samples': samples, 'jobs': sorted(jobs)[len(jobs) // 2]}
def clear_cache():
    spark._jvm.org.apache.spark.sql.delta.DeltaLog.clearCache()
"""


def _lo_hi(n: int) -> tuple[int, int, int, int]:
    """The DML range (1% of the ids) and the MERGE source range (half inside, half new)."""
    lo, hi = n // 2, n // 2 + n // 100
    return lo, hi, hi - n // 200, hi + n // 200


def _row(name: str, size: str, dx: Stats, dx_jobs: float, peer: dict[str, Any], ver: str) -> Row:
    stats = Stats.of(peer["samples"])
    return Row(
        case="12 delta-spark",
        name=name,
        size=size,
        unit="s",
        deltatx=_dx(dx, dx_jobs),
        peer=Figure("delta-spark", ver, stats, {"spark_jobs_per_op": peer["jobs"]}),
        target="report the ratio (the performance goals apply against delta-spark too)",
        notes=f"Spark jobs per operation: deltatx {dx_jobs:g}, delta-spark {peer['jobs']:g}",
    )


def run_all(workdir: str, sizes: PeerSizes, log: Callable[[str], None]) -> list[Row]:
    """Every case of the delta-spark comparison; [] with a log line when delta-spark is absent."""
    from tests.peer.engine import DeltaSpark, missing_reason

    reason = missing_reason()
    if reason is not None:
        log(f"case 12 skipped: {reason}")
        return []
    import deltatx
    from deltatx import DeltaTable

    spark, _ = start_session()
    conf = {k: v for k in SHARED_CONF_KEYS if (v := spark.conf.get(k, None)) is not None}
    master = conf.pop("spark.master", "local[2]")
    t0 = time.perf_counter()
    peer = DeltaSpark(master=master, conf=conf, log=os.path.join(workdir, "delta-spark.log"))
    log(f"delta-spark {peer.spark_version} session ready in {time.perf_counter() - t0:.1f} s")
    ver = f"4.4.0 on Spark {peer.spark_version}"
    timer = Timer(spark)
    runs, warmup = sizes.runs, sizes.warmup
    rows: list[Row] = []

    def theirs(code: str, **args: Any) -> dict[str, Any]:
        out: dict[str, Any] = peer.exec(
            PRELUDE + code, runs=runs, warmup=warmup, workdir=workdir, **args
        )
        return out

    # Shared source data, written once as plain Parquet.
    n = sizes.append_rows
    source = os.path.join(workdir, "peer-source")
    dml_src = os.path.join(workdir, "peer-dml-source")
    ident = F.col("id")
    spark.range(n).select(
        ident,
        F.concat(F.lit("d"), (ident % 8).cast("string")).alias("day"),
        ((ident * 7919) % 1_000_003 / F.lit(1_000_003.0)).alias("v"),
    ).repartition(4).write.mode("overwrite").parquet(source)
    dml_target(spark, sizes.dml_rows, sizes.dml_files).write.mode("overwrite").parquet(dml_src)

    # -- append and filtered read
    log("case 12: append and filtered read ...")
    dx_path, ds_path = (
        os.path.join(workdir, "peer-append-dx"),
        os.path.join(workdir, "peer-append-ds"),
    )
    _fresh(dx_path)
    df = spark.read.parquet(source)
    dx, dx_jobs = timer.measure(lambda: deltatx.write(df, dx_path), runs=runs, warmup=warmup)
    ds = theirs(
        "_fresh(args['p'])\n"
        "df = spark.read.parquet(args['src'])\n"
        "result = measure(lambda: df.write.format('delta').mode('append').save(args['p']), "
        "runs=args['runs'], warmup=args['warmup'])",
        p=ds_path,
        src=source,
    )
    rows.append(_row(f"append {n:,} rows", f"{n:,} rows", dx, dx_jobs, ds, ver))
    cond = "v < 0.1"
    dx, dx_jobs = timer.measure(
        lambda: DeltaTable.for_path(spark, dx_path).to_df().filter(cond).agg(F.sum("v")).collect(),
        runs=runs,
        warmup=warmup,
    )
    ds = theirs(
        "result = measure(lambda: DT.forPath(spark, args['p']).toDF().filter(args['c'])"
        ".agg({'v': 'sum'}).collect(), runs=args['runs'], warmup=args['warmup'])",
        p=ds_path,
        c=cond,
    )
    total = (warmup + max(runs, MIN_RUNS)) * n
    rows.append(_row(f"filtered read ({cond})", f"{total:,} rows", dx, dx_jobs, ds, ver))

    # -- commit latency: one-row appends to the table above
    log("case 12: commit latency ...")
    one = spark.range(1).select(F.col("id"), F.lit("d0").alias("day"), F.lit(0.5).alias("v"))
    dx, dx_jobs = timer.measure(
        lambda: deltatx.write(one, dx_path), runs=max(runs, 5), warmup=warmup
    )
    ds = theirs(
        "one = spark.range(1).selectExpr('id', \"'d0' AS day\", 'CAST(0.5 AS DOUBLE) AS v')\n"
        "result = measure(lambda: one.write.format('delta').mode('append').save(args['p']), "
        "runs=max(args['runs'], 5), warmup=args['warmup'])",
        p=ds_path,
    )
    rows.append(_row("commit latency: append one row", "1 row", dx, dx_jobs, ds, ver))

    # -- DML with and without deletion vectors; at 10M rows (issue 16) with them only
    dml = _Dml(spark, peer, theirs, timer, workdir, ver, log, runs, warmup)
    rows += dml.rows(dml_src, sizes.dml_rows, sizes.dml_files, (False, True))
    if sizes.scale_dml_rows:
        scale_src = os.path.join(workdir, "peer-dml-scale-source")
        scale_files = max(1, sizes.scale_dml_rows // SCALE_ROWS_PER_FILE)
        target = dml_target(spark, sizes.scale_dml_rows, scale_files)
        target.write.mode("overwrite").parquet(scale_src)
        rows += dml.rows(scale_src, sizes.scale_dml_rows, scale_files, (True,), by_range=True)
        shutil.rmtree(scale_src, ignore_errors=True)
    run_dx, run_ds = os.path.join(workdir, "peer-run-dx"), os.path.join(workdir, "peer-run-ds")

    # -- OPTIMIZE and ZORDER on many small files
    k, files = sizes.optimize_rows, sizes.optimize_files
    log("case 12: OPTIMIZE and ZORDER ...")
    opt_src = os.path.join(workdir, "peer-opt-source")
    dml_target(spark, k, files).write.mode("overwrite").parquet(opt_src)
    dx_tpl, ds_tpl = os.path.join(workdir, "peer-opt-dx"), os.path.join(workdir, "peer-opt-ds")
    deltatx.write(spark.read.parquet(opt_src), _fresh(dx_tpl))
    peer.exec(
        PRELUDE + "spark.read.parquet(args['src']).write.format('delta').save(_fresh(args['p']))",
        p=ds_tpl,
        src=opt_src,
    )
    for what, dx_call, ds_sql in (
        ("OPTIMIZE", lambda t: t.optimize().execute_compaction(), "OPTIMIZE delta.`{p}`"),
        (
            "OPTIMIZE ZORDER BY (k, v)",
            lambda t: t.optimize().execute_z_order_by("k", "v"),
            "OPTIMIZE delta.`{p}` ZORDER BY (k, v)",
        ),
    ):
        handle: dict[str, DeltaTable] = {}

        def setup_opt(h: dict[str, DeltaTable] = handle) -> None:
            shutil.copytree(dx_tpl, _fresh(run_dx))
            h["dt"] = DeltaTable.for_path(spark, run_dx)

        def dx_opt(h: dict[str, DeltaTable] = handle, f: Any = dx_call) -> None:
            f(h["dt"])

        dx, dx_jobs = timer.measure(dx_opt, runs=runs, warmup=warmup, setup=setup_opt)
        ds = theirs(
            "def setup():\n"
            "    shutil.copytree(args['tpl'], _fresh(args['run']))\n"
            "    clear_cache()\n"
            "    DT.forPath(spark, args['run']).toDF()\n"
            "result = measure(lambda: spark.sql(args['s']).collect(), setup=setup, "
            "runs=args['runs'], warmup=args['warmup'])",
            tpl=ds_tpl,
            run=run_ds,
            s=ds_sql.format(p=run_ds),
        )
        rows.append(_row(what, f"{k:,} rows in {files} files", dx, dx_jobs, ds, ver))

    # -- full read of a table whose deletion vectors delete 10% of its rows, and of it purged:
    # both engines read the same two tables (case 10's shape), written once by deltatx.
    log("case 12: read with deletion vectors ...")
    from benchmarks.datasource_cases import dv_and_purged

    dv_path, purged_path = dv_and_purged(
        spark, workdir, sizes.dv_rows, sizes.dv_files, name="peer-dv"
    )
    size = f"{sizes.dv_rows:,} rows in {sizes.dv_files} files"
    read: dict[str, tuple[Stats, dict[str, Any], float]] = {}
    for label, path in (
        ("DVs delete 10% of rows", dv_path),
        ("the same table purged", purged_path),
    ):
        dx, dx_jobs = timer.measure(
            lambda p=path: (
                DeltaTable.for_path(spark, p).to_df().agg(F.sum("v"), F.count("*")).collect()
            ),
            runs=runs,
            warmup=warmup,
        )
        ds = theirs(
            "result = measure(lambda: DT.forPath(spark, args['p']).toDF()"
            ".selectExpr('sum(v)', 'count(*)').collect(), runs=args['runs'], "
            "warmup=args['warmup'])",
            p=path,
        )
        read[label] = (dx, ds, dx_jobs)
    (dv_dx, dv_ds, _), (pu_dx, pu_ds, _) = read.values()
    theirs_ratio = Stats.of(dv_ds["samples"]).median / Stats.of(pu_ds["samples"]).median
    ours_ratio = dv_dx.median / pu_dx.median
    for label, (dx, ds, dx_jobs) in read.items():
        row = _row(f"full read, {label}", size, dx, dx_jobs, ds, ver)
        row.notes += (
            f"; read with DVs / read purged: deltatx {ours_ratio:.2f}x, "
            f"delta-spark {theirs_ratio:.2f}x"
        )
        rows.append(row)

    # -- snapshot load of a table with many versions (and checkpoints)
    v = sizes.versions
    log(f"case 12: snapshot load, {v} versions ...")
    dx_snap, ds_snap = os.path.join(workdir, "peer-snap-dx"), os.path.join(workdir, "peer-snap-ds")
    _fresh(dx_snap)
    for i in range(v):
        deltatx.write(spark.range(i * 10, i * 10 + 10), dx_snap)
    peer.exec(
        PRELUDE + "_fresh(args['p'])\n"
        "for i in range(args['v']):\n"
        "    spark.range(i * 10, i * 10 + 10).write.format('delta').mode('append').save(args['p'])",
        p=ds_snap,
        v=v,
    )
    dx, dx_jobs = timer.measure(
        lambda: DeltaTable.for_path(spark, dx_snap).detail().collect(), runs=runs, warmup=warmup
    )
    ds = theirs(
        "def load():\n"
        "    clear_cache()\n"
        "    DT.forPath(spark, args['p']).detail().collect()\n"
        "result = measure(load, runs=args['runs'], warmup=args['warmup'])",
        p=ds_snap,
    )
    rows.append(
        _row(f"snapshot load + detail(), {v} versions", f"{v} versions", dx, dx_jobs, ds, ver)
    )
    peer.close()
    for row in rows:
        ratio = f"{row.ratio:.2f}" if row.ratio is not None else "n/a"
        ours_s = row.deltatx.stats.median if row.deltatx.stats else float("nan")
        theirs_s = row.peer.stats.median if row.peer and row.peer.stats else float("nan")
        log(f"case 12: {row.name}: deltatx {ours_s:.3f} s, delta-spark {theirs_s:.3f} s, {ratio}x")
    return rows


@dataclass(frozen=True, slots=True)
class _Dml:
    """DELETE, UPDATE and MERGE of 1%, timed in deltatx and in delta-spark on one source."""

    spark: SparkSession
    peer: Any
    theirs: Callable[..., dict[str, Any]]
    timer: Timer
    workdir: str
    ver: str
    log: Callable[[str], None]
    runs: int
    warmup: int

    def rows(
        self, src: str, m: int, files: int, dvs: tuple[bool, ...], *, by_range: bool = False
    ) -> list[Row]:
        """One row per operation and table kind, for the ``m``-row table at ``src``.

        ``by_range``: each engine writes its table range-partitioned by id into ``files``
        files (case 15's shape), not in the files Spark's reader packs ``src`` into.
        """
        import deltatx
        from deltatx import DeltaTable

        spark, peer, theirs, timer, workdir = (
            self.spark,
            self.peer,
            self.theirs,
            self.timer,
            self.workdir,
        )
        runs, warmup = self.runs, self.warmup
        lo, hi, src_lo, src_hi = _lo_hi(m)
        run_dx = os.path.join(workdir, "peer-run-dx")
        run_ds = os.path.join(workdir, "peer-run-ds")
        rows: list[Row] = []
        for dv in dvs:
            props = {"delta.enableDeletionVectors": str(dv).lower()}
            label = "deletion vectors" if dv else "copy-on-write"
            self.log(f"case 12: DML, {label}, {m:,} rows ...")
            dx_tpl = _fresh(os.path.join(workdir, f"peer-dml-dx-{int(dv)}"))
            ds_tpl = os.path.join(workdir, f"peer-dml-ds-{int(dv)}")
            data = spark.read.parquet(src)
            deltatx.write(
                data.repartitionByRange(files, "id") if by_range else data,
                dx_tpl,
                properties=props,
            )
            ranged = f".repartitionByRange({files}, 'id')" if by_range else ""
            peer.exec(
                "import shutil, os\n"
                "if os.path.exists(args['p']): shutil.rmtree(args['p'])\n"
                f"spark.read.parquet(args['src']){ranged}.write.format('delta')"
                ".option('delta.enableDeletionVectors', args['dv']).save(args['p'])\n"
                "spark.sql(f\"ALTER TABLE delta.`{args['p']}` SET TBLPROPERTIES "
                "('delta.enableDeletionVectors' = '{args['dv']}')\")",
                p=ds_tpl,
                src=src,
                dv=str(dv).lower(),
            )
            source_df = dml_source(spark, src_lo, src_hi)
            dx_ops: dict[str, Callable[[DeltaTable], object]] = {
                "DELETE": lambda t: t.delete(f"id >= {lo} AND id < {hi}"),
                "UPDATE": lambda t: t.update(
                    condition=f"id >= {lo} AND id < {hi}", set={"v": "v + 1.0"}
                ),
                "MERGE": lambda t, src=source_df: (
                    t.alias("t")
                    .merge(src.alias("s"), "t.id = s.id")
                    .when_matched_update_all()
                    .when_not_matched_insert_all()
                    .execute()
                ),
            }
            ds_ops = {
                "DELETE": f"DELETE FROM delta.`{run_ds}` WHERE id >= {lo} AND id < {hi}",
                "UPDATE": f"UPDATE delta.`{run_ds}` SET v = v + 1.0 WHERE id >= {lo} AND id < {hi}",
                "MERGE": (
                    f"MERGE INTO delta.`{run_ds}` t USING (SELECT id, concat('k', "
                    "CAST(id % 10 AS STRING)) AS k, CAST(id AS DOUBLE) * 2.0 AS v FROM "
                    f"range({src_lo}, {src_hi})) s ON t.id = s.id WHEN MATCHED THEN UPDATE SET * "
                    "WHEN NOT MATCHED THEN INSERT *"
                ),
            }
            for op, fn in dx_ops.items():
                handle: dict[str, DeltaTable] = {}

                def setup(h: dict[str, DeltaTable] = handle, tpl: str = dx_tpl) -> None:
                    shutil.copytree(tpl, _fresh(run_dx))
                    h["dt"] = DeltaTable.for_path(spark, run_dx)

                def dx_op(h: dict[str, DeltaTable] = handle, f: Any = fn) -> None:
                    f(h["dt"])

                dx, dx_jobs = timer.measure(dx_op, runs=runs, warmup=warmup, setup=setup)
                ds = theirs(
                    "def setup():\n"
                    "    shutil.copytree(args['tpl'], _fresh(args['run']))\n"
                    "    clear_cache()\n"
                    "    DT.forPath(spark, args['run']).toDF()\n"
                    "result = measure(lambda: spark.sql(args['s']).collect(), setup=setup, "
                    "runs=args['runs'], warmup=args['warmup'])",
                    tpl=ds_tpl,
                    run=run_ds,
                    s=ds_ops[op],
                )
                size = f"{m:,}-row table in {files} files, 1% changed"
                rows.append(_row(f"{op} 1%, {label}", size, dx, dx_jobs, ds, self.ver))
        return rows
