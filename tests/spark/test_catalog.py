"""Named tables: CREATE TABLE by name, DeltaTable.for_name, Spark's catalog, new sessions."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

import deltatx
import deltatx.catalog
from deltatx import DeltaTable
from deltatx.catalog import Catalog, TableIdentifier
from deltatx.errors import TableAlreadyExistsError, TableNotFoundError
from deltatx.log.delta_log import DeltaLog


@pytest.fixture
def warehouse(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A warehouse of the test's own (the shared session's warehouse setting is static)."""
    root = tmp_path / "warehouse"
    root.mkdir()
    monkeypatch.setattr(deltatx.catalog, "warehouse_dir", lambda spark: str(root))
    return root


def sql(spark: SparkSession, text: str):  # type: ignore[no-untyped-def]
    return deltatx.sql(text, spark=spark)


def test_create_by_name_is_managed_under_the_warehouse(
    spark: SparkSession, warehouse: Path
) -> None:
    sql(spark, "CREATE TABLE cat_events (id BIGINT, day STRING) USING DELTA PARTITIONED BY (day)")
    sql(spark, "CREATE TABLE cat_db.cat_events (id BIGINT) USING DELTA")
    assert (warehouse / "cat_events" / "_delta_log").is_dir()
    assert (warehouse / "cat_db.db" / "cat_events" / "_delta_log").is_dir()
    sql(spark, "INSERT INTO cat_events VALUES (1, 'a'), (2, 'b')")
    sql(spark, "INSERT INTO cat_db.cat_events SELECT id * 10 FROM cat_events")
    dt = DeltaTable.for_name(spark, "cat_events")
    assert dt.path == str(warehouse / "cat_events")
    assert sorted(
        r.id for r in DeltaTable.for_name(spark, "CAT_DB.cat_events").to_df().collect()
    ) == [
        10,
        20,
    ]
    with pytest.raises(TableAlreadyExistsError):
        sql(spark, "CREATE TABLE cat_events (id BIGINT) USING DELTA")
    sql(spark, "CREATE TABLE IF NOT EXISTS cat_events (id BIGINT) USING DELTA")
    sql(spark, "UPDATE cat_events SET id = id + 100 WHERE day = 'b'")
    sql(spark, "DELETE FROM cat_events WHERE id = 1")
    assert [r.id for r in sql(spark, "SELECT id FROM cat_events").collect()] == [102]
    assert sql(spark, "DESCRIBE HISTORY cat_events").count() == 4
    assert sql(spark, "SELECT count(*) FROM cat_events VERSION AS OF 1").collect()[0][0] == 2
    entry = Catalog(str(warehouse)).lookup(TableIdentifier("default", "cat_events"))
    assert entry is not None and entry.managed


def test_location_makes_an_external_table(
    spark: SparkSession, warehouse: Path, tmp_path: Path
) -> None:
    place = tmp_path / "external"
    sql(spark, f"CREATE TABLE cat_ext (id BIGINT) USING DELTA LOCATION '{place}'")
    assert (place / "_delta_log").is_dir()
    assert not (warehouse / "cat_ext").exists()
    entry = Catalog(str(warehouse)).lookup(TableIdentifier("default", "cat_ext"))
    assert entry is not None and not entry.managed and entry.location == str(place)
    sql(spark, "INSERT INTO cat_ext VALUES (5)")
    # an existing Delta table gets a second name by LOCATION alone
    sql(spark, f"CREATE TABLE cat_ext2 USING DELTA LOCATION '{place}'")
    assert DeltaTable.for_name(spark, "cat_ext2").to_df().count() == 1
    sql(spark, "DROP TABLE cat_ext2")
    assert (place / "_delta_log").is_dir(), "dropping an external table keeps its data"
    with pytest.raises(TableNotFoundError):
        DeltaTable.for_name(spark, "cat_ext2")
    sql(spark, "CREATE TABLE cat_managed USING DELTA AS SELECT 1 AS id")
    sql(spark, "DROP TABLE cat_managed")
    assert not (warehouse / "cat_managed").exists()
    sql(spark, "DROP TABLE IF EXISTS cat_managed")
    with pytest.raises(TableNotFoundError):
        sql(spark, "DROP TABLE cat_managed")


def test_names_resolve_through_spark_catalog_first(
    spark: SparkSession, warehouse: Path, tmp_path: Path
) -> None:
    path = str(tmp_path / "registered")
    deltatx.write(spark.range(3), path)
    DeltaTable.for_path(spark, path).delete("id = 0")
    # A table Spark's own catalog holds, with the Delta table's location.
    spark.sql(f"CREATE TABLE cat_spark_registered USING parquet LOCATION '{path}'")
    try:
        dt = DeltaTable.for_name(spark, "cat_spark_registered")
        assert dt.path == path
        got = sorted(r.id for r in sql(spark, "SELECT id FROM cat_spark_registered").collect())
        assert got == [1, 2], "rows come from the Delta snapshot, not the raw Parquet files"
        # a temporary view shadows a deltatx name, as in Spark
        sql(spark, "CREATE TABLE cat_shadow USING DELTA AS SELECT 1 AS id")
        spark.createDataFrame([(9,)], "id INT").createOrReplaceTempView("cat_shadow")
        assert [r.id for r in sql(spark, "SELECT id FROM cat_shadow").collect()] == [9]
    finally:
        spark.sql("DROP TABLE IF EXISTS cat_spark_registered")
        spark.catalog.dropTempView("cat_shadow")


def test_for_name_of_a_missing_table(spark: SparkSession, warehouse: Path) -> None:
    with pytest.raises(TableNotFoundError, match="cat_nothing"):
        DeltaTable.for_name(spark, "cat_nothing")


def test_a_name_survives_into_a_new_session(spark: SparkSession, warehouse: Path) -> None:
    sql(spark, "CREATE TABLE survivor_db.survivor (id BIGINT) USING DELTA")
    sql(spark, "INSERT INTO survivor_db.survivor VALUES (1), (2), (3)")
    spark.range(5).write.format("delta").saveAsTable("survivor_db.saved")
    script = textwrap.dedent(
        f"""
        import deltatx
        from deltatx import DeltaTable
        from pyspark.sql import SparkSession
        spark = (
            SparkSession.builder.master("local[1]")
            .config("spark.sql.warehouse.dir", {str(warehouse)!r})
            .config("spark.ui.enabled", "false")
            .getOrCreate()
        )
        print("forName", DeltaTable.forName(spark, "survivor_db.survivor").toDF().count())
        print("sql", deltatx.sql("SELECT count(*) FROM survivor_db.survivor").collect()[0][0])
        deltatx.configure(spark)
        spark.range(2).write.format("delta").mode("append").saveAsTable("survivor_db.saved")
        print("saved", DeltaTable.for_name(spark, "survivor_db.saved").to_df().count())
        spark.stop()
        """
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert "forName 3" in out.stdout and "sql 3" in out.stdout
    assert "saved 7" in out.stdout, "saveAsTable's name resolves in the new session"


# -- df.write.format("delta").saveAsTable(name) ------------------------------------------------


def _ids(spark: SparkSession, name: str) -> list[int]:
    return sorted(r.id for r in DeltaTable.for_name(spark, name).to_df().collect())


def test_save_as_table_in_every_mode(spark: SparkSession, warehouse: Path) -> None:
    frame = spark.createDataFrame([(1, "a"), (2, "b")], "id BIGINT, day STRING")
    writer = frame.write.format("delta").partitionBy("day").option("userMetadata", "first")
    writer.saveAsTable("saved_events")
    root = warehouse / "saved_events"
    assert (root / "day=a").is_dir(), "a new name is a managed table under the warehouse"
    log = DeltaLog.for_table(str(root))
    assert tuple(log.snapshot().partition_columns) == ("day",)
    commit = log.history(1)[0].commit_info
    assert commit is not None and commit.user_metadata == "first"
    more = spark.createDataFrame([(3, "c")], "id BIGINT, day STRING")
    more.write.format("delta").mode("append").saveAsTable("saved_events")
    assert _ids(spark, "saved_events") == [1, 2, 3]
    assert log.history(1)[0].commit_info.is_blind_append  # type: ignore[union-attr]
    with pytest.raises(TableAlreadyExistsError, match="saved_events"):
        more.write.format("delta").saveAsTable("saved_events")
    more.write.format("delta").mode("ignore").saveAsTable("saved_events")
    assert log.latest_version() == 1, "error and ignore on an existing name write nothing"
    more.write.format("deltatx").mode("overwrite").saveAsTable("SAVED_EVENTS")
    assert _ids(spark, "saved_events") == [3]
    assert [r.id for r in sql(spark, "SELECT id FROM saved_events").collect()] == [3]
    entry = Catalog(str(warehouse)).lookup(TableIdentifier("default", "saved_events"))
    assert entry is not None and entry.managed


def test_save_as_table_at_a_path_is_external(
    spark: SparkSession, warehouse: Path, tmp_path: Path
) -> None:
    location = tmp_path / "elsewhere"
    spark.range(3).write.format("delta").option("path", str(location)).saveAsTable("saved_ext")
    assert DeltaLog.for_table(str(location)).table_exists()
    assert not (warehouse / "saved_ext").exists()
    entry = Catalog(str(warehouse)).lookup(TableIdentifier("default", "saved_ext"))
    assert entry is not None and not entry.managed
    assert _ids(spark, "saved_ext") == [0, 1, 2]
    sql(spark, "DROP TABLE saved_ext")
    assert DeltaLog.for_table(str(location)).table_exists(), "dropping an external name"


def test_a_failed_save_as_table_leaves_no_name(spark: SparkSession, warehouse: Path) -> None:
    writer = spark.range(3).write.format("delta").option("compression", "zstd")
    with pytest.raises(Exception, match=r"(?is)UnsupportedOptionError.*compression"):
        writer.saveAsTable("saved_failed")
    assert Catalog(str(warehouse)).lookup(TableIdentifier("default", "saved_failed")) is None
    assert not DeltaLog.for_table(str(warehouse / "saved_failed")).table_exists()
    with pytest.raises(TableNotFoundError):
        DeltaTable.for_name(spark, "saved_failed")


def test_save_as_table_refuses_a_managed_location_taken_by_another_table(
    spark: SparkSession, warehouse: Path
) -> None:
    deltatx.write(spark.range(1), str(warehouse / "saved_orphan"))
    with pytest.raises(TableAlreadyExistsError, match="no name refers to"):
        spark.range(3).write.format("delta").mode("append").saveAsTable("saved_orphan")
    assert DeltaLog.for_table(str(warehouse / "saved_orphan")).latest_version() == 0
