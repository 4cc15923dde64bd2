"""MERGE with deletion vectors writing its new rows on the driver: the same table as Spark's.

When the updated and inserted rows take every column from the source, a MERGE whose source
the driver holds writes them with pyarrow from its copy of the source. Each case runs on
copies of one table, once so and once forced onto the Spark path, and compares the rows,
the metrics and the written files' statistics; the cases the driver must leave to Spark's
write (expressions, casts, the caps) are checked to do so and to agree as well.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

import deltatx
from deltatx import DeltaTable
from deltatx.errors import InvalidConditionError
from deltatx.kernel.actions import AddFile
from deltatx.kernel.metrics import MergeMetrics
from deltatx.log.delta_log import DeltaLog
from deltatx.spark.commands import (
    driver_update,
    merge_driver_source,
    merge_driver_write,
    merge_from_source,
)

from .test_merge_driver import merge_counts, null_heavy_rows

SCHEMA = "id BIGINT, k STRING, v DOUBLE, n INT"

Merge = Callable[[DeltaTable, DataFrame], MergeMetrics]


def _target(
    spark: SparkSession, path: Path, *, partition_by: list[str] | None = None, **props: str
) -> None:
    data = null_heavy_rows(spark)
    deltatx.write(
        data.repartitionByRange(4, "id"),
        str(path),
        partition_by=partition_by,
        properties={"delta.enableDeletionVectors": "true", **props},
    )
    DeltaTable.for_path(spark, str(path)).delete("id IN (3, 40, 41, 90)")


def _source(spark: SparkSession, *, nan: bool = False) -> DataFrame:
    rows: list[tuple[Any, ...]] = [
        (1, "k1", 10.0, 1),
        (2, None, None, 2),
        (3, "k3", float("nan") if nan else 3.5, None),  # deleted before the merge: inserted
        (4, "k0", -4.0, 4),
        (None, "k1", 5.0, 5),  # a NULL key matches nothing: inserted
        (50, "k2", float("-inf"), None),
        (119, "k3", 1.0, 7),
        (500, "k0", 0.0, 0),
        (501, None, -1.0, None),
    ]
    source = spark.createDataFrame(rows, SCHEMA).cache()
    source.count()
    return source


def _upsert(dt: DeltaTable, s: DataFrame) -> MergeMetrics:
    return (
        dt.alias("t")
        .merge(s.alias("s"), "t.id = s.id")
        .when_matched_update_all()
        .when_not_matched_insert_all()
        .execute()
    )


# Cases the driver writes.
ON_DRIVER: dict[str, Merge] = {
    "upsert all": _upsert,
    "source columns named, the insert leaves some NULL": lambda dt, s: (
        dt.alias("t")
        .merge(s.alias("src"), "t.id = src.id")
        .when_matched_update(set={"id": "src.id", "K": "`src`.`k`", "v": "SRC.V", "n": "src.n"})
        .when_not_matched_insert(values={"id": "src.id", "v": "src.v"})
        .execute()
    ),
    "delete matched, insert the rest": lambda dt, s: (
        dt.alias("t")
        .merge(s.alias("s"), "t.id = s.id")
        .when_matched_delete()
        .when_not_matched_insert_all()
        .when_not_matched_insert(values={"id": "s.id"})  # never reached
        .execute()
    ),
    "delete matched alone": lambda dt, s: (
        dt.alias("t").merge(s.alias("s"), "t.id = s.id").when_matched_delete().execute()
    ),
    "update only, another column order": lambda dt, s: (
        dt.alias("t")
        .merge(s.select("n", "v", "k", "id").alias("s"), "t.id = s.id")
        .when_matched_update_all()
        .execute()
    ),
}

# Cases that keep the Spark write.
IN_SPARK: dict[str, Merge] = {
    "an update reading the target": lambda dt, s: (
        dt.alias("t")
        .merge(s.alias("s"), "t.id = s.id")
        .when_matched_update(set={"v": "s.v", "n": "s.n"})
        .when_not_matched_insert_all()
        .execute()
    ),
    "an expression": lambda dt, s: (
        dt.alias("t")
        .merge(s.alias("s"), "t.id = s.id")
        .when_matched_update_all()
        .when_not_matched_insert(values={"id": "s.id", "n": "s.n + 1"})
        .execute()
    ),
    "a conditional insert first": lambda dt, s: (
        dt.alias("t")
        .merge(s.alias("s"), "t.id = s.id")
        .when_matched_update_all()
        .when_not_matched_insert_all(condition="s.n IS NOT NULL")
        .execute()
    ),
    "a source column Spark casts": lambda dt, s: (
        dt.alias("t")
        .merge(s.withColumn("n", F.col("n").cast("bigint")).alias("s"), "t.id = s.id")
        .when_matched_update_all()
        .when_not_matched_insert_all()
        .execute()
    ),
    "a Column value": lambda dt, s: (
        dt.alias("t")
        .merge(s.alias("s"), "t.id = s.id")
        .when_matched_update_all()
        .when_not_matched_insert(values={"id": F.col("s.id")})
        .execute()
    ),
}


def driver_write_spy(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Records the rows of each write on the driver."""
    calls: list[int] = []
    real = merge_from_source.write_rows

    def spy(txn: Any, rows: Any) -> Any:
        calls.append(rows.num_rows)
        return real(txn, rows)

    def copy_on_write_spy(txn: Any, candidates: Any, changed: Any, rows: Any) -> Any:
        calls.append(rows.num_rows)
        return real_rewrite(txn, candidates, changed, rows)

    real_rewrite = merge_from_source.rewrite_for_merge
    monkeypatch.setattr(merge_from_source, "write_rows", spy)
    monkeypatch.setattr(merge_from_source, "rewrite_for_merge", copy_on_write_spy)
    return calls


def _rows(dt: DeltaTable) -> list[tuple[object, ...]]:
    return sorted((tuple(repr(v) for v in r) for r in dt.to_df().collect()), key=repr)


def _both(
    spark: SparkSession,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    merge: Merge,
    *,
    partition_by: list[str] | None = None,
    nan: bool = False,
    copy_on_write: bool = False,
    **props: str,
) -> tuple[list[int], Path]:
    """Runs ``merge`` on the driver path and on the Spark path; returns the driver writes."""
    template = tmp_path / "template"
    _target(spark, template, partition_by=partition_by, **props)
    if copy_on_write:
        # Rows deleted by the vectors written before must stay deleted in the copies.
        DeltaTable.for_path(spark, str(template)).set_properties(
            {"delta.enableDeletionVectors": "false"}
        )
    on_driver, in_spark = tmp_path / "driver", tmp_path / "spark"
    shutil.copytree(template, on_driver)
    shutil.copytree(template, in_spark)
    calls = driver_write_spy(monkeypatch)
    got = merge(DeltaTable.for_path(spark, str(on_driver)), _source(spark, nan=nan))
    written = list(calls)
    with monkeypatch.context() as m:
        m.setattr(merge_driver_source, "DRIVER_SOURCE_BYTES", -1)
        expected = merge(DeltaTable.for_path(spark, str(in_spark)), _source(spark, nan=nan))
    assert calls == written, "the forced merge should have written in Spark"
    assert _rows(DeltaTable.for_path(spark, str(on_driver))) == _rows(
        DeltaTable.for_path(spark, str(in_spark))
    )
    assert merge_counts(got) == merge_counts(expected)
    return written, on_driver


@pytest.mark.parametrize("case", sorted(ON_DRIVER))
def test_merge_writes_on_the_driver_what_spark_writes(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    written, _ = _both(spark, tmp_path, monkeypatch, ON_DRIVER[case])
    # Deletes alone need no file: the deletion vectors are the change.
    assert written == ([] if case == "delete matched alone" else [written[0]])
    assert not written or written[0] > 0


@pytest.mark.parametrize(
    "case",
    ["upsert all", "delete matched alone", "source columns named, the insert leaves some NULL"],
)
def test_copy_on_write_merge_copies_the_touched_files_on_the_driver(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    written, table = _both(spark, tmp_path, monkeypatch, ON_DRIVER[case], copy_on_write=True)
    assert len(written) == 1
    # No file of the new version carries a deletion vector: the touched files were rewritten.
    assert not any(f.deletion_vector for f in DeltaLog.for_table(str(table)).snapshot().add_files())


def test_copy_on_write_merge_past_the_caps_keeps_the_spark_write(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every live row of a touched file counts, not only the rows the merge writes.
    monkeypatch.setattr(driver_update, "DRIVER_UPDATE_ROWS", 20)
    written, _ = _both(spark, tmp_path, monkeypatch, _upsert, copy_on_write=True)
    assert written == []


@pytest.mark.sample(every=2)
@pytest.mark.parametrize("case", sorted(IN_SPARK))
def test_merges_the_driver_cannot_write_exactly_keep_the_spark_write(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    written, _ = _both(spark, tmp_path, monkeypatch, IN_SPARK[case])
    assert written == []


@pytest.mark.parametrize(
    ("partition_by", "props"),
    [
        (["k"], {}),
        (None, {"delta.columnMapping.mode": "name"}),
        (["k"], {"delta.columnMapping.mode": "name"}),
    ],
    ids=["partitioned", "column-mapping", "partitioned-column-mapping"],
)
def test_driver_written_merge_on_partitions_and_column_mapping(
    spark: SparkSession,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    partition_by: list[str] | None,
    props: dict[str, str],
) -> None:
    written, _ = _both(spark, tmp_path, monkeypatch, _upsert, partition_by=partition_by, **props)
    assert len(written) == 1


def test_driver_written_files_carry_exact_statistics(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    written, table = _both(spark, tmp_path, monkeypatch, _upsert)
    assert written == [9]  # 4 updated (1, 2, 50, 119), 5 inserted
    log = DeltaLog.for_table(str(table))
    # The touched files come back with their deletion vectors; the new file has none.
    adds = [
        a
        for a in log.read_commit(log.latest_version())
        if isinstance(a, AddFile) and a.deletion_vector is None
    ]
    assert len(adds) == 1
    stats = json.loads(adds[0].stats or "{}")
    data = pq.read_table(table / adds[0].path).to_pylist()
    assert stats["numRecords"] == len(data) == 9
    for column in ("id", "k", "v", "n"):
        values = [r[column] for r in data if r[column] is not None]
        assert stats["nullCount"][column] == len(data) - len(values)
        # v holds -inf, which JSON bounds may leave out (no bound is always safe).
        bounds = (stats["minValues"].get(column), stats["maxValues"].get(column))
        if column != "v" or bounds != (None, None):
            assert bounds == (min(values), max(values))


def test_a_nan_to_write_is_written_on_the_driver_and_found(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    written, table = _both(spark, tmp_path, monkeypatch, _upsert, nan=True)
    assert written == [9]
    # Spark's Parquet filters must not skip the row group that holds the NaN.
    frame = DeltaTable.for_path(spark, str(table)).to_df()
    for condition in ("v > 1e300", "v = double('NaN')"):
        assert [r.id for r in frame.filter(condition).collect()] == [3], condition


def test_driver_write_caps_fall_back_to_the_spark_write(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(merge_driver_write, "DRIVER_WRITE_ROWS", 8)
    written, _ = _both(spark, tmp_path / "rows", monkeypatch, _upsert)
    assert written == []
    monkeypatch.setattr(merge_driver_write, "DRIVER_WRITE_ROWS", 9)
    written, _ = _both(spark, tmp_path / "at-cap", monkeypatch, _upsert)
    assert written == [9]
    monkeypatch.setattr(merge_driver_write, "DRIVER_WRITE_BYTES", 10)
    written, _ = _both(spark, tmp_path / "bytes", monkeypatch, _upsert)
    assert written == []


def test_driver_write_leaves_tables_with_checks_to_spark(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    written, _ = _both(
        spark,
        tmp_path,
        monkeypatch,
        _upsert,
        **{"delta.constraints.id_positive": "id IS NULL OR id >= 0"},
    )
    assert written == []


@pytest.mark.parametrize("alias", ["x", None])
def test_a_condition_naming_another_alias_is_refused_before_anything_is_written(
    spark: SparkSession, tmp_path: Path, alias: str | None
) -> None:
    _target(spark, tmp_path)
    dt = DeltaTable.for_path(spark, str(tmp_path))
    version = dt.version()
    source = _source(spark)
    with pytest.raises(InvalidConditionError, match="merge does not resolve"):
        (
            dt.alias("t")
            .merge(source.alias(alias) if alias else source, "t.id = s.id")
            .when_matched_update_all()
            .when_not_matched_insert_all()
            .execute()
        )
    assert dt.version() == version
