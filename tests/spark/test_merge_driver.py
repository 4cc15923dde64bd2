"""MERGE with a small source matched on the driver: the same result as the Spark path.

A MERGE on key equalities with a small source collects the source once and joins it with the
candidate files' keys in pyarrow. Each case here runs twice on copies of one table, once so
and once forced onto the Spark path, on keys and values full of NULLs, over files that
already carry deletion vectors, and compares the table and the metrics. The gates are checked
too: a MERGE the driver cannot decide exactly stays in Spark.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

import deltatx
from deltatx import DeltaTable
from deltatx.errors import InvalidArgumentError
from deltatx.kernel.metrics import MergeMetrics
from deltatx.spark.commands import merge_driver_source, merge_from_source
from deltatx.spark.commands.common import to_delta_schema
from deltatx.spark.commands.merge_clauses import ClauseKind, MergeClause

SCHEMA = "id BIGINT, k STRING, v DOUBLE, n INT"

Merge = Callable[[DeltaTable, DataFrame], MergeMetrics]


def null_heavy_rows(spark: SparkSession) -> DataFrame:
    """120 rows of (id, k, v, n) with NULLs in every column, for MERGE targets."""
    return spark.range(0, 120).select(
        F.when(F.col("id") % 11 == 0, F.lit(None)).otherwise(F.col("id")).alias("id"),
        F.when(F.col("id") % 7 == 0, F.lit(None))
        .otherwise(F.concat(F.lit("k"), (F.col("id") % 4).cast("string")))
        .alias("k"),
        F.when(F.col("id") % 5 == 0, F.lit(None)).otherwise(F.col("id") * 0.5).alias("v"),
        F.when(F.col("id") % 3 == 0, F.lit(None)).otherwise(F.col("id") % 9).cast("int").alias("n"),
    )


def _target(spark: SparkSession, path: Path, *, dv: bool) -> None:
    data = null_heavy_rows(spark)
    deltatx.write(
        data.repartitionByRange(4, "id"),
        str(path),
        properties={"delta.enableDeletionVectors": str(dv).lower()},
    )
    # Some rows already deleted: with deletion vectors these live in the files' vectors.
    DeltaTable.for_path(spark, str(path)).delete("id IN (3, 40, 41, 90)")


def _source(spark: SparkSession, *, duplicates: bool = False) -> DataFrame:
    rows: list[tuple[Any, ...]] = [
        (1, "k1", 10.0, 1),
        (2, None, None, 2),  # target row 2 has k k2
        (3, "k3", 3.0, None),  # deleted before the merge: inserted
        (4, "k0", -4.0, 4),
        (None, "k1", 5.0, 5),  # a NULL key matches nothing
        (None, None, None, None),
        (22, None, 22.0, 22),  # target id 22 is NULL (22 % 11 == 0): no match
        (50, "k2", 50.5, None),
        (119, "k3", 1.0, 7),
        (500, "k0", 0.0, 0),
        (501, None, -1.0, None),
    ]
    if duplicates:
        rows.append((50, "k2", 99.0, 1))
    # Cached and counted, Spark knows its size (a list's DataFrame alone has no estimate).
    source = spark.createDataFrame(rows, SCHEMA).cache()
    source.count()
    return source


CASES: dict[str, tuple[str, Merge]] = {
    "upsert all": (
        "t.id = s.id",
        lambda dt, s: (
            dt.alias("t")
            .merge(s.alias("s"), "t.id = s.id")
            .when_matched_update_all()
            .when_not_matched_insert_all()
            .execute()
        ),
    ),
    "update from both sides, conditional inserts": (
        "t.id = s.id",
        lambda dt, s: (
            dt.alias("t")
            .merge(s.alias("s"), "t.id = s.id")
            .when_matched_update(set={"v": "t.v + s.v", "n": "s.n"})
            .when_not_matched_insert(condition="s.v > 0", values={"id": "s.id", "v": "s.v"})
            .when_not_matched_insert(values={"id": "s.id", "k": "'other'"})
            .execute()
        ),
    ),
    "delete matched, insert the rest": (
        "t.id = s.id",
        lambda dt, s: (
            dt.alias("t")
            .merge(s.alias("source"), "t.id = source.id")
            .when_matched_delete()
            .when_not_matched_insert_all(condition="source.n IS NOT NULL")
            .execute()
        ),
    ),
    "two keys, update only": (
        "t.id = s.id AND s.k = t.k",
        lambda dt, s: (
            dt.alias("t")
            .merge(s.alias("s"), "t.id = s.id AND s.k = t.k")
            .when_matched_update(set={"n": "t.n * 10", "k": "concat(s.k, '!')"})
            .execute()
        ),
    ),
    "string key, insert only": (
        "t.k = s.k",
        lambda dt, s: (
            dt.alias("t")
            .merge(s.filter("k IS NULL OR k = 'k1'").alias("s"), "t.k = s.k")
            .when_not_matched_insert_all()
            .execute()
        ),
    ),
}


def _spark_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(merge_driver_source, "DRIVER_SOURCE_BYTES", -1)


def _spy(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Records, per MERGE, whether the driver decided the matches."""
    calls: list[bool] = []
    real = merge_from_source.key_matches

    def spy(*args: Any, **kwargs: Any) -> Any:
        out = real(*args, **kwargs)
        calls.append(out is not None)
        return out

    monkeypatch.setattr(merge_from_source, "key_matches", spy)
    return calls


def _rows(dt: DeltaTable) -> list[tuple[object, ...]]:
    return sorted((tuple(r) for r in dt.to_df().collect()), key=repr)


def merge_counts(m: MergeMetrics) -> tuple[int, ...]:
    """The row and file counts two MERGE paths over the same tables must agree on."""
    return (
        m.num_source_rows,
        m.num_target_rows_updated,
        m.num_target_rows_deleted,
        m.num_target_rows_inserted,
        m.num_target_rows_copied,
        m.num_output_rows,
        m.num_target_files_removed,
        m.num_deletion_vectors_added,
    )


@pytest.mark.sample(every=2)
@pytest.mark.parametrize("dv", [True, False], ids=["dv", "copy-on-write"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_driver_merge_matches_the_spark_path(
    spark: SparkSession,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    case: str,
    dv: bool,
) -> None:
    template = tmp_path / "template"
    _target(spark, template, dv=dv)
    _, merge = CASES[case]
    on_driver, in_spark = tmp_path / "driver", tmp_path / "spark"
    shutil.copytree(template, on_driver)
    shutil.copytree(template, in_spark)
    calls = _spy(monkeypatch)
    got = merge(DeltaTable.for_path(spark, str(on_driver)), _source(spark))
    assert calls == [True], "the driver should have matched this merge"
    _spark_path(monkeypatch)
    expected = merge(DeltaTable.for_path(spark, str(in_spark)), _source(spark))
    assert calls == [True], "the forced merge should have stayed in Spark"
    assert _rows(DeltaTable.for_path(spark, str(on_driver))) == _rows(
        DeltaTable.for_path(spark, str(in_spark))
    )
    assert merge_counts(got) == merge_counts(expected)


@pytest.mark.parametrize("dv", [True, False], ids=["dv", "copy-on-write"])
def test_driver_merge_refuses_ambiguous_matches_and_allows_a_lone_delete(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, dv: bool
) -> None:
    _target(spark, tmp_path, dv=dv)
    dt = DeltaTable.for_path(spark, str(tmp_path))
    version = dt.version()
    calls = _spy(monkeypatch)
    dup = _source(spark, duplicates=True)
    with pytest.raises(InvalidArgumentError, match="several source rows"):
        dt.alias("t").merge(dup.alias("s"), "t.id = s.id").when_matched_update_all().execute()
    assert dt.version() == version
    m = dt.alias("t").merge(dup.alias("s"), "t.id = s.id").when_matched_delete().execute()
    assert calls == [True, True]
    assert m.num_target_rows_deleted == 5  # ids 1, 2, 4, 50 and 119, 50 once
    assert not dt.to_df().filter("id IN (1, 2, 4, 50, 119)").count()


def _plan(source: DataFrame, condition: str, clauses: list[MergeClause]) -> object:
    target = to_delta_schema(source.sparkSession.createDataFrame([], SCHEMA).schema)
    return merge_driver_source.plan_driver_source(
        source, condition, schema=target, target_alias="t", clauses=clauses, row_id="row"
    )


def test_merges_the_driver_cannot_decide_exactly_stay_in_spark(spark: SparkSession) -> None:
    source = _source(spark).alias("s")
    update = [MergeClause(ClauseKind.MATCHED_UPDATE)]
    assert _plan(source, "t.id = s.id", update) is not None
    assert _plan(source, "t.id = s.id AND t.k = s.k", update) is not None
    # A condition on a matched clause, a non-key conjunct, a computed key, a float key.
    conditional = [MergeClause(ClauseKind.MATCHED_UPDATE, condition="s.v > 0")]
    assert _plan(source, "t.id = s.id", conditional) is None
    assert _plan(source, "t.id = s.id AND s.v > 0", update) is None
    assert _plan(source, "t.id = s.id + 1", update) is None
    assert _plan(source, "t.v = s.v", update) is None
    # A key of another type (Spark casts it), a column type Arrow might not carry exactly.
    as_int = source.withColumn("id", F.col("id").cast("int")).alias("s")
    assert _plan(as_int, "t.id = s.id", update) is None
    stamped = source.withColumn("at", F.current_timestamp()).alias("s")
    assert _plan(stamped, "t.id = s.id", update) is None
    # Spark's estimate of the source decides, without a job; a source it cannot size is
    # cached and counted first.
    assert merge_driver_source.fits(None, merge_driver_source.source_size(source))
    big = spark.range(10**12).select(F.col("id"), F.lit("k").alias("k"))
    assert not merge_driver_source.fits(None, merge_driver_source.source_size(big))
    unknown = spark.createDataFrame([(1, "k1", 1.0, 1)], SCHEMA)
    assert merge_driver_source.source_size(unknown) is None
    assert merge_driver_source.fits(10, 1000)
    assert not merge_driver_source.fits(merge_driver_source.DRIVER_SOURCE_ROWS + 1, 1000)


def test_a_source_spark_cannot_size_is_counted_then_matched_on_the_driver(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _target(spark, tmp_path, dv=True)
    dt = DeltaTable.for_path(spark, str(tmp_path))
    calls = _spy(monkeypatch)
    source = spark.createDataFrame([(1, "x", 1.0, 1), (1000, "y", 2.0, 2)], SCHEMA)
    m = (
        dt.alias("t")
        .merge(source.alias("s"), "t.id = s.id")
        .when_matched_update_all()
        .when_not_matched_insert_all()
        .execute()
    )
    assert calls == [True]
    assert (m.num_source_rows, m.num_target_rows_updated, m.num_target_rows_inserted) == (2, 1, 1)
    got = {r.id: (r.k, r.v, r.n) for r in dt.to_df().filter("id IN (1, 1000)").collect()}
    assert got == {1: ("x", 1.0, 1), 1000: ("y", 2.0, 2)}
    # Over the row cap, the same merge stays in Spark.
    monkeypatch.setattr(merge_driver_source, "DRIVER_SOURCE_ROWS", 1)
    again = spark.createDataFrame([(2, "x", 1.0, 1), (1001, "y", 2.0, 2)], SCHEMA)
    m = (
        dt.alias("t")
        .merge(again.alias("s"), "t.id = s.id")
        .when_matched_update_all()
        .when_not_matched_insert_all()
        .execute()
    )
    assert calls == [True]
    assert (m.num_target_rows_updated, m.num_target_rows_inserted) == (1, 1)
