"""A NaN is found by every filter, whichever way deltatx wrote its file with pyarrow.

Spark orders NaN above every number and pushes ``v > x`` and ``v = NaN`` into the Parquet
reader, which skips a row group whose footer bounds exclude ``x``; pyarrow leaves NaN out of
those bounds. Oracle: the same rows written by Spark's own Parquet writer, filtered alike.
Each pyarrow door is checked: the ``format("delta")`` save, the driver UPDATE, the
driver-written MERGE and the executors' writer (tables Spark cannot reach).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from pyspark.sql import DataFrame, SparkSession

import deltatx
from deltatx import DeltaTable
from deltatx.kernel.actions import AddFile
from deltatx.log.delta_log import DeltaLog
from deltatx.spark import arrow_files
from deltatx.spark import write as spark_write
from deltatx.spark.commands import driver_update, update
from deltatx.storage.location import Location

from .test_merge_driver_write import driver_write_spy

pytestmark = pytest.mark.spark

NAN = float("nan")
INF = float("inf")
SCHEMA = "id BIGINT, v DOUBLE, f FLOAT, s STRUCT<y: DOUBLE, x: STRING>, n INT"
ROWS: list[tuple[Any, ...]] = [
    (1, 1.5, 1.5, (1.5, "a"), 1),
    (2, NAN, NAN, (NAN, "b"), 2),
    (3, 3.0, 3.0, (3.0, "c"), 3),
    (4, None, None, None, 4),
    (5, -0.0, 0.0, (None, "e"), 5),
    (6, -INF, -INF, (-INF, "f"), 6),
    (7, 2.5, 2.5, (2.5, "g"), 7),
]
NAN_IDS = {2}
FILTERS = [
    "v > 1e300",
    "v = double('NaN')",
    "v >= 2",
    "v < 0",
    "v IS NULL",
    "f > 1e30",
    "f = float('NaN')",
    "s.y > 1e300",
    "s.y = double('NaN')",
    "s.y IS NULL",
]


def _frame(spark: SparkSession, ids: set[int] | None = None, *, flat: bool = False) -> DataFrame:
    """ROWS (those of ``ids``); ``flat``: without the struct (the driver MERGE takes none)."""
    rows = [r for r in ROWS if ids is None or r[0] in ids]
    frame = spark.createDataFrame(rows, SCHEMA).coalesce(1)
    return frame.drop("s") if flat else frame


def _filters(frame: DataFrame) -> list[str]:
    return [f for f in FILTERS if f.split(".")[0].split(" ")[0] in frame.columns]


def _ids(df: DataFrame) -> list[int]:
    return sorted(r.id for r in df.select("id").collect())


def _oracle(spark: SparkSession, folder: Path, rows: DataFrame) -> dict[str, list[int]]:
    """What each filter finds in Spark's own Parquet files of ``rows``."""
    rows.write.parquet(str(folder))
    found = {f: _ids(spark.read.parquet(str(folder)).filter(f)) for f in _filters(rows)}
    assert set(found["v > 1e300"]) >= NAN_IDS & set(_ids(rows))
    return found


def _assert_found(
    spark: SparkSession, tmp_path: Path, new_rows: DataFrame, path: str, files: list[str]
) -> None:
    """The new files and the table (every row of ROWS) find what Spark's own files find."""
    in_files = _oracle(spark, tmp_path / "oracle-files", new_rows)
    flat = "s" not in new_rows.columns
    in_table = _oracle(spark, tmp_path / "oracle-table", _frame(spark, flat=flat))
    readers = {
        "parquet": (spark.read.parquet(*files), in_files),
        "format('delta')": (spark.read.format("delta").load(path), in_table),
        "to_df": (DeltaTable.for_path(spark, path).to_df(), in_table),
    }
    for how, (frame, expected) in readers.items():
        for condition in _filters(new_rows):
            assert _ids(frame.filter(condition)) == expected[condition], (how, condition)


def _assert_no_float_footer_bounds(files: list[str]) -> None:
    for file in files:
        metadata = pq.read_metadata(file)
        for g in range(metadata.num_row_groups):
            group = metadata.row_group(g)
            for c in range(group.num_columns):
                column = group.column(c)
                if column.physical_type in ("FLOAT", "DOUBLE"):
                    stats = column.statistics
                    assert stats is None or not stats.has_min_max, (file, column.path_in_schema)


def _new_files(path: str) -> list[AddFile]:
    """The files the table's last commit added without a deletion vector."""
    log = DeltaLog.for_table(path)
    return [
        a
        for a in log.read_commit(log.latest_version())
        if isinstance(a, AddFile) and a.deletion_vector is None
    ]


def _assert_nan_file_stats(path: str, adds: list[AddFile]) -> None:
    """Files holding a NaN have no bounds for its columns, and every file counts its NULLs."""
    for add in adds:
        stats = json.loads(add.stats or "{}")
        data = pq.read_table(f"{path}/{add.path}").to_pylist()
        assert stats["numRecords"] == len(data)
        assert stats["nullCount"]["v"] == sum(r["v"] is None for r in data)
        assert stats["nullCount"]["f"] == sum(r["f"] is None for r in data)
        if "s" in data[0]:
            nulls = sum(r["s"] is None or r["s"]["y"] is None for r in data)
            assert stats["nullCount"]["s"]["y"] == nulls
        if any(r["v"] is not None and math.isnan(r["v"]) for r in data):
            assert "v" not in stats["minValues"] and "v" not in stats["maxValues"]
            assert "y" not in stats["minValues"].get("s", {})


def _table(spark: SparkSession, path: str, ids: set[int], *, flat: bool = False) -> None:
    deltatx.write(
        _frame(spark, ids, flat=flat), path, properties={"delta.enableDeletionVectors": "true"}
    )


def test_format_delta_save(spark: SparkSession, tmp_path: Path) -> None:
    path = str(tmp_path / "table")
    _frame(spark).write.format("delta").save(path)
    adds = _new_files(path)
    files = [f"{path}/{a.path}" for a in adds]
    _assert_no_float_footer_bounds(files)
    _assert_nan_file_stats(path, adds)
    _assert_found(spark, tmp_path, _frame(spark), path, files)


def test_driver_update(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = str(tmp_path / "table")
    _table(spark, path, {r[0] for r in ROWS})
    wrote: list[Any] = []

    def spy(*args: Any, **kwargs: Any) -> Any:
        out = driver_update.update_on_driver(*args, **kwargs)
        wrote.append(out)
        return out

    monkeypatch.setattr(update, "update_on_driver", spy)
    DeltaTable.for_path(spark, path).update("id IN (1, 2, 3, 5)", set={"n": "n + 10"})
    assert wrote and wrote[0] is not None, "the UPDATE should have written on the driver"
    adds = _new_files(path)
    files = [f"{path}/{a.path}" for a in adds]
    _assert_no_float_footer_bounds(files)
    _assert_nan_file_stats(path, adds)
    _assert_found(spark, tmp_path, _frame(spark, {1, 2, 3, 5}), path, files)


def test_driver_written_merge(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = str(tmp_path / "table")
    _table(spark, path, {1, 3, 4}, flat=True)
    calls = driver_write_spy(monkeypatch)
    source = _frame(spark, flat=True).cache()
    source.count()
    (
        DeltaTable.for_path(spark, path)
        .alias("t")
        .merge(source.alias("s"), "t.id = s.id")
        .when_matched_update_all()
        .when_not_matched_insert_all()
        .execute()
    )
    assert calls == [len(ROWS)], "the MERGE should have written its rows on the driver"
    adds = _new_files(path)
    files = [f"{path}/{a.path}" for a in adds]
    _assert_no_float_footer_bounds(files)
    _assert_nan_file_stats(path, adds)
    _assert_found(spark, tmp_path, _frame(spark, flat=True), path, files)


def test_the_executors_writer_of_tables_spark_cannot_reach(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = str(tmp_path / "table")
    (tmp_path / "table").mkdir()  # on an object store, where this writer runs, no folders
    monkeypatch.setattr(spark_write, "spark_reaches", lambda *_: False)
    deltatx.write(_frame(spark), path)
    adds = _new_files(path)
    files = [f"{path}/{a.path}" for a in adds]
    _assert_no_float_footer_bounds(files)
    _assert_nan_file_stats(path, adds)
    monkeypatch.undo()
    _assert_found(spark, tmp_path, _frame(spark), path, files)
    # Files written in groups (compaction's bins) take the same writer.
    grouped = tmp_path / "grouped"
    written = arrow_files.write_files(
        _frame(spark).selectExpr("*", "id % 2 AS g"),
        Location.of(str(grouped)),
        group_column="g",
        group_directories={0: "even", 1: "odd"},
    )
    files = [str(grouped / rel) for rel, _ in written]
    _assert_no_float_footer_bounds(files)
    assert _ids(spark.read.parquet(*files).filter("v > 1e300")) == sorted(NAN_IDS)
