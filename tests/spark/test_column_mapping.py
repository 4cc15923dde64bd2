"""Column mapping on real Spark: physical names in files and the log, logical names for users.

Delta Lake's column mapping lets a table rename and drop columns without rewriting data:
files, statistics and partition values use physical names, while every reader and writer
works in logical names.
"""

from __future__ import annotations

import glob
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

import deltatx
from deltatx import DeltaTable
from deltatx.errors import (
    ConcurrentAppendException,
    InvalidPropertyError,
    SchemaMismatchError,
    UnsupportedFeatureError,
)
from deltatx.kernel.column_mapping import ID_KEY, PHYSICAL_NAME_KEY
from deltatx.kernel.expressions import Column, Comparison, ComparisonOp, Literal
from deltatx.log.delta_log import DeltaLog

SCHEMA = "id BIGINT, name STRING, s STRUCT<a: INT, b: STRING>, day STRING"
ROWS = [(1, "a", (1, "x"), "d1"), (2, "b", (2, "y"), "d2"), (3, "c", None, "d1")]


def sql(text: str):  # type: ignore[no-untyped-def]
    return deltatx.sql(text)


def rows(df) -> list[tuple[object, ...]]:  # type: ignore[no-untyped-def]
    return sorted((tuple(r) for r in df.collect()), key=repr)


def mapped_table(spark: SparkSession, path: Path, mode: str) -> DeltaTable:
    df = spark.createDataFrame(ROWS, SCHEMA)
    deltatx.write(
        df, str(path), partition_by=["day"], properties={"delta.columnMapping.mode": mode}
    )
    return DeltaTable.for_path(spark, str(path))


def log_actions(path: Path, version: int) -> list[dict[str, object]]:
    text = (path / "_delta_log" / f"{version:020d}.json").read_text()
    return [json.loads(line) for line in text.splitlines()]


def physical(dt: DeltaTable, column: str) -> str:
    field = dt.log.snapshot().schema.get(column)
    assert field is not None
    return str(field.metadata[PHYSICAL_NAME_KEY])


@pytest.mark.parametrize("mode", ["name", "id"])
def test_files_stats_and_partition_values_use_physical_names(
    spark: SparkSession, tmp_path: Path, mode: str
) -> None:
    dt = mapped_table(spark, tmp_path, mode)
    assert rows(dt.to_df()) == rows(spark.createDataFrame(ROWS, SCHEMA))
    protocol = dt.log.snapshot().protocol
    assert "columnMapping" in (protocol.reader_features or ())
    ids, names = physical(dt, "id"), physical(dt, "day")
    assert ids.startswith("col-") and names.startswith("col-")
    adds = [a["add"] for a in log_actions(tmp_path, 0) if "add" in a]
    assert adds and all(set(a["partitionValues"]) == {names} for a in adds)  # type: ignore[index]
    stats = json.loads(adds[0]["stats"])  # type: ignore[index]
    assert ids in stats["minValues"] and "id" not in stats["minValues"]
    for file in glob.glob(str(tmp_path / "**" / "*.parquet"), recursive=True):
        schema = pq.read_schema(file)
        assert schema.names == [ids, physical(dt, "name"), physical(dt, "s")]
        field_id = (schema.field(ids).metadata or {}).get(b"PARQUET:field_id")
        expected = dt.log.snapshot().schema.get("id").metadata[ID_KEY]  # type: ignore[union-attr]
        assert field_id == (str(expected).encode() if mode == "id" else None)


def test_id_mode_resolves_columns_by_field_id_not_by_name(
    spark: SparkSession, tmp_path: Path
) -> None:
    """The protocol: in id mode readers resolve columns by field id; a file whose column
    names differ from the physical names still reads correctly."""
    dt = mapped_table(spark, tmp_path, "id")
    file = next(iter(glob.glob(str(tmp_path / "**" / "*.parquet"), recursive=True)))
    table = pq.read_table(file)
    renamed = table.rename_columns([f"other_{i}" for i in range(table.num_columns)])
    schema = renamed.schema
    for i, f in enumerate(table.schema):
        schema = schema.set(i, schema.field(i).with_metadata(f.metadata))
    pq.write_table(renamed.cast(schema), file)
    assert rows(dt.to_df()) == rows(spark.createDataFrame(ROWS, SCHEMA))


def test_rename_then_filter_skips_files_by_the_renamed_columns_statistics(
    spark: SparkSession, tmp_path: Path
) -> None:
    path = str(tmp_path)
    for lo in (0, 100):
        df = spark.range(lo, lo + 10).select("id", (F.col("id") * 2).alias("v")).coalesce(1)
        deltatx.write(df, path, mode="append", properties={"delta.columnMapping.mode": "name"})
    dt = DeltaTable.for_path(spark, path)
    dt.rename_column("v", "doubled")
    assert dt.to_df().columns == ["id", "doubled"]
    predicate = Comparison(ComparisonOp.GT, Column("doubled"), Literal(100))
    files = dt.log.snapshot().scan_files(predicate)
    assert len(files) == 1 and len(dt.log.snapshot().add_files()) == 2
    got = dt.to_df().filter("doubled > 100").select("id").collect()
    assert sorted(r.id for r in got) == list(range(100, 110))


def test_drop_hides_the_column_and_a_new_column_of_that_name_starts_empty(
    spark: SparkSession, tmp_path: Path
) -> None:
    dt = mapped_table(spark, tmp_path, "name")
    dt.drop_columns("name")
    assert dt.to_df().columns == ["id", "s", "day"]
    dt.add_columns("name STRING")
    # The new column has a new physical name: the old values do not come back.
    assert {r["name"] for r in dt.to_df().collect()} == {None}
    assert dt.history().first()["operation"] == "ADD COLUMNS"  # type: ignore[index]
    ops = [r["operation"] for r in dt.history().collect()]
    assert "DROP COLUMNS" in ops
    # A copy into a table without mapping takes the logical names, not this table's ids.
    copy = str(tmp_path / "copy")
    deltatx.write(dt.to_df(), copy)
    copied = DeltaLog.for_table(copy).snapshot().schema
    assert all(ID_KEY not in f.metadata for f in copied.fields)
    assert rows(DeltaTable.for_path(spark, copy).to_df()) == rows(dt.to_df())


def test_sql_turns_mapping_on_for_an_existing_table_then_renames_and_drops(
    spark: SparkSession, tmp_path: Path
) -> None:
    ref = f"delta.`{tmp_path}`"
    df = spark.createDataFrame(ROWS, SCHEMA)
    deltatx.write(df, str(tmp_path), partition_by=["day"])
    dt = DeltaTable.for_path(spark, str(tmp_path))
    before = dt.log.snapshot().version
    with pytest.raises(UnsupportedFeatureError, match=r"delta\.columnMapping\.mode") as info:
        dt.rename_column("name", "label")
    assert info.value.feature == "columnMapping"
    assert dt.log.snapshot().version == before  # nothing was committed
    sql(f"ALTER TABLE {ref} SET TBLPROPERTIES ('delta.columnMapping.mode' = 'name')")
    # The existing files keep working: their columns' physical names are the old names.
    assert physical(dt, "name") == "name"
    sql(f"ALTER TABLE {ref} RENAME COLUMN name TO label")
    sql(f"ALTER TABLE {ref} RENAME COLUMN day TO d")
    sql(f"ALTER TABLE {ref} DROP COLUMNS (s)")
    got = sql(f"SELECT id, label, d FROM {ref} WHERE d = 'd1'")
    assert rows(got) == [(1, "a", "d1"), (3, "c", "d1")]
    assert dt.log.snapshot().partition_columns == ("d",)
    sql(f"ALTER TABLE {ref} DROP COLUMN IF EXISTS nothing_here")
    with pytest.raises(SchemaMismatchError, match="partition column 'd'"):
        sql(f"ALTER TABLE {ref} DROP COLUMN d")


@pytest.mark.parametrize("mode", ["name", "id"])
def test_changing_or_turning_off_the_mode_is_refused(
    spark: SparkSession, tmp_path: Path, mode: str
) -> None:
    dt = mapped_table(spark, tmp_path, mode)
    for to in {"name", "id", "none"} - {mode}:
        with pytest.raises(InvalidPropertyError, match="cannot change"):
            dt.set_properties({"delta.columnMapping.mode": to})
    with pytest.raises(InvalidPropertyError, match="cannot change"):
        dt.unset_properties(["delta.columnMapping.mode"])
    assert dt.log.snapshot().version == 0


def test_id_mode_cannot_be_turned_on_for_an_existing_table(
    spark: SparkSession, tmp_path: Path
) -> None:
    deltatx.write(spark.range(3), str(tmp_path))
    dt = DeltaTable.for_path(spark, str(tmp_path))
    with pytest.raises(InvalidPropertyError, match="'name' mode instead"):
        dt.set_properties({"delta.columnMapping.mode": "id"})


def test_a_constraint_keeps_its_column_from_being_renamed_or_dropped(
    spark: SparkSession, tmp_path: Path
) -> None:
    dt = mapped_table(spark, tmp_path, "name")
    dt.set_properties({"delta.constraints.positive": "id > 0"})
    with pytest.raises(SchemaMismatchError, match="positive"):
        dt.rename_column("id", "key")
    with pytest.raises(SchemaMismatchError, match="positive"):
        dt.drop_columns("id")
    dt.rename_column("name", "label")  # another column is free to go


def test_dml_optimize_and_merge_schema_work_in_logical_names(
    spark: SparkSession, tmp_path: Path
) -> None:
    dt = mapped_table(spark, tmp_path, "name")
    dt.rename_column("name", "label")
    dt.update("label = 'a'", {"label": "'A'", "s": "named_struct('a', 10, 'b', 'z')"})
    dt.delete("id = 2")
    source = spark.createDataFrame([(3, "C"), (4, "D")], "id BIGINT, label STRING")
    (
        dt.alias("t")
        .merge(source.alias("u"), "t.id = u.id")
        .when_matched_update(set={"label": "u.label"})
        .when_not_matched_insert(values={"id": "u.id", "label": "u.label", "day": "'d3'"})
        .execute()
    )
    extra = spark.createDataFrame(
        [(5, "e", None, "d1", 7)], SCHEMA.replace("name", "label") + ", n INT"
    )
    deltatx.write(extra, str(tmp_path), mode="append", merge_schema=True)
    dt.optimize().execute_compaction()
    expected = [
        (1, "A", (10, "z"), "d1", None),
        (3, "C", None, "d1", None),
        (4, "D", None, "d3", None),
        (5, "e", None, "d1", 7),
    ]
    assert rows(dt.to_df()) == sorted(expected, key=repr)
    for file in dt.log.snapshot().add_files():
        assert set(file.partition_values) == {physical(dt, "day")}


def test_the_data_source_reads_and_writes_in_logical_names(
    spark: SparkSession, tmp_path: Path
) -> None:
    dt = mapped_table(spark, tmp_path, "id")
    dt.rename_column("s", "pair")
    more = spark.createDataFrame(
        [(9, "z", (9, "q"), "d2", 1.5)], SCHEMA.replace(" s ", " pair ") + ", w DOUBLE"
    )
    more.write.format("deltatx").mode("append").option("mergeSchema", "true").save(str(tmp_path))
    read = spark.read.format("deltatx").load(str(tmp_path))
    assert read.columns == ["id", "name", "pair", "day", "w"]
    got = read.filter("pair.a >= 2").select("id", "pair.b", "w").collect()
    assert sorted(tuple(r) for r in got) == [(2, "y", None), (9, "q", 1.5)]
    assert rows(read) == rows(dt.to_df())


def test_conflict_detection_reads_the_renamed_columns_statistics(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Delta Lake's isolation-level documentation: under Serializable, a concurrent append
    conflicts only with a transaction that read data the appended file may hold."""
    path = str(tmp_path)
    df = spark.range(0, 10).select("id", F.col("id").alias("v")).coalesce(1)
    props = {"delta.columnMapping.mode": "name", "delta.isolationLevel": "Serializable"}
    deltatx.write(df, path, properties=props)
    dt = DeltaTable.for_path(spark, path)
    dt.rename_column("v", "w")

    def append(lo: int) -> None:
        data = spark.range(lo, lo + 5).select("id", F.col("id").alias("w")).coalesce(1)
        deltatx.write(data, path, mode="append")

    txn = dt.begin()
    txn.delete("w < 5")
    append(100)  # cannot hold w < 5: its statistics, under physical names, say so
    txn.commit()
    txn = dt.begin()
    txn.delete("w < 8")
    append(-50)
    with pytest.raises(ConcurrentAppendException):
        txn.commit()
    assert DeltaLog.for_table(path).snapshot().schema.field_names() == ["id", "w"]
