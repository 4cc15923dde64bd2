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


# --- every SQL statement in Delta Lake's isolation-level documentation ----------------------
# The statements are quoted as the documentation prints them; only placeholders are filled in:
# <table-name> / table-name -> table_name, <level-name> -> a level, ${tableName} -> a name.


@pytest.fixture
def warehouse(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    import deltatx.catalog

    root = tmp_path / "warehouse"
    root.mkdir()
    monkeypatch.setattr(deltatx.catalog, "warehouse_dir", lambda spark: str(root))
    return root


def fill(statement: str, **values: str) -> str:
    out = statement.replace("<table-name>", "table_name").replace("table-name", "table_name")
    for key, value in values.items():
        out = out.replace(f"<{key}>", value).replace(f"${{{key}}}", value)
    return out


# "Examples of queries that change metadata" (metadata changes fail all concurrent writes).
METADATA_EXAMPLES = [
    "ALTER TABLE table-name SET TBLPROPERTIES ('delta.isolationLevel' = 'Serializable')",
    "ALTER TABLE table_name SET TBLPROPERTIES ('delta.enableDeletionVectors' = true);",
    "ALTER TABLE table_name DROP FEATURE deletionVectors;",
    "ALTER TABLE table_name ADD COLUMNS (col_name STRING);",
]
UNIFORM_EXAMPLE = "REORG TABLE table_name APPLY (UPGRADE UNIFORM(ICEBERG_COMPAT_VERSION=2));"
SET_LEVEL = "ALTER TABLE <table-name> SET TBLPROPERTIES ('delta.isolationLevel' = <level-name>)"
SET_SERIALIZABLE = (
    "ALTER TABLE <table-name> SET TBLPROPERTIES ('delta.isolationLevel' = 'Serializable')"
)
UPDATE_BY_DATE = "UPDATE table WHERE date > '2010-01-01' ..."
DELETE_BY_DATE = "DELETE table WHERE date < '2010-01-01'"
CREATE_WITH_LEVEL = (
    "CREATE TABLE ${tableName} (id bigint) USING delta "
    "TBLPROPERTIES ('delta.isolationLevel' = 'Serializable')"
)


def small_table(spark: SparkSession, name: str, *, dvs: bool, partitioned: bool = False) -> str:
    part = "PARTITIONED BY (date) " if partitioned else ""
    sql(
        spark,
        f"CREATE TABLE `{name}` (id BIGINT, date STRING, v INT) USING DELTA {part}"
        f"TBLPROPERTIES ('delta.enableDeletionVectors' = {str(dvs).lower()})",
    )
    sql(
        spark,
        f"INSERT INTO `{name}` SELECT /*+ COALESCE(1) */ * FROM VALUES (1, '2009-06-01', 1), "
        f"(2, '2010-06-01', 2), (3, '2011-06-01', 3)",
    )
    return DeltaTable.for_name(spark, name).path


@pytest.mark.parametrize("statement", METADATA_EXAMPLES)
def test_documented_metadata_changes_run_and_fail_concurrent_writes(
    spark: SparkSession, warehouse: Path, statement: str
) -> None:
    from deltatx.errors import ConcurrentModificationException

    small_table(spark, "table_name", dvs="DROP FEATURE" in statement)
    if "DROP FEATURE" in statement:
        sql(spark, "DELETE FROM table_name WHERE id = 1")  # a deletion vector to purge
    dt = DeltaTable.for_name(spark, "table_name")
    concurrent = dt.begin()
    concurrent.write(spark.createDataFrame([(9, "2012-01-01", 9)], "id BIGINT, date STRING, v INT"))
    before = dt.version()
    sql(spark, fill(statement))
    assert dt.version() > before
    detail = sql(spark, "DESCRIBE DETAIL table_name").collect()[0]
    if "isolationLevel" in statement:
        assert detail["isolationLevel"] == "Serializable"
    elif "enableDeletionVectors" in statement:
        assert "deletionVectors" in detail["tableFeatures"]
    elif "DROP FEATURE" in statement:
        assert "deletionVectors" not in detail["tableFeatures"]
        assert all(f.deletion_vector is None for f in dt.snapshot().add_files())
    else:
        assert sql(spark, "SELECT * FROM table_name").columns[-1] == "col_name"
    with pytest.raises(ConcurrentModificationException):
        concurrent.commit()


def test_documented_uniform_upgrade_is_refused_by_name(
    spark: SparkSession, warehouse: Path
) -> None:
    small_table(spark, "table_name", dvs=True)
    before = DeltaTable.for_name(spark, "table_name").version()
    with pytest.raises(UnsupportedStatementError) as info:
        sql(spark, UNIFORM_EXAMPLE)
    assert "UNIFORM" in str(info.value) and (info.value.line, info.value.column) == (1, 30)
    assert DeltaTable.for_name(spark, "table_name").version() == before


@pytest.mark.parametrize("level", ["Serializable", "WriteSerializable"])
def test_documented_isolation_level_statements(
    spark: SparkSession, warehouse: Path, level: str
) -> None:
    small_table(spark, "table_name", dvs=False)
    sql(spark, fill(SET_LEVEL, **{"level-name": f"'{level}'"}))
    assert sql(spark, "DESCRIBE DETAIL table_name").collect()[0]["isolationLevel"] == level
    sql(spark, fill(SET_SERIALIZABLE))
    assert sql(spark, "DESCRIBE DETAIL table_name").collect()[0]["isolationLevel"] == (
        "Serializable"
    )


def test_documented_create_table_with_isolation_level(spark: SparkSession, warehouse: Path) -> None:
    sql(spark, fill(CREATE_WITH_LEVEL, tableName="serializable_table"))
    sql(spark, "INSERT INTO serializable_table SELECT id FROM range(0, 101)")
    sql(spark, "INSERT INTO serializable_table SELECT id FROM range(0, 101)")
    detail = sql(spark, "DESCRIBE DETAIL serializable_table").collect()[0]
    assert detail["isolationLevel"] == "Serializable"
    # val deltaTable = DeltaTable.forName(tableName); deltaTable.optimize().executeCompaction()
    metrics = DeltaTable.forName(spark, "serializable_table").optimize().executeCompaction()
    assert metrics.num_removed_files == detail["numFiles"] >= 2
    assert metrics.num_added_files == 1


@pytest.mark.parametrize("partitioned", [True, False])
def test_documented_update_and_delete_by_date(
    spark: SparkSession, warehouse: Path, partitioned: bool
) -> None:
    """'UPDATE table WHERE date > ... and DELETE table WHERE date < ... conflict if the table
    is not partitioned by date ... partitioning the table by date avoids the conflict.'"""
    from deltatx.errors import ConcurrentModificationException

    small_table(spark, "table", dvs=False, partitioned=partitioned)
    # The documentation elides the SET list ("..."); this is the statement with one filled in.
    update = UPDATE_BY_DATE.replace("WHERE", "SET v = v + 10 WHERE").replace(" ...", "")
    assert sql(spark, update).collect()[0]["num_affected_rows"] == 2
    assert sql(spark, DELETE_BY_DATE).collect()[0]["num_affected_rows"] == 1
    assert rows(sql(spark, "SELECT id, v FROM `table`")) == [(2, 12), (3, 13)]
    # the same two conditions, run concurrently, on rows that an unpartitioned table keeps in
    # one file
    sql(
        spark,
        "INSERT OVERWRITE `table` SELECT /*+ COALESCE(1) */ * FROM VALUES "
        "(1, '2009-06-01', 1), (2, '2010-06-01', 2), (3, '2011-06-01', 3) AS v(id, date, v)",
    )
    dt = DeltaTable.for_name(spark, "table")
    first, second = dt.begin(), dt.begin()
    first.update("date > '2010-01-01'", {"v": "v + 1"})
    second.delete("date < '2010-01-01'")
    first.commit()
    if partitioned:
        second.commit()
    else:
        with pytest.raises(ConcurrentModificationException):
            second.commit()


def test_documented_merge_examples(spark: SparkSession, warehouse: Path) -> None:
    """The two MERGE examples; the second adds t.date and t.country to the condition, which
    makes merges into different dates and countries safe to run concurrently."""
    sql(
        spark,
        "CREATE TABLE deltaTable (user_id BIGINT, date STRING, country STRING, n INT) "
        "USING DELTA PARTITIONED BY (date, country)",
    )
    sql(
        spark,
        "INSERT INTO deltaTable VALUES (1, '2024-01-01', 'es', 1), (2, '2024-01-01', 'fr', 1), "
        "(3, '2024-01-02', 'es', 1)",
    )
    deltaTable = DeltaTable.forName(spark, "deltaTable")
    schema = "user_id BIGINT, date STRING, country STRING, n INT"
    source = spark.createDataFrame([(1, "2024-01-01", "es", 5), (4, "2024-01-01", "es", 1)], schema)
    # deltaTable.as("t").merge(source.as("s"), "...").whenMatched().updateAll()
    #   .whenNotMatched().insertAll().execute()
    (
        deltaTable.alias("t")
        .merge(
            source.alias("s"), "s.user_id = t.user_id AND s.date = t.date AND s.country = t.country"
        )
        .whenMatchedUpdateAll()
        .whenNotMatchedInsertAll()
        .execute()
    )
    explicit = (
        "s.user_id = t.user_id AND s.date = t.date AND s.country = t.country "
        "AND t.date = '<date>' AND t.country = '<country>'"
    )
    es = spark.createDataFrame([(3, "2024-01-02", "es", 7)], schema)
    fr = spark.createDataFrame([(2, "2024-01-01", "fr", 8)], schema)
    first, second = deltaTable.begin(), deltaTable.begin()
    for txn, src, date, country in (
        (first, es, "2024-01-02", "es"),
        (second, fr, "2024-01-01", "fr"),
    ):
        condition = explicit.replace("<date>", date).replace("<country>", country)
        txn.alias("t").merge(
            src.alias("s"), condition
        ).whenMatchedUpdateAll().whenNotMatchedInsertAll().execute()
    first.commit()
    second.commit()
    # and the same statement in SQL
    spark.createDataFrame([(5, "2024-01-03", "pt", 1)], schema).createOrReplaceTempView("source")
    sql(
        spark,
        "MERGE INTO deltaTable t USING source s ON "
        + explicit.replace("<date>", "2024-01-03").replace("<country>", "pt")
        + " WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *",
    )
    assert rows(sql(spark, "SELECT user_id, n FROM deltaTable")) == [
        (1, 5),
        (2, 8),
        (3, 7),
        (4, 1),
        (5, 1),
    ]


def test_documented_optimize_zorder_and_reorg_purge(spark: SparkSession, warehouse: Path) -> None:
    small_table(spark, "table_name", dvs=True)
    sql(spark, "DELETE FROM table_name WHERE id = 3")  # a deletion vector on the one file
    purged = sql(spark, "REORG TABLE table_name APPLY (PURGE)").collect()[0]["metrics"]
    assert purged["numFilesRemoved"] == 1
    assert all(
        f.deletion_vector is None
        for f in DeltaTable.for_name(spark, "table_name").snapshot().add_files()
    )
    zorder = sql(spark, "OPTIMIZE table_name ZORDER BY (date, id)").collect()[0]["metrics"]
    assert zorder["numFilesAdded"] == 1
    ops = [r["operation"] for r in sql(spark, "DESCRIBE HISTORY table_name LIMIT 2").collect()]
    assert ops == ["OPTIMIZE", "REORG"]
