"""delta-rs (the ``deltalake`` package) and deltatx on the same tables, both directions."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import unquote

import pyarrow as pa
import pytest
from deltalake import DeltaTable as RsTable
from deltalake import QueryBuilder, write_deltalake
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

import deltatx
from deltatx import DeltaTable
from deltatx.log.delta_log import DeltaLog


def _events(spark: SparkSession, start: int, n: int, day: str) -> DataFrame:
    return spark.range(start, start + n).select(
        F.col("id"), F.lit(day).alias("date"), (F.col("id") % 7).cast("int").alias("k")
    )


def _sorted_ids(table: pa.Table) -> list[int]:
    return sorted(table.column("id").to_pylist())


def _read_with_delta_rs(table: RsTable) -> pa.Table:
    """delta-rs's full read; its DataFusion engine is the path that honours deletion vectors."""
    if "deletionVectors" in (table.protocol().reader_features or []):
        reader = QueryBuilder().register("t", table).execute("SELECT * FROM t")
        return pa.table(reader.read_all())
    return table.to_pyarrow_table()


@pytest.mark.parametrize("deletion_vectors", [False, True], ids=["no-dv", "dv"])
@pytest.mark.parametrize("partition_by", [None, ["date"]], ids=["flat", "partitioned"])
def test_delta_rs_reads_what_deltatx_writes(
    spark: SparkSession, table_dir: Path, partition_by: list[str] | None, deletion_vectors: bool
) -> None:
    path = str(table_dir)
    properties = {
        "delta.checkpointInterval": "3",
        "delta.enableDeletionVectors": str(deletion_vectors).lower(),
    }
    for i, day in enumerate(["2024-01-01", "2024-01-02", "2024-01-03", "2024-01-04"]):
        deltatx.write(
            _events(spark, i * 10, 10, day),
            path,
            partition_by=partition_by,
            properties=properties if i == 0 else None,
        )
    deltatx.write(
        _events(spark, 500, 4, "2024-01-02"),
        path,
        mode="overwrite",
        replace_where="date = '2024-01-02'",
    )
    assert (table_dir / "_delta_log" / "00000000000000000003.checkpoint.parquet").exists()
    ours = DeltaTable.for_path(spark, path)
    rs = RsTable(path)
    assert rs.version() == ours.version() == 4
    theirs = _read_with_delta_rs(rs)
    assert _sorted_ids(theirs) == sorted(r["id"] for r in ours.to_df().collect())
    if partition_by:
        assert rs.metadata().partition_columns == ["date"]
        pairs = zip(theirs.column("date").to_pylist(), theirs.column("id").to_pylist(), strict=True)
        assert sorted(i for d, i in pairs if d == "2024-01-02") == [500, 501, 502, 503]
    assert _sorted_ids(_read_with_delta_rs(RsTable(path, version=0))) == list(range(10))
    if deletion_vectors:
        DeltaTable.for_path(spark, path).delete("id % 4 = 0")
        rs = RsTable(path)
        live = DeltaTable.for_path(spark, path).snapshot().add_files()
        assert any(f.deletion_vector is not None for f in live), "the delete wrote no DV"
        assert _sorted_ids(_read_with_delta_rs(rs)) == sorted(
            r["id"] for r in DeltaTable.for_path(spark, path).to_df().collect()
        )


def test_deltatx_reads_what_delta_rs_writes(spark: SparkSession, table_dir: Path) -> None:
    path = str(table_dir)
    for i in range(3):
        data = pa.table(
            {
                "id": pa.array(range(i * 10, i * 10 + 10), pa.int64()),
                "date": pa.array([f"2024-01-0{i + 1}"] * 10),
            }
        )
        write_deltalake(path, data, mode="append", partition_by=["date"])
    rs = RsTable(path)
    rs.delete("id < 5")
    rs.create_checkpoint()
    write_deltalake(
        path,
        pa.table({"id": pa.array([100], pa.int64()), "date": ["2024-02-01"]}),
        mode="append",
        partition_by=["date"],
    )
    rs = RsTable(path)
    log = DeltaLog.for_table(path)
    snap = log.snapshot()
    assert snap.version == rs.version()
    theirs_paths = rs.get_add_actions(flatten=True).column("path").to_pylist()
    assert {unquote(f.path) for f in snap.add_files()} == {unquote(p) for p in theirs_paths}
    ours = DeltaTable.for_path(spark, path).to_df()
    assert sorted(r["id"] for r in ours.collect()) == _sorted_ids(rs.to_pyarrow_table())
    # and deltatx can keep writing the table delta-rs created
    deltatx.write(spark.createDataFrame([(200, "2024-03-01")], "id BIGINT, date STRING"), path)
    assert 200 in _sorted_ids(RsTable(path).to_pyarrow_table())
