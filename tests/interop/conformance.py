"""The conformance table: one row per table feature, one builder per independent writer.

Each :class:`Feature` says how delta-rs, deltatx and delta-spark each build a table that uses
the feature over several versions, or why that writer cannot. The interop suite
(``test_conformance.py``) and the peer suite (``tests/peer/test_conformance.py``) run every row
in both directions; a new feature (column mapping, v2 checkpoints, CDF writes, ...) is one
more row here.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
from deltalake import DeltaTable as RsTable
from deltalake import Field, QueryBuilder, Schema, write_deltalake
from deltalake.schema import PrimitiveType
from pyspark.sql import SparkSession

import deltatx
from deltatx import DeltaTable

RsBuild = Callable[[str], None]
OurBuild = Callable[[SparkSession, str], None]


@dataclass(frozen=True, slots=True)
class Feature:
    """One row of the conformance table.

    Attributes:
        name: The row's id.
        writer_feature: A writer feature the built table's protocol must name (legacy
            versions included), so the row really exercises it; None when it is a property.
        property_key: A table property the built table must carry, when the feature is one.
        delta_rs: Builds the table with delta-rs, or the reason delta-rs cannot.
        deltatx: Builds the table with deltatx, or the reason deltatx does not.
        delta_spark: SQL statements (``{t}`` is the table) that build it with delta-spark.
    """

    name: str
    writer_feature: str | None
    property_key: str | None
    delta_rs: RsBuild | str
    deltatx: OurBuild | str
    delta_spark: tuple[str, ...] = field(default_factory=tuple)


# --- rows in a comparable form -------------------------------------------------------------------


def canonical(rows: list[dict[str, Any]]) -> list[str]:
    """Rows as sorted JSON strings, the form every engine's answer is compared in."""
    return sorted(json.dumps(r, sort_keys=True, default=str) for r in rows)


def deltatx_rows(spark: SparkSession, path: str, version: int) -> list[str]:
    """deltatx's rows of the table at ``version``."""
    df = DeltaTable.for_path(spark, path).to_df(version=version)
    return canonical([r.asDict(recursive=True) for r in df.collect()])


def delta_rs_rows(path: str, version: int) -> list[str]:
    """delta-rs's rows at ``version``; its query engine is the reader that honours DVs."""
    table = RsTable(path, version=version)
    if "deletionVectors" in (table.protocol().reader_features or []):
        reader = QueryBuilder().register("t", table).execute("SELECT * FROM t")
        return canonical(pa.table(reader.read_all()).to_pylist())
    return canonical(table.to_pyarrow_table().to_pylist())


def versions(path: str) -> list[int]:
    """Every commit version in the table's log."""
    return sorted(int(p.stem) for p in (Path(path) / "_delta_log").glob("*.json"))


# --- delta-rs builders -----------------------------------------------------------------------


def _arrow(ids: range, *, p: bool = False) -> pa.Table:
    cols: dict[str, pa.Array] = {
        "id": pa.array(list(ids), pa.int64()),
        "v": pa.array([i * 10 for i in ids], pa.int64()),
    }
    if p:
        cols["p"] = pa.array([f"p{i % 2}" for i in ids], pa.string())
    return pa.table(cols)


def _rs_partitions(path: str) -> None:
    write_deltalake(path, _arrow(range(0, 4), p=True), partition_by=["p"])
    write_deltalake(path, _arrow(range(4, 8), p=True), mode="append")
    RsTable(path).delete("id = 2")
    write_deltalake(path, _arrow(range(8, 10), p=True), mode="append")


def _rs_checkpoints(path: str) -> None:
    write_deltalake(path, _arrow(range(0, 3)), configuration={"delta.checkpointInterval": "2"})
    for start in (3, 6):
        write_deltalake(path, _arrow(range(start, start + 3)), mode="append")
    RsTable(path).create_checkpoint()
    RsTable(path).update({"v": "v + 1"}, predicate="id < 2")


def _rs_constraints(path: str) -> None:
    write_deltalake(path, _arrow(range(1, 4)))
    RsTable(path).alter.add_constraint({"pos": "v > 0"})
    write_deltalake(path, _arrow(range(4, 6)), mode="append")
    RsTable(path).delete("id = 4")


def _rs_generated(path: str) -> None:
    schema = Schema(
        [
            Field("id", PrimitiveType("long")),
            Field("v", PrimitiveType("long")),
            Field("d", PrimitiveType("long"), metadata={"delta.generationExpression": "v * 2"}),
        ]
    )
    RsTable.create(path, schema=schema)
    write_deltalake(path, _arrow(range(0, 3)), mode="append")
    write_deltalake(path, _arrow(range(3, 5)), mode="append")


def _rs_cdf(path: str) -> None:
    write_deltalake(path, _arrow(range(0, 4)), configuration={"delta.enableChangeDataFeed": "true"})
    RsTable(path).update({"v": "v + 1"}, predicate="id = 1")
    RsTable(path).delete("id = 2")
    write_deltalake(path, _arrow(range(4, 6)), mode="append")


def _rs_append_only(path: str) -> None:
    write_deltalake(path, _arrow(range(0, 3)), configuration={"delta.appendOnly": "true"})
    write_deltalake(path, _arrow(range(3, 6)), mode="append")
    write_deltalake(path, _arrow(range(6, 7)), mode="append")


# --- deltatx builders ------------------------------------------------------------------------


def _frame(spark: SparkSession, ids: range, *, p: bool = False):  # type: ignore[no-untyped-def]
    if p:
        return spark.createDataFrame(
            [(i, i * 10, f"p{i % 2}") for i in ids], "id BIGINT, v BIGINT, p STRING"
        )
    return spark.createDataFrame([(i, i * 10) for i in ids], "id BIGINT, v BIGINT")


NO_DV = {"delta.enableDeletionVectors": "false"}


def _ours_partitions(spark: SparkSession, path: str) -> None:
    deltatx.write(_frame(spark, range(0, 4), p=True), path, partition_by=["p"], properties=NO_DV)
    deltatx.write(_frame(spark, range(4, 8), p=True), path)
    DeltaTable.for_path(spark, path).delete("id = 2")
    deltatx.write(_frame(spark, range(8, 10), p=True), path)


def _ours_deletion_vectors(spark: SparkSession, path: str) -> None:
    deltatx.write(
        _frame(spark, range(0, 6)), path, properties={"delta.enableDeletionVectors": "true"}
    )
    DeltaTable.for_path(spark, path).delete("id % 2 = 0")
    DeltaTable.for_path(spark, path).update(set={"v": "v + 1"}, condition="id = 1")
    deltatx.write(_frame(spark, range(6, 8)), path)


def _ours_checkpoints(spark: SparkSession, path: str) -> None:
    deltatx.write(
        _frame(spark, range(0, 2)), path, properties={**NO_DV, "delta.checkpointInterval": "2"}
    )
    for start in (2, 4, 6):
        deltatx.write(_frame(spark, range(start, start + 2)), path)
    DeltaTable.for_path(spark, path).delete("id = 3")


def _ours_constraints(spark: SparkSession, path: str) -> None:
    deltatx.write(_frame(spark, range(1, 4)), path, properties=NO_DV)
    DeltaTable.for_path(spark, path).add_constraint("pos", "v > 0")
    deltatx.write(_frame(spark, range(4, 6)), path)
    DeltaTable.for_path(spark, path).delete("id = 4")


def _ours_generated(spark: SparkSession, path: str) -> None:
    DeltaTable.create(
        spark,
        path,
        schema="id BIGINT, v BIGINT, d BIGINT",
        generated_columns={"d": "v * 2"},
        properties=NO_DV,
    )
    deltatx.write(_frame(spark, range(0, 3)), path)
    DeltaTable.for_path(spark, path).update(set={"v": "v + 1"}, condition="id = 0")


def _ours_cdf(spark: SparkSession, path: str) -> None:
    deltatx.write(
        _frame(spark, range(0, 3)), path, properties={**NO_DV, "delta.enableChangeDataFeed": "true"}
    )
    DeltaTable.for_path(spark, path).update(set={"v": "v + 1"}, condition="id = 1")
    DeltaTable.for_path(spark, path).delete("id = 2")


def _ours_append_only(spark: SparkSession, path: str) -> None:
    deltatx.write(
        _frame(spark, range(0, 3)), path, properties={**NO_DV, "delta.appendOnly": "true"}
    )
    deltatx.write(_frame(spark, range(3, 6)), path)
    deltatx.write(_frame(spark, range(6, 7)), path)


FEATURES: tuple[Feature, ...] = (
    Feature(
        "partitions",
        None,
        None,
        _rs_partitions,
        _ours_partitions,
        (
            "CREATE TABLE {t} (id BIGINT, v BIGINT, p STRING) USING delta PARTITIONED BY (p) "
            "TBLPROPERTIES ('delta.enableDeletionVectors' = 'false')",
            "INSERT INTO {t} VALUES (0, 0, 'p0'), (1, 10, 'p1'), (2, 20, 'p0')",
            "DELETE FROM {t} WHERE id = 2",
            "INSERT INTO {t} VALUES (3, 30, 'p1')",
        ),
    ),
    Feature(
        "deletion-vectors",
        "deletionVectors",
        None,
        "delta-rs does not write deletion vectors",
        _ours_deletion_vectors,
        (
            "CREATE TABLE {t} (id BIGINT, v BIGINT) USING delta "
            "TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')",
            "INSERT INTO {t} VALUES (0, 0), (1, 10), (2, 20), (3, 30)",
            "DELETE FROM {t} WHERE id = 2",
            "UPDATE {t} SET v = v + 1 WHERE id = 1",
        ),
    ),
    Feature(
        "checkpoints",
        None,
        "delta.checkpointInterval",
        _rs_checkpoints,
        _ours_checkpoints,
        (
            "CREATE TABLE {t} (id BIGINT, v BIGINT) USING delta "
            "TBLPROPERTIES ('delta.checkpointInterval' = '2')",
            "INSERT INTO {t} VALUES (0, 0)",
            "INSERT INTO {t} VALUES (1, 10)",
            "INSERT INTO {t} VALUES (2, 20)",
            "DELETE FROM {t} WHERE id = 1",
        ),
    ),
    Feature(
        "constraints",
        "checkConstraints",
        "delta.constraints.pos",
        _rs_constraints,
        _ours_constraints,
        (
            "CREATE TABLE {t} (id BIGINT, v BIGINT) USING delta",
            "INSERT INTO {t} VALUES (1, 10), (2, 20)",
            "ALTER TABLE {t} ADD CONSTRAINT pos CHECK (v > 0)",
            "INSERT INTO {t} VALUES (3, 30)",
        ),
    ),
    Feature(
        "generated-columns",
        "generatedColumns",
        None,
        _rs_generated,
        _ours_generated,
        (
            "CREATE TABLE {t} (id BIGINT, v BIGINT, d BIGINT GENERATED ALWAYS AS (v * 2)) "
            "USING delta",
            "INSERT INTO {t} (id, v) VALUES (0, 0), (1, 10)",
            "UPDATE {t} SET v = 5 WHERE id = 0",
        ),
    ),
    Feature(
        "identity-columns",
        "identityColumns",
        None,
        "delta-rs does not write identity columns",
        "deltatx refuses to create or write identity columns (not implemented)",
        (
            "CREATE TABLE {t} (id BIGINT GENERATED ALWAYS AS IDENTITY, v BIGINT) USING delta",
            "INSERT INTO {t} (v) VALUES (10), (20)",
            "INSERT INTO {t} (v) VALUES (30)",
        ),
    ),
    Feature(
        "change-data-feed",
        None,
        "delta.enableChangeDataFeed",
        _rs_cdf,
        _ours_cdf,
        (
            "CREATE TABLE {t} (id BIGINT, v BIGINT) USING delta "
            "TBLPROPERTIES ('delta.enableChangeDataFeed' = 'true', "
            "'delta.enableDeletionVectors' = 'false')",
            "INSERT INTO {t} VALUES (0, 0), (1, 10), (2, 20)",
            "UPDATE {t} SET v = v + 1 WHERE id = 1",
            "DELETE FROM {t} WHERE id = 2",
        ),
    ),
    Feature(
        "append-only",
        "appendOnly",
        "delta.appendOnly",
        _rs_append_only,
        _ours_append_only,
        (
            "CREATE TABLE {t} (id BIGINT, v BIGINT) USING delta "
            "TBLPROPERTIES ('delta.appendOnly' = 'true')",
            "INSERT INTO {t} VALUES (0, 0)",
            "INSERT INTO {t} VALUES (1, 10)",
        ),
    ),
)

BY_NAME = {f.name: f for f in FEATURES}
