"""A table on S3 end to end, with Spark but without an S3 connector in Spark.

This session has no Hadoop S3A connector, so every data file is written and read by pyarrow
in the executors; the log goes through the S3 LogStore. Every operation a local table has
must work: create, append, DELETE, UPDATE, MERGE, OPTIMIZE, REORG, VACUUM, RESTORE, time
travel, checkpoints, deletion vectors, SQL and ``format("delta")``.
"""

from __future__ import annotations

from typing import Any

import pytest
from pyspark.sql import SparkSession

import deltatx
from deltatx import DeltaTable
from deltatx.errors import SchemaMismatchError
from deltatx.log.delta_log import DeltaLog
from deltatx.spark.arrow_files import spark_reaches
from deltatx.storage.location import Location
from deltatx.storage.s3 import S3LogStore

pytestmark = pytest.mark.s3


def _rows(df: Any) -> list[tuple[Any, ...]]:
    return sorted(tuple(r) for r in df.collect())


def _objects(table: str, under: str = "") -> list[str]:
    return sorted(s.path for s in S3LogStore().walk(f"{table}/{under}".rstrip("/")))


def test_this_session_cannot_reach_s3_so_data_goes_through_arrow(
    spark: SparkSession, s3_table: str
) -> None:
    assert not spark_reaches(spark, Location.of(s3_table))


def test_create_append_delete_update_merge_time_travel(spark: SparkSession, s3_table: str) -> None:
    dt = DeltaTable.create(
        spark,
        s3_table,
        schema="id BIGINT, part STRING, v DOUBLE, ts TIMESTAMP",
        partition_by=["part"],
    )
    first = spark.createDataFrame(
        [(i, "a" if i % 2 else "b", float(i), None) for i in range(10)],
        "id BIGINT, part STRING, v DOUBLE, ts TIMESTAMP",
    )
    deltatx.write(first, s3_table, mode="append")
    assert dt.version() == 1
    data = [o for o in _objects(s3_table) if o.endswith(".parquet")]
    assert {o.split("/")[4] for o in data} == {"part=a", "part=b"}
    assert dt.to_df().count() == 10

    dt.delete("id < 3")
    dt.update("id = 5", {"v": "v * 10"})
    source = spark.createDataFrame(
        [(5, "a", -1.0), (42, "c", 4.2)], "id BIGINT, part STRING, v DOUBLE"
    )
    (
        dt.alias("t")
        .merge(source.alias("s"), "t.id = s.id")
        .when_matched_update(set={"v": "s.v"})
        .when_not_matched_insert(values={"id": "s.id", "part": "s.part", "v": "s.v"})
        .execute()
    )
    rows = {r["id"]: (r["part"], r["v"]) for r in dt.to_df().collect()}
    assert set(rows) == {3, 4, 5, 6, 7, 8, 9, 42}
    assert rows[5] == ("a", -1.0) and rows[42] == ("c", 4.2) and rows[4] == ("b", 4.0)
    assert dt.to_df(version=1).count() == 10
    assert dt.to_df(version=2).count() == 7
    assert [h["operation"] for h in dt.history().orderBy("version").collect()][:2] == [
        "CREATE TABLE",
        "WRITE",
    ]


def test_not_null_violation_writes_nothing(spark: SparkSession, s3_table: str) -> None:
    DeltaTable.create(spark, s3_table, schema="id BIGINT NOT NULL")
    with pytest.raises(SchemaMismatchError, match="NOT NULL"):
        deltatx.write(spark.createDataFrame([(None,)], "id BIGINT"), s3_table, mode="append")
    assert DeltaLog.for_table(s3_table).latest_version() == 0


def test_deletion_vectors_reorg_optimize_vacuum_restore_checkpoints(
    spark: SparkSession, s3_table: str
) -> None:
    dt = DeltaTable.create(
        spark,
        s3_table,
        schema="id BIGINT, v STRING",
        properties={"delta.enableDeletionVectors": "true", "delta.checkpointInterval": "3"},
    )
    for k in range(3):
        rows = [(k * 100 + i, f"r{i}") for i in range(20)]
        deltatx.write(spark.createDataFrame(rows, "id BIGINT, v STRING"), s3_table, mode="append")
    assert any(o.endswith(".checkpoint.parquet") for o in _objects(s3_table, "_delta_log"))
    dt.delete("id % 10 = 0")
    snapshot = DeltaLog.for_table(s3_table).snapshot()
    assert any(f.deletion_vector is not None for f in snapshot.add_files())
    assert dt.to_df().count() == 54
    after_delete = dt.version()

    dt.reorg_purge()
    assert all(
        f.deletion_vector is None for f in DeltaLog.for_table(s3_table).snapshot().add_files()
    )
    dt.optimize().execute_compaction()
    assert len(DeltaLog.for_table(s3_table).snapshot().add_files()) == 1
    assert _rows(dt.to_df()) == _rows(dt.to_df(version=after_delete))

    dt.restore_to_version(1)
    assert dt.to_df().count() == 20
    before = [o for o in _objects(s3_table) if o.endswith(".parquet") and "_delta_log" not in o]
    removed = dt.vacuum(retention_hours=0, enforce_retention=False)
    after = [o for o in _objects(s3_table) if o.endswith(".parquet") and "_delta_log" not in o]
    assert len(after) < len(before) and removed is not None
    assert dt.to_df().count() == 20
    # A fresh reader starts from the checkpoint and replays the rest.
    assert DeltaTable.for_path(spark, s3_table).to_df().count() == 20


def test_z_order_and_partitioned_compaction(spark: SparkSession, s3_table: str) -> None:
    for k in range(3):
        df = spark.createDataFrame(
            [(k * 10 + i, i % 3, f"p{i % 2}") for i in range(10)], "id BIGINT, x INT, p STRING"
        )
        deltatx.write(df, s3_table, mode="append", partition_by=["p"])
    dt = DeltaTable.for_path(spark, s3_table)
    expected = _rows(dt.to_df())
    dt.optimize().execute_z_order_by("x")
    files = DeltaLog.for_table(s3_table).snapshot().add_files()
    assert len(files) == 2 and {f.partition_values["p"] for f in files} == {"p0", "p1"}
    assert all(f.path.startswith(f"p={f.partition_values['p']}/") for f in files)
    assert _rows(dt.to_df()) == expected
    assert _rows(dt.to_df().where("p = 'p1'")) == [r for r in expected if r[2] == "p1"]


def test_sql_and_the_delta_data_source(spark: SparkSession, s3_table: str) -> None:
    deltatx.configure(spark)
    deltatx.sql(f"CREATE TABLE delta.`{s3_table}` (id BIGINT, name STRING) USING DELTA")
    deltatx.sql(f"INSERT INTO delta.`{s3_table}` VALUES (1, 'a'), (2, 'b'), (3, 'c')")
    deltatx.sql(f"UPDATE delta.`{s3_table}` SET name = 'B' WHERE id = 2")
    deltatx.sql(f"DELETE FROM delta.`{s3_table}` WHERE id = 3")
    assert _rows(deltatx.sql(f"SELECT * FROM delta.`{s3_table}`")) == [(1, "a"), (2, "B")]
    assert _rows(deltatx.sql(f"SELECT * FROM delta.`{s3_table}` VERSION AS OF 1")) == [
        (1, "a"),
        (2, "b"),
        (3, "c"),
    ]
    more = spark.createDataFrame([(4, "d")], "id BIGINT, name STRING")
    more.write.format("delta").mode("append").save(s3_table)
    back = spark.read.format("delta").load(s3_table)
    assert _rows(back) == [(1, "a"), (2, "B"), (4, "d")]
    assert _rows(spark.read.format("delta").option("versionAsOf", 1).load(s3_table)) == [
        (1, "a"),
        (2, "b"),
        (3, "c"),
    ]
