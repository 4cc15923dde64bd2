"""The main job behind ``make demo``: a small real pipeline on local Spark and local files."""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from rich.console import Console
from rich.table import Table

from deltatx.tables import DeltaTable, write


@dataclass(frozen=True, slots=True)
class PipelineResult:
    """What the pipeline did: the table it left behind and whether everything agreed."""

    table: Path
    disagreements: int
    seconds: float


def _events(spark: SparkSession, day: str, countries: list[str], start: int, n: int) -> DataFrame:
    country = F.element_at(
        F.array(*[F.lit(c) for c in countries]), (F.col("id") % len(countries) + 1).cast("int")
    )
    return spark.range(start, start + n).select(
        F.col("id").alias("event_id"),
        F.lit(day).alias("date"),
        country.alias("country"),
        (F.col("id") * 7 % 100).cast("double").alias("amount"),
    )


def run_pipeline(spark: SparkSession, directory: Path, *, console: Console) -> PipelineResult:
    """Runs the events pipeline under ``directory`` and prints what happened.

    Returns:
        A summary; ``disagreements`` counts observed behaviours that differ from the seeds.
    """
    out = console
    started = time.monotonic()
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "events"
    if path.exists():
        shutil.rmtree(path)
    disagreements = 0

    out.rule("[bold]deltatx demo: a partitioned events table")
    table = DeltaTable.create(
        spark,
        str(path),
        schema="event_id BIGINT, date STRING, country STRING, amount DOUBLE",
        partition_by=["date", "country"],
    )
    out.print(f"created {path} (version {table.version()})")
    batches = [("2024-01-01", 0), ("2024-01-02", 1000), ("2024-01-03", 2000)]
    for day, start in batches:
        v = write(_events(spark, day, ["US", "FR", "JP"], start, 300), str(path), mode="append")
        out.print(f"appended 300 events for {day}: version {v}")
    before = table.to_df().count()
    v = write(
        _events(spark, "2024-01-02", ["US"], 5000, 50),
        str(path),
        mode="overwrite",
        replace_where="date = '2024-01-02'",
    )
    after = table.to_df().count()
    out.print(
        f"replaced 2024-01-02 with 50 corrected events: version {v} ({before} -> {after} rows)"
    )
    expected_after = before - 300 + 50
    if after != expected_after:
        disagreements += 1
        out.print(f"[bold red]DISAGREEMENT: expected {expected_after} rows, saw {after}")

    v1 = table.to_df(version=1).count()
    out.print(f"time travel: version 1 has {v1} rows; the latest has {after}")
    if v1 != 300:
        disagreements += 1
        out.print("[bold red]DISAGREEMENT: version 1 should hold the first 300 events")

    per_partition = (
        table.to_df().groupBy("date", "country").count().orderBy("date", "country").collect()
    )
    grid = Table(title="rows per partition (latest)")
    for name in ("date", "country", "rows"):
        grid.add_column(name)
    for row in per_partition:
        grid.add_row(str(row["date"]), str(row["country"]), str(row["count"]))
    out.print(grid)

    hist = Table(title=f"history of {path.name}")
    for name in ("version", "operation", "isolation", "blind append", "metrics"):
        hist.add_column(name)
    for entry in table.log.history():
        ci = entry.commit_info
        metrics = (
            ""
            if ci is None or not ci.operation_metrics
            else ", ".join(f"{k}={v}" for k, v in sorted(ci.operation_metrics.items()) if v != "0")
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
    return PipelineResult(path, disagreements, seconds)


__all__ = ["PipelineResult", "run_pipeline"]
