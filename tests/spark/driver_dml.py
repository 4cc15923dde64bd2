"""What the driver DML suites share: a NULL-heavy table and comparisons of two copies."""

from __future__ import annotations

import json
import shutil
import uuid
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from deltatx import DeltaTable


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
