"""Generated columns are computed on every write; identity columns are refused, never ignored.

PROTOCOL.md "Generated Columns": writers must ensure that the value of a generated column
equals its ``delta.generationExpression`` on every row they write, and the table needs the
``generatedColumns`` writer feature (implied by writer version 4).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import DataFrame, SparkSession

import deltatx
from deltatx import DeltaTable
from deltatx.errors import (
    ConstraintViolationError,
    InvalidArgumentError,
    UnsupportedFeatureError,
    UnsupportedStatementError,
)
from deltatx.kernel.actions import Metadata, ProtocolAction
from deltatx.kernel.codec import serialize_commit
from deltatx.kernel.features import writer_features
from deltatx.kernel.log_paths import commit_name
from deltatx.log.delta_log import DeltaLog


def _rows(spark: SparkSession, path: Path) -> list[tuple[int, int, int]]:
    got = DeltaTable.for_path(spark, str(path)).to_df().collect()
    return sorted((r["id"], r["v"], r["d"]) for r in got)


def _data(spark: SparkSession, rows: list[tuple[int, int]]) -> DataFrame:
    return spark.createDataFrame(rows, "id BIGINT, v BIGINT")


@pytest.fixture
def table(spark: SparkSession, tmp_path: Path) -> Path:
    path = tmp_path / "t"
    DeltaTable.create(
        spark,
        str(path),
        schema="id BIGINT, v BIGINT, d BIGINT",
        generated_columns={"d": "v * 2"},
        properties={"delta.enableDeletionVectors": "false"},
    )
    return path


def test_the_protocol_names_the_feature(table: Path) -> None:
    snapshot = DeltaLog.for_table(str(table)).snapshot()
    assert "generatedColumns" in writer_features(snapshot.protocol)
    # Without deletion vectors the table stays legacy: writer version 4 implies the feature.
    assert snapshot.protocol.min_writer_version == 4
    field = snapshot.schema.get("d")
    assert field is not None and field.metadata["delta.generationExpression"] == "v * 2"


def test_values_are_computed_when_absent_and_verified_when_supplied(
    spark: SparkSession, table: Path
) -> None:
    deltatx.write(_data(spark, [(1, 10), (2, 20)]), str(table))
    supplied = spark.createDataFrame([(3, 30, 60)], "id BIGINT, v BIGINT, d BIGINT")
    deltatx.write(supplied, str(table))
    assert _rows(spark, table) == [(1, 10, 20), (2, 20, 40), (3, 30, 60)]
    before = DeltaTable.for_path(spark, str(table)).version()
    wrong = spark.createDataFrame([(4, 40, 1)], "id BIGINT, v BIGINT, d BIGINT")
    with pytest.raises(ConstraintViolationError, match="generated column 'd'"):
        deltatx.write(wrong, str(table))
    assert DeltaTable.for_path(spark, str(table)).version() == before
    deltatx.write(_data(spark, [(9, 1)]), str(table), mode="overwrite")
    assert _rows(spark, table) == [(9, 1, 2)]


def test_update_and_merge_recompute(spark: SparkSession, table: Path) -> None:
    deltatx.write(_data(spark, [(1, 10), (2, 20)]), str(table))
    dt = DeltaTable.for_path(spark, str(table))
    dt.update(set={"v": "v + 1"}, condition="id = 1")
    assert _rows(spark, table) == [(1, 11, 22), (2, 20, 40)]
    with pytest.raises(InvalidArgumentError, match="generated column"):
        dt.update(set={"d": "0"})
    (
        dt.alias("t")
        .merge(_data(spark, [(2, 5), (3, 7)]).alias("s"), "t.id = s.id")
        .when_matched_update(set={"v": "s.v"})
        .when_not_matched_insert(values={"id": "s.id", "v": "s.v"})
        .execute()
    )
    assert _rows(spark, table) == [(1, 11, 22), (2, 5, 10), (3, 7, 14)]


def test_sql_and_builder_declare_generated_columns(spark: SparkSession, tmp_path: Path) -> None:
    path = tmp_path / "sql"
    deltatx.sql(
        f"CREATE TABLE delta.`{path}` (id BIGINT, v BIGINT, d BIGINT GENERATED ALWAYS AS (v * 2))"
        " USING DELTA",
        spark=spark,
    )
    deltatx.sql(f"INSERT INTO delta.`{path}` (id, v) VALUES (1, 4)", spark=spark)
    assert _rows(spark, path) == [(1, 4, 8)]
    built = tmp_path / "builder"
    (
        DeltaTable.createIfNotExists(spark)
        .location(str(built))
        .addColumn("id", "BIGINT")
        .addColumn("v", "BIGINT")
        .addColumn("d", "BIGINT", generatedAlwaysAs="v + 1")
        .execute()
    )
    deltatx.write(_data(spark, [(1, 1)]), str(built))
    assert _rows(spark, built) == [(1, 1, 2)]


def test_the_data_source_writer_refuses_a_table_with_generated_columns(
    spark: SparkSession, table: Path
) -> None:
    # Spark wraps the data source's typed error; its class name and message stay inside.
    with pytest.raises(Exception, match=r"(?s)UnsupportedFeatureError.*generated column 'd'"):
        _data(spark, [(1, 1)]).write.format("delta").mode("append").save(str(table))


def test_identity_columns_are_refused_at_create(spark: SparkSession, tmp_path: Path) -> None:
    with pytest.raises(UnsupportedStatementError, match="IDENTITY"):
        deltatx.sql(
            f"CREATE TABLE delta.`{tmp_path / 'i'}` (id BIGINT GENERATED ALWAYS AS IDENTITY, "
            "v INT) USING DELTA",
            spark=spark,
        )
    with pytest.raises(UnsupportedFeatureError, match="identity"):
        DeltaTable.createIfNotExists(spark).location(str(tmp_path / "j")).addColumn(
            "id", "BIGINT", generatedByDefaultAs="identity"
        )
    assert not (tmp_path / "i").exists() and not (tmp_path / "j").exists()


def test_a_table_with_identity_columns_is_readable_but_not_writable(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Identity values are not assigned by deltatx, so every write to such a table is refused.

    Delta Lake's isolation-level documentation: "Las tablas con columnas de identidad no admiten
    transacciones simultáneas." A writer that assigns identity values must therefore conflict
    with every concurrent commit; until deltatx does that, it writes no identity table at all.
    """
    path = tmp_path / "identity"
    schema = (
        '{"type":"struct","fields":[{"name":"id","type":"long","nullable":true,"metadata":'
        '{"delta.identity.start":1,"delta.identity.step":1,"delta.identity.highWaterMark":2,'
        '"delta.identity.allowExplicitInsert":false}},'
        '{"name":"v","type":"long","nullable":true,"metadata":{}}]}'
    )
    # Another engine's table: identityColumns is implied by writer version 6.
    (path / "_delta_log").mkdir(parents=True)
    actions = [ProtocolAction(1, 6), Metadata(id="x", schema_string=schema)]
    (path / "_delta_log" / commit_name(0)).write_bytes(serialize_commit(actions))
    assert DeltaTable.for_path(spark, str(path)).to_df().count() == 0
    with pytest.raises(UnsupportedFeatureError, match="identityColumns") as info:
        deltatx.write(spark.createDataFrame([(5, 5)], "id BIGINT, v BIGINT"), str(path))
    assert info.value.feature == "identityColumns"
