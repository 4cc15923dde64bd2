"""Compaction without deletion vectors: each output keeps its sources' rows in tag order.

Such bins are read by Spark's plain scan and ordered by the path Spark reports for each row
(:mod:`deltatx.spark.commands.compaction_read`); the sources are then listed in that order,
which need not be the order of the log's paths.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

import deltatx
from deltatx import DeltaTable
from deltatx.kernel.actions import AddFile
from deltatx.kernel.operations import Operation, OperationName
from deltatx.kernel.row_level.provenance import SOURCES_TAG, segments_of
from deltatx.log.transaction import OptimisticTransaction
from deltatx.spark.commands.compaction_read import _directory_of_exactly, read_in_path_order
from deltatx.spark.write import TableLocation, decode_uri_path, encode_uri_path
from deltatx.storage.location import Location


def _table(spark: SparkSession, path: Path, *, files: int, partitioned: bool) -> DeltaTable:
    """Ids 0..99 spread over ``files`` appends (a file per partition and append)."""
    data = spark.range(0, 100).select(
        "id", (F.col("id") * 10).alias("v"), (F.col("id") % 2).alias("p")
    )
    for i in range(files):
        deltatx.write(
            data.filter(F.col("id") % files == i).coalesce(1),
            str(path),
            partition_by=["p"] if partitioned else None,
        )
    return DeltaTable.for_path(spark, str(path))


def _rows_by_source(dt: DeltaTable) -> dict[str, list[int]]:
    out = {}
    location = dt.log.location
    for f in dt.snapshot().add_files():
        table = pq.read_table(location.file(f.path), filesystem=location.fs)
        out[f.path] = table.column("id").to_pylist()
    return out


def _assert_outputs_trace(dt: DeltaTable, before: dict[str, list[int]]) -> list[list[str]]:
    """Every output is its segments' rows in order; returns each output's source paths."""
    orders = []
    for out in dt.snapshot().add_files():
        assert out.tags is not None and SOURCES_TAG in out.tags
        assert not out.data_change
        segments = segments_of(out)
        assert segments is not None
        want = [r for s in segments for r in before[s.path]]
        assert [s.live_rows for s in segments] == [len(before[s.path]) for s in segments]
        location = dt.log.location
        got = pq.read_table(location.file(out.path), filesystem=location.fs)
        assert got.column("id").to_pylist() == want
        stats = json.loads(out.stats or "{}")
        assert stats["numRecords"] == len(want)
        assert (stats["minValues"]["id"], stats["maxValues"]["id"]) == (min(want), max(want))
        orders.append([s.path for s in segments])
    return orders


@pytest.mark.parametrize("partitioned", [False, True])
def test_outputs_keep_source_order_without_deletion_vectors(
    spark: SparkSession, table_dir: Path, partitioned: bool
) -> None:
    dt = _table(spark, table_dir, files=5, partitioned=partitioned)
    before = _rows_by_source(dt)
    metrics = dt.optimize().execute_compaction()
    assert metrics.num_removed_files == len(before)
    assert metrics.num_added_files == (2 if partitioned else 1)
    _assert_outputs_trace(dt, before)
    assert sorted(r["id"] for r in dt.to_df().collect()) == list(range(100))


def _rename(dt: DeltaTable, table_dir: Path, names: list[tuple[str, str]]) -> None:
    """Renames the table's files to ``(name on disk, path in the log)``, in one commit."""
    log = dt.log
    txn = OptimisticTransaction(log, log.snapshot())
    files = sorted(txn.scan(), key=lambda f: f.path)
    renamed: list[AddFile] = []
    for add, (name, logged) in zip(files, names, strict=True):
        (table_dir / decode_uri_path(add.path)).rename(table_dir / name)
        renamed.append(dataclasses.replace(add, path=logged))
    txn.remove_files(files, data_change=False)
    txn.add_files(renamed)
    txn.record_operation(Operation(OperationName.MANUAL_UPDATE, {}), {})
    txn.commit()


def test_sources_are_listed_in_the_order_spark_sorts_their_paths(
    spark: SparkSession, table_dir: Path
) -> None:
    """The log may spell a path otherwise than Spark reports it: "%C3%A9" sorts first as
    the log spells it and last as Spark reports it (raw UTF-8), "[" is encoded by Spark."""
    dt = _table(spark, table_dir, files=4, partitioned=False)
    _rename(
        dt,
        table_dir,
        [
            ("é.parquet", "%C3%A9.parquet"),
            ("f.parquet", "f.parquet"),
            ("a b.parquet", "a%20b.parquet"),
            ("z[1].parquet", "file://" + encode_uri_path(f"{table_dir}/z[1].parquet")),
        ],
    )
    before = _rows_by_source(dt)
    dt.optimize().execute_compaction()
    (order,) = _assert_outputs_trace(dt, before)
    assert order[0] == "a%20b.parquet" and order[-1] == "%C3%A9.parquet"


def test_bins_with_deletion_vectors_are_read_by_file_index(
    spark: SparkSession, table_dir: Path
) -> None:
    dt = _table(spark, table_dir, files=3, partitioned=False)
    dt.delete("id IN (3, 4)")
    files = dt.snapshot().add_files()
    assert any(f.deletion_vector is not None for f in files)
    schema = dt.snapshot().schema
    location = TableLocation.parse(dt.log.table_path)
    assert (
        read_in_path_order(
            spark,
            location=location,
            files=files,
            physical_data_schema=schema,
            column_mapping="none",
        )
        is None
    )
    dt.optimize().execute_compaction()
    ids = sorted(r["id"] for r in dt.to_df().collect())
    assert ids == [i for i in range(100) if i not in (3, 4)]


@pytest.mark.parametrize("mode", ["name", "id"])
def test_column_mapping_tables_compact_by_physical_names(
    spark: SparkSession, table_dir: Path, mode: str
) -> None:
    """A renamed column and one added later (NULL in older files) survive compaction."""
    first = spark.createDataFrame([(1, "a"), (2, "b")], "id BIGINT, name STRING")
    deltatx.write(first, str(table_dir), properties={"delta.columnMapping.mode": mode})
    dt = DeltaTable.for_path(spark, str(table_dir))
    dt.rename_column("name", "label")
    later = spark.createDataFrame([(3, "c", 7)], "id BIGINT, label STRING, n INT")
    deltatx.write(later, str(table_dir), mode="append", merge_schema=True)
    before = dt.snapshot().add_files()
    metrics = dt.optimize().execute_compaction()
    assert (metrics.num_removed_files, metrics.num_added_files) == (len(before), 1)
    rows = sorted(tuple(r) for r in dt.to_df().collect())
    assert rows == [(1, "a", None), (2, "b", None), (3, "c", 7)]
    (out,) = dt.snapshot().add_files()
    assert json.loads(out.stats or "{}")["numRecords"] == 3


def test_a_directory_is_read_whole_only_when_spark_lists_exactly_the_bin(tmp_path: Path) -> None:
    root = Location.of(str(tmp_path))
    names = ["a.parquet", "b.parquet"]
    for name in [*names, ".a.parquet.crc", "_SUCCESS"]:
        (tmp_path / name).write_bytes(b"x")
    (tmp_path / "_delta_log").mkdir()
    canonical = [f"{tmp_path}/{n}" for n in names]
    assert _directory_of_exactly(root, canonical) == str(tmp_path)
    assert _directory_of_exactly(root, canonical[:1]) is None  # b.parquet is not in the bin
    (tmp_path / "p=1").mkdir()  # Spark's recursive listing would go in
    assert _directory_of_exactly(root, canonical) is None
    (tmp_path / "p=1").rmdir()
    (tmp_path / "_metadata").write_bytes(b"x")  # a summary file Spark lists
    assert _directory_of_exactly(root, canonical) is None


def test_a_stray_file_beside_the_sources_is_not_compacted(
    spark: SparkSession, table_dir: Path
) -> None:
    """A Parquet file the log does not name (a failed writer's leftover) lies in the directory."""
    dt = _table(spark, table_dir, files=3, partitioned=False)
    spark.range(1000, 1010).select("id", F.col("id").alias("v"), F.col("id").alias("p")).coalesce(
        1
    ).write.parquet(str(table_dir / "_stray"))
    (stray,) = (table_dir / "_stray").glob("*.parquet")
    stray.rename(table_dir / "stray.parquet")
    before = _rows_by_source(dt)
    dt.optimize().execute_compaction()
    _assert_outputs_trace(dt, before)
    assert sorted(r["id"] for r in dt.to_df().collect()) == list(range(100))
