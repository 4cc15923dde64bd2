"""Parsing Delta SQL into statements: no Spark needed."""

from __future__ import annotations

import pytest

from deltatx.delta_sql.parser import parse_statement
from deltatx.delta_sql.statements import (
    AddColumns,
    AddConstraint,
    CreateTable,
    Delete,
    DescribeDetail,
    DescribeHistory,
    DropColumns,
    DropConstraint,
    DropFeature,
    DropTable,
    Insert,
    Merge,
    MergeAction,
    Optimize,
    Passthrough,
    Query,
    RenameColumn,
    ReorgPurge,
    Restore,
    SetProperties,
    TableRef,
    UnsetProperties,
    Unsupported,
    Update,
    Vacuum,
)
from deltatx.errors import DeltaError, SqlError, UnsupportedStatementError


def test_delta_path_and_names() -> None:
    assert parse_statement("DESCRIBE DETAIL delta.`/data/t`") == DescribeDetail(
        TableRef(path="/data/t")
    )
    assert parse_statement("DESCRIBE DETAIL db.t").table == TableRef(name="db.t")  # type: ignore[union-attr]
    assert parse_statement("DESCRIBE DETAIL spark_catalog.db.t").table == TableRef(name="db.t")  # type: ignore[union-attr]
    assert parse_statement("DESCRIBE DETAIL '/data/t'").table == TableRef(path="/data/t")  # type: ignore[union-attr]
    # delta.`relative` is not a path: a table named so in a database called delta
    assert parse_statement("DESCRIBE DETAIL delta.`t`").table == TableRef(name="delta.t")  # type: ignore[union-attr]


def test_create_table_with_every_clause() -> None:
    stmt = parse_statement(
        "CREATE OR REPLACE TABLE IF NOT EXISTS db.t (id BIGINT NOT NULL COMMENT 'key', d DATE) "
        "USING DELTA PARTITIONED BY (d) COMMENT 'events' LOCATION '/tmp/x' "
        "TBLPROPERTIES ('delta.isolationLevel' = 'Serializable', delta.appendOnly = true)"
    )
    assert isinstance(stmt, CreateTable)
    assert stmt.table == TableRef(name="db.t")
    assert stmt.columns == "id BIGINT NOT NULL COMMENT 'key', d DATE"
    assert stmt.partition_by == ("d",)
    assert stmt.comment == "events"
    assert stmt.location == "/tmp/x"
    assert dict(stmt.properties) == {
        "delta.isolationLevel": "Serializable",
        "delta.appendOnly": "true",
    }
    assert stmt.or_replace and stmt.if_not_exists and stmt.query is None


def test_create_table_with_a_generated_column() -> None:
    stmt = parse_statement(
        "CREATE TABLE t (a INT, b INT GENERATED ALWAYS AS (a * 2) COMMENT 'x') USING DELTA"
    )
    assert isinstance(stmt, CreateTable)
    assert stmt.columns == "a INT, b INT COMMENT 'x'"
    assert dict(stmt.generated_columns) == {"b": "a * 2"}


def test_create_as_select_and_other_providers() -> None:
    stmt = parse_statement("CREATE TABLE t USING delta AS SELECT 1 AS id")
    assert isinstance(stmt, CreateTable) and stmt.query is not None and stmt.columns is None
    assert isinstance(parse_statement("CREATE TABLE t (a INT) USING parquet"), Passthrough)
    no_using = parse_statement("CREATE TABLE t (a INT)")
    assert isinstance(no_using, CreateTable) and no_using.provider is None
    assert isinstance(parse_statement("CREATE VIEW v AS SELECT 1"), Passthrough)


def test_insert_forms() -> None:
    stmt = parse_statement("INSERT INTO t (a, b) REPLACE WHERE d = 1 SELECT * FROM s")
    assert isinstance(stmt, Insert)
    assert stmt.columns == ("a", "b") and stmt.replace_where == "d = 1" and not stmt.overwrite
    stmt = parse_statement("INSERT OVERWRITE db.t VALUES (1, 2)")
    assert isinstance(stmt, Insert) and stmt.overwrite and stmt.columns is None
    part = parse_statement("INSERT INTO t PARTITION (d = 1) SELECT 1")
    assert isinstance(part, Unsupported) and "PARTITION" in part.construct


def test_update_and_delete_drop_the_target_qualifier() -> None:
    stmt = parse_statement("UPDATE db.t AS x SET x.v = x.v + 1 WHERE x.date > '2010-01-01'")
    assert stmt == Update(TableRef(name="db.t", alias="x"), {"v": "v + 1"}, "date > '2010-01-01'")
    # DELETE without FROM, as the isolation-level documentation writes it
    assert parse_statement("DELETE table WHERE date < '2010-01-01'") == Delete(
        TableRef(name="table"), "date < '2010-01-01'"
    )
    assert parse_statement("DELETE FROM t") == Delete(TableRef(name="t"), None)


def test_merge_every_clause() -> None:
    stmt = parse_statement(
        "MERGE INTO delta.`/a/b` AS t USING (SELECT * FROM s) AS s ON t.id = s.id "
        "WHEN MATCHED AND s.x > 1 THEN UPDATE SET * "
        "WHEN MATCHED AND s.x < 0 THEN UPDATE SET t.a = s.a + 1, b = 2 "
        "WHEN MATCHED THEN DELETE "
        "WHEN NOT MATCHED BY TARGET AND s.y = 1 THEN INSERT * "
        "WHEN NOT MATCHED THEN INSERT (a, b) VALUES (s.a, 1) "
        "WHEN NOT MATCHED BY SOURCE AND t.x > 1 THEN UPDATE SET x = 1 "
        "WHEN NOT MATCHED BY SOURCE THEN DELETE"
    )
    assert isinstance(stmt, Merge)
    assert stmt.target == TableRef(path="/a/b", alias="t")
    assert stmt.source_query is not None and stmt.source_alias == "s"
    assert stmt.condition == "t.id = s.id"
    got = [(c.action, c.condition, c.assignments) for c in stmt.clauses]
    assert got == [
        (MergeAction.MATCHED_UPDATE, "s.x > 1", None),
        (MergeAction.MATCHED_UPDATE, "s.x < 0", {"a": "s.a + 1", "b": "2"}),
        (MergeAction.MATCHED_DELETE, None, None),
        (MergeAction.NOT_MATCHED_INSERT, "s.y = 1", None),
        (MergeAction.NOT_MATCHED_INSERT, None, {"a": "s.a", "b": "1"}),
        (MergeAction.NOT_MATCHED_BY_SOURCE_UPDATE, "t.x > 1", {"x": "1"}),
        (MergeAction.NOT_MATCHED_BY_SOURCE_DELETE, None, None),
    ]


def test_merge_source_table_with_and_without_alias() -> None:
    stmt = parse_statement(
        "MERGE INTO t USING db.updates ON t.id = updates.id WHEN MATCHED THEN DELETE"
    )
    assert isinstance(stmt, Merge)
    assert stmt.source_table == TableRef(name="db.updates") and stmt.source_alias == "updates"
    stmt = parse_statement(
        "MERGE INTO t USING delta.`/src` VERSION AS OF 3 AS s ON t.id = s.id "
        "WHEN MATCHED THEN DELETE"
    )
    assert isinstance(stmt, Merge)
    assert stmt.source_table == TableRef(path="/src", alias="s", version=3)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("OPTIMIZE t", Optimize(TableRef(name="t"))),
        (
            "OPTIMIZE delta.`/p` WHERE date >= '2024-01-01' ZORDER BY (a, b)",
            Optimize(TableRef(path="/p"), "date >= '2024-01-01'", ("a", "b")),
        ),
        ("OPTIMIZE t ZORDER BY a", Optimize(TableRef(name="t"), None, ("a",))),
        ("REORG TABLE t APPLY (PURGE)", ReorgPurge(TableRef(name="t"))),
        ("REORG TABLE t WHERE d = 1 APPLY (PURGE);", ReorgPurge(TableRef(name="t"), "d = 1")),
        ("VACUUM t", Vacuum(TableRef(name="t"))),
        ("VACUUM t RETAIN 1.5 HOURS DRY RUN", Vacuum(TableRef(name="t"), 1.5, True)),
        ("RESTORE TABLE t TO VERSION AS OF 3", Restore(TableRef(name="t"), version=3)),
        (
            "RESTORE db.t TIMESTAMP AS OF '2024-01-01'",
            Restore(TableRef(name="db.t"), timestamp="2024-01-01"),
        ),
        ("DESCRIBE HISTORY t LIMIT 2", DescribeHistory(TableRef(name="t"), 2)),
        ("DESC HISTORY t", DescribeHistory(TableRef(name="t"))),
        (
            "ALTER TABLE t SET TBLPROPERTIES ('delta.enableDeletionVectors' = true)",
            SetProperties(TableRef(name="t"), {"delta.enableDeletionVectors": "true"}),
        ),
        (
            "ALTER TABLE t SET TBLPROPERTIES ('a' = 1, b.c = 'x')",
            SetProperties(TableRef(name="t"), {"a": "1", "b.c": "x"}),
        ),
        (
            "ALTER TABLE t UNSET TBLPROPERTIES IF EXISTS ('a', b.c)",
            UnsetProperties(TableRef(name="t"), ("a", "b.c"), True),
        ),
        (
            "ALTER TABLE t ADD COLUMNS (c STRING, n INT COMMENT 'n')",
            AddColumns(TableRef(name="t"), "c STRING, n INT COMMENT 'n'"),
        ),
        (
            "ALTER TABLE t RENAME COLUMN a TO `b c`",
            RenameColumn(TableRef(name="t"), "a", "b c"),
        ),
        ("ALTER TABLE t DROP COLUMN a", DropColumns(TableRef(name="t"), ("a",))),
        (
            "ALTER TABLE t DROP COLUMNS IF EXISTS (a, `b.c`)",
            DropColumns(TableRef(name="t"), ("a", "b.c"), True),
        ),
        ("ALTER TABLE t DROP COLUMNS a, b", DropColumns(TableRef(name="t"), ("a", "b"))),
        (
            "ALTER TABLE t DROP FEATURE deletionVectors",
            DropFeature(TableRef(name="t"), "deletionVectors"),
        ),
        (
            "ALTER TABLE t DROP FEATURE 'appendOnly' TRUNCATE HISTORY",
            DropFeature(TableRef(name="t"), "appendOnly", True),
        ),
        ("DROP TABLE IF EXISTS db.t", DropTable(TableRef(name="db.t"), True)),
        (
            "ALTER TABLE t ADD CONSTRAINT pos CHECK (v > 0 AND w IN (1, 2))",
            AddConstraint(TableRef(name="t"), "pos", "v > 0 AND w IN (1, 2)"),
        ),
        (
            "ALTER TABLE t DROP CONSTRAINT IF EXISTS pos",
            DropConstraint(TableRef(name="t"), "pos", True),
        ),
        ("ALTER TABLE t DROP CONSTRAINT pos", DropConstraint(TableRef(name="t"), "pos")),
    ],
)
def test_delta_heads(text: str, expected: object) -> None:
    assert parse_statement(text) == expected


def test_queries_and_other_statements() -> None:
    stmt = parse_statement("SELECT * FROM t VERSION AS OF 1 AS x")
    assert isinstance(stmt, Query)
    for text in ("SHOW TABLES", "SET spark.sql.shuffle.partitions = 4", "CACHE TABLE t"):
        assert parse_statement(text) == Passthrough(text)
    other = parse_statement("ALTER TABLE t RENAME TO u")
    assert isinstance(other, Unsupported) and other.construct == "ALTER TABLE ... RENAME TO"


@pytest.mark.parametrize(
    ("text", "construct", "line", "column"),
    [
        (
            "REORG TABLE table_name APPLY (UPGRADE UNIFORM(ICEBERG_COMPAT_VERSION=2));",
            "REORG TABLE ... APPLY (UPGRADE)",
            1,
            30,
        ),
        ("VACUUM t LITE", "VACUUM ... LITE", 1, 10),
        (
            "ALTER TABLE t RENAME COLUMN s.a TO b",
            "ALTER TABLE ... RENAME COLUMN <nested field>",
            1,
            29,
        ),
        ("OPTIMIZE t\n  ZORDER BY (a) FULL", "OPTIMIZE ... FULL", 2, 17),
        (
            "CREATE TABLE t (a INT GENERATED ALWAYS AS IDENTITY (START WITH 1)) USING delta",
            "CREATE TABLE ... GENERATED",
            1,
            64,
        ),
    ],
)
def test_unsupported_constructs_are_named_with_their_position(
    text: str, construct: str, line: int, column: int
) -> None:
    with pytest.raises(UnsupportedStatementError) as info:
        parse_statement(text)
    assert info.value.construct == construct
    assert (info.value.line, info.value.column) == (line, column)
    assert f"(line {line}, column {column})" in str(info.value)


@pytest.mark.parametrize(
    ("text", "line", "column"),
    [
        ("OPTIMIZE t WHERE", 1, 17),
        ("UPDATE t SET WHERE x", 1, 1),
        ("SELECT 1; SELECT 2", 1, 9),
        ("RESTORE t TO VERSION AS OF 'x'", 1, 28),
        ("MERGE INTO t USING s ON t.a = s.a WHEN MATCHED THEN INSERT *", 1, 35),
        ("UPDATE t SET a = (1 +", 1, 21),
        ("", None, None),
    ],
)
def test_errors_say_where_and_hide_parser_internals(
    text: str, line: int | None, column: int | None
) -> None:
    with pytest.raises(SqlError) as info:
        parse_statement(text)
    assert isinstance(info.value, DeltaError)
    assert (info.value.line, info.value.column) == (line, column)
    message = str(info.value)
    for internal in ("sqlglot", "Traceback", "Expression", "TokenType", "ParseError", "exp."):
        assert internal not in message
