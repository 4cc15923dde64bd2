"""The public facade on real Spark: create, write modes, replace_where, time travel, history."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

import deltatx
from deltatx import DeltaTable
from deltatx.errors import (
    InvalidArgumentError,
    InvalidPropertyError,
    SchemaMismatchError,
    TableAlreadyExistsError,
    TableNotFoundError,
    UnsupportedFeatureError,
    VersionNotFoundError,
)


def events(spark: SparkSession, day: str, start: int, n: int) -> DataFrame:
    return spark.range(start, start + n).select(
        F.col("id"),
        F.lit(day).alias("date"),
        (F.col("id") * 1.5).alias("v"),
    )


def rows(df: DataFrame) -> list[tuple[object, ...]]:
    return sorted(tuple(r) for r in df.collect())


def test_create_write_read_and_time_travel(spark: SparkSession, table_dir: Path) -> None:
    path = str(table_dir)
    dt = DeltaTable.create(
        spark, path, schema="id BIGINT, date STRING, v DOUBLE", partition_by=["date"]
    )
    assert dt.version() == 0
    assert dt.to_df().count() == 0
    assert deltatx.write(events(spark, "2024-01-01", 0, 10), path) == 1
    assert deltatx.write(events(spark, "2024-01-02", 10, 5), path) == 2
    pinned = dt.to_df()
    assert (
        deltatx.write(
            events(spark, "2024-01-02", 100, 3),
            path,
            mode="overwrite",
            replace_where="date = '2024-01-02'",
        )
        == 3
    )
    assert pinned.count() == 15, "a DataFrame keeps the snapshot it was created from"
    assert dt.to_df().count() == 13
    assert rows(dt.to_df(version=1)) == rows(events(spark, "2024-01-01", 0, 10))
    assert dt.to_df(version=2).count() == 15
    with pytest.raises(VersionNotFoundError):
        dt.to_df(version=9)
    hist = dt.history().collect()
    assert [h["version"] for h in hist] == [3, 2, 1, 0]
    assert hist[0]["operation"] == "WRITE"
    assert json.loads(hist[0]["operationParameters"]["predicate"]) == ["date = '2024-01-02'"]
    assert hist[1]["isBlindAppend"] is True
    assert hist[0]["isBlindAppend"] is False
    detail = dt.detail().collect()[0]
    assert detail["partitionColumns"] == ["date"]
    assert detail["numFiles"] >= 2
    assert detail["isolationLevel"] == "WriteSerializable"


def test_partition_values_come_from_the_log(spark: SparkSession, table_dir: Path) -> None:
    path = str(table_dir)
    deltatx.write(events(spark, "2024-01-01", 0, 4), path, partition_by=["date"])
    snap = DeltaTable.for_path(spark, path).snapshot()
    assert {f.partition_values["date"] for f in snap.add_files()} == {"2024-01-01"}
    assert all(f.stats and json.loads(f.stats)["numRecords"] > 0 for f in snap.add_files())


def test_replace_where_on_data_column_keeps_other_rows(
    spark: SparkSession, table_dir: Path
) -> None:
    path = str(table_dir)
    deltatx.write(events(spark, "d", 0, 10), path)
    new = spark.createDataFrame([(3, "d", 99.0)], "id BIGINT, date STRING, v DOUBLE")
    deltatx.write(new, path, mode="overwrite", replace_where="id >= 3 AND id < 6")
    got = DeltaTable.for_path(spark, path).to_df()
    assert sorted(r["id"] for r in got.collect()) == [0, 1, 2, 3, 6, 7, 8, 9]
    assert got.filter("id = 3").collect()[0]["v"] == 99.0


def test_replace_where_refuses_rows_outside_the_condition(
    spark: SparkSession, table_dir: Path
) -> None:
    path = str(table_dir)
    deltatx.write(events(spark, "2024-01-01", 0, 3), path, partition_by=["date"])
    with pytest.raises(InvalidArgumentError, match="replace_where"):
        deltatx.write(
            events(spark, "2024-01-09", 0, 3),
            path,
            mode="overwrite",
            replace_where="date = '2024-01-01'",
        )
    assert DeltaTable.for_path(spark, path).version() == 0


def test_modes_error_ignore_overwrite(spark: SparkSession, table_dir: Path) -> None:
    path = str(table_dir)
    assert deltatx.write(events(spark, "a", 0, 3), path, mode="error") == 0
    with pytest.raises(TableAlreadyExistsError):
        deltatx.write(events(spark, "a", 0, 3), path, mode="error")
    assert deltatx.write(events(spark, "a", 0, 3), path, mode="ignore") is None
    assert deltatx.write(events(spark, "b", 50, 2), path, mode="overwrite") == 1
    assert DeltaTable.for_path(spark, path).to_df().count() == 2
    with pytest.raises(InvalidArgumentError, match="save mode"):
        deltatx.write(events(spark, "a", 0, 3), path, mode="upsert")


def test_idempotent_writes_skip_a_committed_app_version(
    spark: SparkSession, table_dir: Path
) -> None:
    path = str(table_dir)
    df = events(spark, "a", 0, 3)
    assert deltatx.write(df, path, app_id="job-1", app_version=5) == 0
    assert deltatx.write(df, path, app_id="job-1", app_version=5) is None
    assert deltatx.write(df, path, app_id="job-1", app_version=4) is None
    assert deltatx.write(df, path, app_id="job-1", app_version=6) == 1
    assert DeltaTable.for_path(spark, path).snapshot().app_transaction_version("job-1") == 6
    assert DeltaTable.for_path(spark, path).to_df().count() == 6


def test_schema_enforcement_names_the_column(spark: SparkSession, table_dir: Path) -> None:
    path = str(table_dir)
    deltatx.write(events(spark, "a", 0, 3), path)
    extra = events(spark, "a", 0, 1).withColumn("surprise", F.lit(1))
    with pytest.raises(SchemaMismatchError, match="surprise"):
        deltatx.write(extra, path)
    wrong = events(spark, "a", 0, 1).withColumn("v", F.lit("text"))
    with pytest.raises(SchemaMismatchError, match="v"):
        deltatx.write(wrong, path)
    assert DeltaTable.for_path(spark, path).version() == 0
    assert deltatx.write(extra, path, merge_schema=True) == 1
    df = DeltaTable.for_path(spark, path).to_df()
    assert "surprise" in df.columns
    assert df.filter("surprise IS NULL").count() == 3


def test_missing_table_and_bad_properties(spark: SparkSession, table_dir: Path) -> None:
    with pytest.raises(TableNotFoundError):
        DeltaTable.for_path(spark, str(table_dir / "nothing"))
    assert not DeltaTable.is_delta_table(spark, str(table_dir / "nothing"))
    with pytest.raises(InvalidPropertyError, match="Serializable") as info:
        DeltaTable.create(
            spark,
            str(table_dir),
            schema="id BIGINT",
            properties={"delta.isolationLevel": "SnapshotIsolation"},
        )
    assert "WriteSerializable" in str(info.value)
    assert not DeltaTable.is_delta_table(spark, str(table_dir))


def test_set_properties_and_add_columns(spark: SparkSession, table_dir: Path) -> None:
    path = str(table_dir)
    dt = DeltaTable.create(spark, path, schema="id BIGINT")
    v = dt.set_properties({"delta.isolationLevel": "serializable"})
    snap = dt.snapshot()
    assert snap.metadata.configuration["delta.isolationLevel"] == "Serializable"
    assert v == 1
    with pytest.raises(InvalidPropertyError):
        dt.set_properties({"delta.isolationLevel": "Chaos"})
    assert dt.version() == 1
    dt.add_columns("note STRING")
    assert [f.name for f in dt.snapshot().schema.fields] == ["id", "note"]
    dt.unset_properties(["delta.isolationLevel"])
    assert "delta.isolationLevel" not in dt.snapshot().metadata.configuration


def test_transaction_statements_commit_as_one_version(spark: SparkSession, table_dir: Path) -> None:
    path = str(table_dir)
    dt = DeltaTable.create(spark, path, schema="id BIGINT, date STRING, v DOUBLE")
    with dt.begin() as txn:
        txn.write(events(spark, "a", 0, 3))
        assert txn.to_df().count() == 3, "a transaction reads its own writes"
        assert dt.to_df().count() == 0, "nothing is visible before commit"
        txn.set_properties({"delta.checkpointInterval": "5"})
    assert dt.version() == 1
    assert dt.to_df().count() == 3
    with pytest.raises(RuntimeError), dt.begin() as txn:
        txn.write(events(spark, "a", 10, 3))
        raise RuntimeError("boom")
    assert dt.version() == 1


def test_partition_filters_prune_files(spark: SparkSession, table_dir: Path) -> None:
    path = str(table_dir)
    for day in ("2024-01-01", "2024-01-02", "2024-01-03"):
        deltatx.write(events(spark, day, 0, 5), path, partition_by=["date"])
    # The other days' files stop being Parquet: a query that read one would fail.
    for f in DeltaTable.for_path(spark, path).snapshot().add_files():
        if f.partition_values["date"] != "2024-01-01":
            (table_dir / f.path).write_bytes(b"not parquet")
    df = DeltaTable.for_path(spark, path).to_df()
    assert df.filter("date = '2024-01-01'").count() == 5
    with pytest.raises(Exception):  # noqa: B017 (Spark's own error on a file not Parquet)
        df.count()


def test_one_deletion_vector_file_per_commit(spark: SparkSession, table_dir: Path) -> None:
    """Issue 5: many small DVs of one commit go into one DV file, even across statements."""
    from deltatx.kernel.deletion_vectors import descriptor_location

    path = str(table_dir)
    for start in (0, 100):
        deltatx.write(events(spark, "d", start, 20).coalesce(1), path)
    dt = DeltaTable.for_path(spark, path)
    with dt.begin() as txn:
        txn.delete("id = 3")
        txn.delete("id = 105")
        txn.update("id = 7", set={"v": "0"})
    adds = [a for a in dt.log.read_commit(dt.version()) if getattr(a, "deletion_vector", None)]
    dv_adds = [a for a in adds if a.__class__.__name__ == "AddFile"]
    assert len(dv_adds) == 2
    assert len({descriptor_location(a.deletion_vector) for a in dv_adds}) == 1
    assert sorted(r["id"] for r in dt.to_df().filter("id IN (3, 105)").collect()) == []
    assert dt.to_df().filter("id = 7").collect()[0]["v"] == 0.0
    assert dt.to_df().count() == 38


@pytest.mark.parametrize("uri", ["gs://b/x", "abfss://c@a/x", "hdfs://nn/x"])
def test_create_on_an_unsupported_store_is_refused_and_writes_nothing(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, uri: str
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UnsupportedFeatureError, match="not supported yet"):
        DeltaTable.create(spark, uri, schema="id BIGINT")
    with pytest.raises(UnsupportedFeatureError):
        deltatx.write(spark.range(1), uri)
    assert list(tmp_path.iterdir()) == []


def test_a_handle_loads_the_table_when_opened(
    spark: SparkSession, table_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As delta-spark's forPath and delta-rs's DeltaTable: the handle holds the table's state,
    # so a statement only looks for commits newer than it, and still sees them.
    from deltatx.log.delta_log import DeltaLog

    path = str(table_dir)
    deltatx.write(events(spark, "2024-01-01", 0, 10), path)
    dt = DeltaTable.for_path(spark, path)
    deltatx.write(events(spark, "2024-01-02", 10, 5), path, mode="append")

    def replay_everything(*args: object, **kwargs: object) -> None:
        raise AssertionError("the statement replayed the whole log")

    monkeypatch.setattr(DeltaLog, "snapshot", replay_everything)
    dt.delete("id % 2 = 0")
    monkeypatch.undo()
    # Reading the latest state starts from the handle's too; a chosen version loads its own.
    deltatx.write(events(spark, "2024-01-03", 15, 2), path, mode="append")
    monkeypatch.setattr(DeltaLog, "snapshot", replay_everything)
    assert dt.snapshot().version == 3
    assert [r[0] for r in rows(dt.to_df())] == [1, 3, 5, 7, 9, 11, 13, 15, 16]
    monkeypatch.undo()
    assert dt.to_df(version=1).count() == 15
    assert dt.version() == 3
