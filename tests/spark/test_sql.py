"""deltatx.sql on real Spark: Delta statements on tables named by path, and pass-through."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

import deltatx
from deltatx import DeltaTable
from deltatx.errors import (
    SqlError,
    TableAlreadyExistsError,
    TableNotFoundError,
    UnsupportedFeatureError,
    UnsupportedStatementError,
)


def sql(spark: SparkSession, text: str):  # type: ignore[no-untyped-def]
    return deltatx.sql(text, spark=spark)


def rows(df) -> list[tuple[object, ...]]:  # type: ignore[no-untyped-def]
    return sorted(tuple(r) for r in df.collect())


@pytest.fixture
def events(spark: SparkSession, tmp_path: Path) -> str:
    """A partitioned table by path with four rows over three dates; returns ``delta.`path```."""
    path = str(tmp_path / "events")
    ref = f"delta.`{path}`"
    sql(
        spark,
        f"CREATE TABLE {ref} (id BIGINT, date STRING, country STRING, v INT) USING DELTA "
        f"PARTITIONED BY (date) TBLPROPERTIES ('delta.isolationLevel' = 'Serializable')",
    )
    sql(
        spark,
        f"INSERT INTO {ref} VALUES (1, '2009-12-31', 'es', 10), (2, '2010-06-01', 'fr', 20), "
        f"(3, '2011-01-01', 'es', 30), (4, '2011-01-01', 'de', 40)",
    )
    return ref


def test_create_table_records_partitioning_and_properties(spark: SparkSession, events: str) -> None:
    detail = sql(spark, f"DESCRIBE DETAIL {events}").collect()[0]
    assert detail["partitionColumns"] == ["date"]
    assert detail["properties"]["delta.isolationLevel"] == "Serializable"
    assert detail["isolationLevel"] == "Serializable"
    history = sql(spark, f"DESCRIBE HISTORY {events}").collect()
    assert [r["operation"] for r in history] == ["WRITE", "CREATE TABLE"]
    assert sql(spark, f"DESCRIBE HISTORY {events} LIMIT 1").count() == 1


def test_create_if_not_exists_or_replace_and_location(
    spark: SparkSession, events: str, tmp_path: Path
) -> None:
    with pytest.raises(TableAlreadyExistsError):
        sql(spark, f"CREATE TABLE {events} (id BIGINT) USING DELTA")
    sql(spark, f"CREATE TABLE IF NOT EXISTS {events} (id BIGINT) USING DELTA")
    assert sql(spark, f"SELECT count(*) FROM {events}").collect()[0][0] == 4
    sql(spark, f"CREATE OR REPLACE TABLE {events} USING DELTA AS SELECT 7L AS id, 'x' AS tag")
    assert rows(sql(spark, f"SELECT * FROM {events}")) == [(7, "x")]
    assert sql(spark, f"DESCRIBE HISTORY {events} LIMIT 1").collect()[0]["operation"] == (
        "CREATE OR REPLACE TABLE AS SELECT"
    )
    # the old version is still there to travel to
    assert sql(spark, f"SELECT count(*) FROM {events} VERSION AS OF 1").collect()[0][0] == 4
    other = str(tmp_path / "other")
    sql(
        spark,
        f"CREATE TABLE delta.`{other}` USING DELTA LOCATION '{other}' AS SELECT id FROM {events}",
    )
    assert rows(sql(spark, f"SELECT * FROM delta.`{other}`")) == [(7,)]


def test_insert_into_overwrite_and_replace_where(spark: SparkSession, events: str) -> None:
    assert rows(sql(spark, f"INSERT INTO {events} (id, date) VALUES (5, '2012-01-01')")) == [(1, 1)]
    assert rows(sql(spark, f"SELECT id, country, v FROM {events} WHERE id = 5")) == [
        (5, None, None)
    ]
    sql(
        spark,
        f"INSERT INTO {events} REPLACE WHERE date = '2011-01-01' SELECT 9, '2011-01-01', 'it', 90",
    )
    assert rows(sql(spark, f"SELECT id FROM {events}")) == [(1,), (2,), (5,), (9,)]
    sql(spark, f"INSERT OVERWRITE {events} SELECT id, date, country, v FROM {events} WHERE id < 3")
    assert rows(sql(spark, f"SELECT id FROM {events}")) == [(1,), (2,)]
    with pytest.raises(SqlError, match="gives 2 columns but 4 are expected"):
        sql(spark, f"INSERT INTO {events} VALUES (1, 'x')")


def test_update_and_delete(spark: SparkSession, events: str) -> None:
    assert (
        sql(spark, f"UPDATE {events} SET v = v + 1 WHERE date > '2010-01-01'").collect()[0][0] == 3
    )
    assert sql(spark, f"DELETE FROM {events} WHERE date < '2010-01-01'").collect()[0][0] == 1
    assert rows(sql(spark, f"SELECT id, v FROM {events}")) == [(2, 21), (3, 31), (4, 41)]
    # qualified by an alias
    sql(spark, f"UPDATE {events} AS e SET e.v = 0 WHERE e.id = 2")
    assert rows(sql(spark, f"SELECT v FROM {events} WHERE id = 2")) == [(0,)]


def test_merge_with_every_clause_and_a_subquery_source(spark: SparkSession, events: str) -> None:
    spark.createDataFrame(
        [(2, "2010-06-01", "fr", 200), (3, "2011-01-01", "es", -1), (7, "2012-01-01", "pt", 70)],
        "id BIGINT, date STRING, country STRING, v INT",
    ).createOrReplaceTempView("sql_updates")
    result = sql(
        spark,
        f"""
        MERGE INTO {events} AS t
        USING (SELECT * FROM sql_updates) AS s
        ON t.id = s.id
        WHEN MATCHED AND s.v < 0 THEN DELETE
        WHEN MATCHED THEN UPDATE SET v = s.v
        WHEN NOT MATCHED BY TARGET AND s.id > 100 THEN INSERT *
        WHEN NOT MATCHED THEN INSERT (id, date, v) VALUES (s.id, s.date, s.v + 1)
        WHEN NOT MATCHED BY SOURCE AND t.country = 'de' THEN UPDATE SET v = -t.v
        WHEN NOT MATCHED BY SOURCE THEN DELETE
        """,
    ).collect()[0]
    assert (result["num_updated_rows"], result["num_deleted_rows"]) == (2, 2)
    assert result["num_inserted_rows"] == 1
    assert rows(sql(spark, f"SELECT id, country, v FROM {events}")) == [
        (2, "fr", 200),
        (4, "de", -40),
        (7, None, 71),
    ]


def test_merge_sources_table_view_and_delta_path(
    spark: SparkSession, events: str, tmp_path: Path
) -> None:
    src = str(tmp_path / "src")
    deltatx.write(
        spark.createDataFrame(
            [(1, "2009-12-31", "es", 11)], "id BIGINT, date STRING, country STRING, v INT"
        ),
        src,
    )
    sql(
        spark,
        f"MERGE INTO {events} t USING delta.`{src}` s ON t.id = s.id "
        f"WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *",
    )
    assert rows(sql(spark, f"SELECT v FROM {events} WHERE id = 1")) == [(11,)]
    spark.createDataFrame([(1, 12)], "id BIGINT, v INT").createOrReplaceTempView("sql_view_src")
    sql(
        spark,
        f"MERGE INTO {events} AS t USING sql_view_src ON t.id = sql_view_src.id "
        f"WHEN MATCHED THEN UPDATE SET t.v = sql_view_src.v",
    )
    assert rows(sql(spark, f"SELECT v FROM {events} WHERE id = 1")) == [(12,)]


def test_optimize_reorg_vacuum_restore(spark: SparkSession, events: str) -> None:
    sql(spark, f"INSERT INTO {events} VALUES (5, '2011-01-01', 'es', 50)")
    sql(spark, f"DELETE FROM {events} WHERE id = 3")  # a deletion vector on 2011-01-01
    reorg = sql(spark, f"REORG TABLE {events} APPLY (PURGE)").collect()[0]
    assert reorg["metrics"]["numFilesRemoved"] >= 1
    detail = sql(spark, f"DESCRIBE DETAIL {events}").collect()[0]
    before = detail["numFiles"]
    opt = sql(spark, f"OPTIMIZE {events} WHERE date = '2011-01-01' ZORDER BY (id)").collect()[0]
    assert opt["path"] and opt["metrics"]["numFilesAdded"] == 1
    assert sql(spark, f"DESCRIBE DETAIL {events}").collect()[0]["numFiles"] < before
    ops = [r["operation"] for r in sql(spark, f"DESCRIBE HISTORY {events} LIMIT 2").collect()]
    assert ops == ["OPTIMIZE", "REORG"]
    dry = sql(spark, f"VACUUM {events} RETAIN 168 HOURS DRY RUN").collect()
    assert dry == []  # nothing is older than a week
    with pytest.raises(Exception, match="retention"):
        sql(spark, f"VACUUM {events} RETAIN 0 HOURS")
    restored = sql(spark, f"RESTORE TABLE {events} TO VERSION AS OF 1").collect()[0]
    assert restored["num_of_files_after_restore"] >= 1
    assert rows(sql(spark, f"SELECT id FROM {events}")) == [(1,), (2,), (3,), (4,)]


def test_alter_table_properties_columns_and_drop_feature(spark: SparkSession, events: str) -> None:
    sql(spark, f"ALTER TABLE {events} SET TBLPROPERTIES ('delta.appendOnly' = true, 'k' = 'v')")
    props = sql(spark, f"DESCRIBE DETAIL {events}").collect()[0]["properties"]
    assert props["delta.appendOnly"] == "true" and props["k"] == "v"
    sql(spark, f"ALTER TABLE {events} UNSET TBLPROPERTIES IF EXISTS ('k', 'missing')")
    sql(spark, f"ALTER TABLE {events} SET TBLPROPERTIES ('delta.appendOnly' = false)")
    props = sql(spark, f"DESCRIBE DETAIL {events}").collect()[0]["properties"]
    assert "k" not in props
    sql(spark, f"ALTER TABLE {events} ADD COLUMNS (col_name STRING)")
    assert "col_name" in sql(spark, f"SELECT * FROM {events}").columns
    sql(spark, f"DELETE FROM {events} WHERE id = 1")
    sql(spark, f"ALTER TABLE {events} DROP FEATURE deletionVectors")
    detail = sql(spark, f"DESCRIBE DETAIL {events}").collect()[0]
    assert "deletionVectors" not in detail["tableFeatures"]
    assert detail["properties"]["delta.enableDeletionVectors"] == "false"
    dt = DeltaTable.for_path(spark, detail["location"])
    assert all(f.deletion_vector is None for f in dt.snapshot().add_files())
    assert rows(sql(spark, f"SELECT id FROM {events}")) == [(2,), (3,), (4,)]
    with pytest.raises(UnsupportedFeatureError, match="columnMapping"):
        sql(spark, f"ALTER TABLE {events} DROP FEATURE columnMapping")


def test_time_travel_selects_and_joins(spark: SparkSession, events: str) -> None:
    sql(spark, f"DELETE FROM {events} WHERE id > 1")
    got = sql(
        spark,
        f"SELECT a.id FROM {events} VERSION AS OF 1 AS a "
        f"LEFT JOIN {events} AS b ON a.id = b.id WHERE b.id IS NULL",
    )
    assert rows(got) == [(2,), (3,), (4,)]
    ts = sql(spark, f"DESCRIBE HISTORY {events}").collect()[-2]["timestamp"]
    at = sql(spark, f"SELECT count(*) FROM {events} TIMESTAMP AS OF '{ts.isoformat()}'")
    assert at.collect()[0][0] == 4
    cte = sql(spark, f"WITH x AS (SELECT id FROM {events}) SELECT count(*) FROM x")
    assert cte.collect()[0][0] == 1


def test_other_statements_go_to_spark_unchanged(spark: SparkSession) -> None:
    assert sql(spark, "SELECT 1 AS one").collect()[0]["one"] == 1
    sql(spark, "CREATE OR REPLACE TEMPORARY VIEW sql_passthrough AS SELECT 2 AS two")
    assert sql(spark, "SELECT * FROM sql_passthrough").collect()[0]["two"] == 2
    assert sql(spark, "SHOW TABLES").count() >= 1


def test_errors_are_typed(spark: SparkSession, events: str, tmp_path: Path) -> None:
    with pytest.raises(TableNotFoundError):
        sql(spark, f"OPTIMIZE delta.`{tmp_path / 'missing'}`")
    with pytest.raises(UnsupportedStatementError) as info:
        sql(spark, f"ALTER TABLE {events} RENAME TO other")
    assert info.value.construct == "ALTER TABLE ... RENAME TO"
    with pytest.raises(SqlError, match=r"line 2, column"):
        sql(spark, f"UPDATE {events}\nSET v = (1 +")
