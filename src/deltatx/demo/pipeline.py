"""The demo's pipeline: an events table fed by concurrent writers, under each isolation level.

Partitioned by date and country, as the documents advise: concurrent appends, per-partition MERGE
jobs with explicit partition predicates, a DELETE and an OPTIMIZE run side by side and all
commit; then a day is replaced with ``replace_where``, and time travel reads an old version.
"""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from rich.console import Console
from rich.table import Table

from deltatx.errors import ConcurrentModificationException
from deltatx.kernel.isolation import IsolationLevel
from deltatx.tables import DeltaTable, write

SCHEMA = "event_id BIGINT, date STRING, country STRING, amount DOUBLE"
DAYS = ("2024-01-01", "2024-01-02", "2024-01-03")
COUNTRIES = ("US", "FR", "JP")


@dataclass(frozen=True, slots=True)
class PipelineResult:
    """What the pipeline did: the tables it left behind and whether everything agreed."""

    tables: tuple[Path, ...]
    disagreements: int
    seconds: float


def _events(spark: SparkSession, day: str, start: int, n: int) -> DataFrame:
    country = F.element_at(
        F.array(*[F.lit(c) for c in COUNTRIES]), (F.col("id") % len(COUNTRIES) + 1).cast("int")
    )
    return spark.range(start, start + n).select(
        F.col("id").alias("event_id"),
        F.lit(day).alias("date"),
        country.alias("country"),
        (F.col("id") * 7 % 100).cast("double").alias("amount"),
    )


def _concurrently(jobs: list[Callable[[], object]]) -> list[BaseException]:
    """Runs ``jobs`` in threads at once; returns the exceptions they raised."""
    errors: list[BaseException] = []

    def guard(job: Callable[[], object]) -> None:
        try:
            job()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=guard, args=(job,)) for job in jobs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors


def _merge_job(spark: SparkSession, dt: DeltaTable, day: str, country: str) -> Callable[[], object]:
    source = spark.createDataFrame(
        [(1_000_000 + hash((day, country)) % 1000, day, country, 1.0)], SCHEMA
    ).unionByName(
        dt.to_df()
        .filter(f"date = '{day}' AND country = '{country}'")
        .limit(5)
        .withColumn("amount", F.col("amount") + 1000)
    )
    condition = (
        "s.event_id = t.event_id AND s.date = t.date AND s.country = t.country "
        f"AND t.date = '{day}' AND t.country = '{country}'"
    )
    return lambda: (
        dt.alias("t")
        .merge(source.alias("s"), condition)
        .when_matched_update_all()
        .when_not_matched_insert_all()
        .execute()
    )


def _one_level(
    spark: SparkSession, path: Path, level: IsolationLevel, out: Console
) -> tuple[DeltaTable, int]:
    disagreements = 0
    if path.exists():
        shutil.rmtree(path)
    dt = DeltaTable.create(
        spark,
        str(path),
        schema=SCHEMA,
        partition_by=["date", "country"],
        properties={"delta.isolationLevel": level.value},
    )
    out.print(f"[bold]{level.value}[/]: created {path}")

    def append_day(day: str, start: int) -> Callable[[], object]:
        return lambda: write(_events(spark, day, start, 300), str(path))

    errors = _concurrently([append_day(day, i * 1000) for i, day in enumerate(DAYS)])
    out.print(f"  3 concurrent appends (one per day): {3 - len(errors)} committed")
    if errors:
        disagreements += 1
        out.print(f"  [bold red]DISAGREEMENT: blind appends never conflict; got {errors[0]}")
    jobs = [_merge_job(spark, dt, "2024-01-01", c) for c in COUNTRIES]
    errors = _concurrently(jobs)
    out.print(
        f"  3 concurrent MERGE jobs, one per (date, country), explicit t.date/t.country: "
        f"{3 - len(errors)} committed"
    )
    if errors:
        disagreements += 1
        out.print(f"  [bold red]DISAGREEMENT: disjoint explicit merges conflicted: {errors[0]}")
    errors = _concurrently(
        [
            lambda: dt.delete("date = '2024-01-03' AND country = 'JP'"),
            lambda: dt.optimize().where("date = '2024-01-02'").execute_compaction(),
            lambda: write(_events(spark, "2024-01-04", 9000, 100), str(path)),
        ]
    )
    conflicts = [e for e in errors if isinstance(e, ConcurrentModificationException)]
    out.print(
        "  DELETE (2024-01-03/JP), OPTIMIZE (2024-01-02) and an append (2024-01-04) at once: "
        f"{3 - len(errors)} committed"
    )
    if errors:
        disagreements += 1
        shown = conflicts[0] if conflicts else errors[0]
        out.print(f"  [bold red]DISAGREEMENT: work on disjoint partitions conflicted: {shown}")
    before = dt.to_df().count()
    day2 = dt.to_df().filter("date = '2024-01-02'").count()
    v = write(
        _events(spark, "2024-01-02", 5000, 50),
        str(path),
        mode="overwrite",
        replace_where="date = '2024-01-02'",
    )
    after = dt.to_df().count()
    out.print(
        f"  replace_where date = '2024-01-02' with 50 events: version {v}, {before} -> {after}"
    )
    if after != before - day2 + 50:
        disagreements += 1
        out.print(f"  [bold red]DISAGREEMENT: expected {before - day2 + 50} rows, saw {after}")
    first = dt.to_df(version=1).count()
    out.print(f"  time travel: version 1 has {first} rows, the latest {after}")
    return dt, disagreements


def run_pipeline(spark: SparkSession, directory: Path, *, console: Console) -> PipelineResult:
    """Runs the events pipeline under ``directory``, once per isolation level.

    Returns:
        A summary; ``disagreements`` counts observed behaviours that differ from the documents.
    """
    out = console
    started = time.monotonic()
    directory.mkdir(parents=True, exist_ok=True)
    disagreements = 0
    out.rule("[bold]A partitioned events table with concurrent writers")
    tables: list[Path] = []
    last: DeltaTable | None = None
    for level in (IsolationLevel.WRITE_SERIALIZABLE, IsolationLevel.SERIALIZABLE):
        path = directory / f"events-{level.value}"
        last, found = _one_level(spark, path, level, out)
        disagreements += found
        tables.append(path)
    assert last is not None
    hist = Table(title=f"history of {tables[-1].name}")
    for name in ("version", "operation", "isolation", "blind append", "metrics"):
        hist.add_column(name)
    for entry in last.log.history():
        ci = entry.commit_info
        metrics = (
            ""
            if ci is None or not ci.operation_metrics
            else ", ".join(
                f"{k}={v}"
                for k, v in sorted(ci.operation_metrics.items())
                if v != "0" and k != "executionTimeMs"
            )
        )
        hist.add_row(
            str(entry.version),
            "" if ci is None else str(ci.operation),
            "" if ci is None else str(ci.isolation_level),
            "" if ci is None else str(ci.is_blind_append),
            metrics,
        )
    out.print(hist)
    seconds = time.monotonic() - started
    out.print(f"pipeline: {disagreements} disagreement(s); {seconds:.1f}s")
    return PipelineResult(tuple(tables), disagreements, seconds)


__all__ = ["PipelineResult", "run_pipeline"]
