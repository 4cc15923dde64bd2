"""The documented worked examples, run for real: partitions and explicit conditions, txn1/txn2."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from deltatx.errors import ConcurrentModificationException
from deltatx.kernel.isolation import IsolationLevel
from deltatx.tables import DeltaTable, write


@dataclass(frozen=True, slots=True)
class ExampleOutcome:
    """What one worked example did and what the documents say it should do."""

    name: str
    variant: str
    expected_conflict: bool
    error: str | None
    detail: str = ""
    message: str | None = None

    @property
    def agrees(self) -> bool:
        """Whether the observed outcome is the documented one."""
        return (self.error is not None) == self.expected_conflict


def _describe(exc: ConcurrentModificationException) -> tuple[str | None, str | None]:
    return type(exc).__name__, str(exc)


def _fresh(path: Path) -> str:
    if path.exists():
        shutil.rmtree(path)
    return str(path)


def update_delete_by_date(spark: SparkSession, path: Path, *, partitioned: bool) -> ExampleOutcome:
    """``UPDATE ... WHERE date > '2010-01-01'`` against ``DELETE ... WHERE date < '2010-01-01'``.

    The documents: they conflict if the table is not partitioned by date; partitioning by date
    avoids the conflict.
    """
    root = _fresh(path)
    days = ["2009-12-30", "2009-12-31", "2010-01-02", "2010-01-03"]
    DeltaTable.create(
        spark,
        root,
        schema="id BIGINT, date STRING, v DOUBLE",
        partition_by=["date"] if partitioned else None,
        properties={"delta.enableDeletionVectors": "false"},
    )
    # Each batch spans every day, as event data arriving late usually does: without date
    # partitions, every file then holds rows of both conditions.
    day_of = F.element_at(F.array(*[F.lit(d) for d in days]), (F.col("id") % 4 + 1).cast("int"))
    for i in range(3):
        data = spark.range(i * 8, i * 8 + 8).select(
            "id", day_of.alias("date"), F.lit(1.0).alias("v")
        )
        write(data.coalesce(1), root)
    dt = DeltaTable.for_path(spark, root)
    update = dt.begin()
    update.update("date > '2010-01-01'", set={"v": "v + 1"})
    delete = dt.begin()
    delete.delete("date < '2010-01-01'")
    delete.commit()
    try:
        update.commit()
    except ConcurrentModificationException as exc:
        error, message = _describe(exc)
    else:
        error, message = None, None
    return ExampleOutcome(
        "UPDATE date > '2010-01-01' / DELETE date < '2010-01-01'",
        "partitioned by date" if partitioned else "not partitioned",
        expected_conflict=not partitioned,
        error=error,
        message=message,
    )


def merge_by_partition(spark: SparkSession, path: Path, *, explicit: bool) -> ExampleOutcome:
    """Two MERGE jobs on different (date, country) partitions of one table, concurrently.

    The documents: with only ``s.date = t.date AND s.country = t.country`` in the condition the
    MERGE may scan the whole table and conflict; adding ``t.date = '...' AND t.country =
    '...'`` makes it safe to run concurrently.
    """
    root = _fresh(path)
    DeltaTable.create(
        spark,
        root,
        schema="user_id BIGINT, date STRING, country STRING, clicks BIGINT",
        partition_by=["date", "country"],
    )
    for day, country in [("2024-01-01", "US"), ("2024-01-02", "FR")]:
        data = spark.range(0, 5).select(
            F.col("id").alias("user_id"),
            F.lit(day).alias("date"),
            F.lit(country).alias("country"),
            F.lit(1).cast("long").alias("clicks"),
        )
        write(data.coalesce(1), root)
    dt = DeltaTable.for_path(spark, root)

    def merge_job(day: str, country: str) -> object:
        source = spark.createDataFrame(
            [(1, day, country, 10), (99, day, country, 1)],
            "user_id BIGINT, date STRING, country STRING, clicks BIGINT",
        )
        condition = "s.user_id = t.user_id AND s.date = t.date AND s.country = t.country"
        if explicit:
            condition += f" AND t.date = '{day}' AND t.country = '{country}'"
        txn = dt.begin()
        (
            txn.alias("t")
            .merge(source.alias("s"), condition)
            .when_matched_update_all()
            .when_not_matched_insert_all()
            .execute()
        )
        return txn

    first = merge_job("2024-01-01", "US")
    second = merge_job("2024-01-02", "FR")
    second.commit()  # type: ignore[attr-defined]
    try:
        first.commit()  # type: ignore[attr-defined]
    except ConcurrentModificationException as exc:
        error, message = _describe(exc)
    else:
        error, message = None, None
    return ExampleOutcome(
        "MERGE per (date, country)",
        "explicit t.date / t.country in the condition" if explicit else "join keys only",
        expected_conflict=not explicit,
        error=error,
        message=message,
    )


def txn1_txn2(spark: SparkSession, path: Path, *, level: IsolationLevel) -> ExampleOutcome:
    """The documented Serializable example: txn1 deletes, txn2 re-inserts what txn1 deletes.

    txn2 commits first, then txn1. Under WriteSerializable txn1 commits as if it ran before
    txn2, so a reader sees txn2's row although the history says txn1's delete came after it.
    Under Serializable txn1 fails; retried, it deletes txn2's row too, and no reader ever sees
    a table the history does not explain.
    """
    root = _fresh(path)
    DeltaTable.create(
        spark,
        root,
        schema="id BIGINT, tag STRING",
        properties={"delta.isolationLevel": level.value, "delta.enableDeletionVectors": "false"},
    )
    write(spark.createDataFrame([(1, "old"), (2, "keep")], "id BIGINT, tag STRING"), root)
    dt = DeltaTable.for_path(spark, root)
    txn1 = dt.begin()
    txn1.delete("id = 1")
    txn2 = dt.begin()
    txn2.write(spark.createDataFrame([(1, "reinserted")], "id BIGINT, tag STRING"))
    txn2.commit()
    error: str | None = None
    message: str | None = None
    try:
        txn1.commit()
    except ConcurrentModificationException as exc:
        error, message = type(exc).__name__, str(exc)
        dt.delete("id = 1")  # the retry, on the new snapshot
    visible = dt.to_df().filter("tag = 'reinserted'").count() > 0
    return ExampleOutcome(
        "txn1 deletes, txn2 re-inserts (txn2 commits first)",
        level.value,
        expected_conflict=level is IsolationLevel.SERIALIZABLE,
        error=error,
        detail=f"reader sees txn2's row afterwards: {'yes' if visible else 'no'}",
        message=message,
    )
