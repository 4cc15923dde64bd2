"""What the driver DML suites share: a NULL-heavy table and comparisons of two copies."""

from __future__ import annotations

import json
import shutil
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from deltatx import DeltaTable

# Conditions over dml_data's columns: comparisons, IN with a NULL, IS NULL, a bare boolean,
# three-valued NOT and OR, and one that matches nothing.
DML_CONDITIONS = [
    "n = 3",
    "id < 30",
    "s IS NULL",
    "b",
    "n IN (1, NULL)",
    "p = 'x'",
    "NOT (n <=> 2) AND id % 2 = 0",
    "NOT (n <=> 2)",
    "sm > 2 OR t = 'b'",
    "id >= 60",
    "id = 1000000",
    "(sm - n) % 3 = -1",
]


def dml_data(spark: SparkSession, lo: int, hi: int) -> DataFrame:
    """Ids ``[lo, hi)`` with a NULL-heavy column of each kind the driver evaluates."""
    i = F.col("id")
    letters = F.array(*map(F.lit, "abc"))
    return spark.range(lo, hi).select(
        i,
        F.when(i % 4 == 0, None).otherwise((i % 5).cast("int")).alias("n"),
        F.when(i % 5 == 0, None).otherwise((i % 7).cast("short")).alias("sm"),
        F.when(i % 6 == 0, None)
        .otherwise(F.element_at(letters, (i % 3 + 1).cast("int")))
        .alias("s"),
        F.when(i % 3 == 0, None)
        .otherwise(F.element_at(letters, (i % 2 + 1).cast("int")))
        .alias("t"),
        F.when(i % 7 == 0, None).otherwise(i % 2 == 0).alias("b"),
        F.when(i % 9 == 0, F.lit(float("nan")))
        .when(i % 8 == 0, None)
        .otherwise(i * 0.5)
        .alias("d"),
        F.when(i % 2 == 0, None)
        .otherwise(F.date_add(F.lit("2020-01-01"), i.cast("int")))
        .alias("day"),
        F.when(i % 10 == 0, None)
        .otherwise(F.element_at(F.array(F.lit("x"), F.lit("y")), (i % 2 + 1).cast("int")))
        .alias("p"),
    )


def copy_table(base: str, root: Path) -> str:
    """A copy of the table at ``base`` in a new folder under ``root``."""
    target = root / uuid.uuid4().hex
    shutil.copytree(base, target)
    return str(target)


def rows_text(df: DataFrame) -> list[str]:
    """The rows of ``df``, sorted, as text."""
    # As text: NaN equals itself only there.
    return sorted(repr(tuple(r)) for r in df.collect())


def added_stats(dt: DeltaTable) -> dict[str, Any]:
    """The statistics of the files the last commit added, merged over files.

    A bound is known when every added file with a value in the column has it (how the rows
    are split into files may differ between the two paths).
    """
    snapshot = dt.log.snapshot()
    new = commit_adds(dt, snapshot.version)
    files = [json.loads(f.stats or "{}") for f in snapshot.add_files() if f.path in new]
    merged: dict[str, Any] = {"numRecords": sum(f["numRecords"] for f in files)}
    nulls: dict[str, int] = {}
    for f in files:
        for col, n in f["nullCount"].items():
            nulls[col] = nulls.get(col, 0) + n
    merged["nullCount"] = nulls
    for which, pick in (("minValues", min), ("maxValues", max)):
        bounds: dict[str, Any] = {}
        for col in nulls:
            values = [f[which].get(col) for f in files if f["nullCount"][col] < f["numRecords"]]
            if values and all(v is not None for v in values):
                bounds[col] = pick(values)
        merged[which] = bounds
    return merged


def commit_adds(dt: DeltaTable, version: int) -> set[str]:
    """The paths the commit at ``version`` added without a deletion vector (new rows)."""
    log_file = Path(dt.log.table_path) / "_delta_log" / f"{version:020d}.json"
    adds: set[str] = set()
    for line in log_file.read_text().splitlines():
        action = json.loads(line)
        if "add" in action and action["add"].get("deletionVector") is None:
            adds.add(action["add"]["path"])
    return adds


class DriverSpy:
    """Stands in for a driver path: records what it returned, or forces the Spark job."""

    def __init__(self, real: Callable[..., Any]) -> None:
        self.real = real
        self.force_spark = False
        self.results: list[Any] = []

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.force_spark:
            return None
        out = self.real(*args, **kwargs)
        self.results.append(out)
        return out


@dataclass(frozen=True, slots=True)
class BothWays:
    """A statement run on two copies of a table: by the driver path and by the Spark job."""

    wrote: bool
    driver_metrics: Any
    spark_metrics: Any
    driver_table: DeltaTable
    spark_table: DeltaTable


def run_both_ways(
    spark: SparkSession,
    base: str,
    root: Path,
    spy: DriverSpy,
    statement: Callable[[DeltaTable], Any],
) -> BothWays | None:
    """Runs ``statement`` on two copies of ``base``, the second forced into the Spark job.

    Asserts that both end alike: the same error, or the same rows. Returns None when both
    failed (the driver path then must not have written).
    """
    on_driver, on_spark = copy_table(base, root), copy_table(base, root)
    spy.results.clear()
    spy.force_spark = False
    driver_metrics, driver_error = _attempt(statement, DeltaTable.for_path(spark, on_driver))
    wrote = any(r is not None for r in spy.results)
    spy.force_spark = True
    spark_metrics, spark_error = _attempt(statement, DeltaTable.for_path(spark, on_spark))
    assert type(driver_error) is type(spark_error), (driver_error, spark_error)
    if driver_metrics is None or spark_metrics is None:
        assert not wrote
        return None
    a, b = DeltaTable.for_path(spark, on_driver), DeltaTable.for_path(spark, on_spark)
    assert rows_text(a.to_df()) == rows_text(b.to_df())
    return BothWays(wrote, driver_metrics, spark_metrics, a, b)


def _attempt(
    statement: Callable[[DeltaTable], Any], dt: DeltaTable
) -> tuple[Any, Exception | None]:
    try:
        return statement(dt), None
    except Exception as exc:  # the two paths must refuse alike
        return None, exc
