from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from deltatx.errors import SchemaMismatchError
from deltatx.kernel.schema import ArrayType, PrimitiveType, StructField, StructType
from deltatx.spark.scan import files_to_dataframe
from deltatx.spark.schema import (
    CHAR_VARCHAR_METADATA_KEY,
    check_write_schema,
    conform_to_schema,
    from_spark_schema,
    to_spark_schema,
)
from deltatx.spark.write import decode_uri_path, encode_uri_path, write_files

ROUND_TRIP_DDL = "id long, s string, d date, v double"
SPECIAL = "a b=c%d/e"


def _rows(df: DataFrame) -> list[tuple[Any, ...]]:
    return sorted((tuple(r) for r in df.collect()), key=repr)


def _files_on_disk(root: Path) -> set[str]:
    if not root.exists():
        return set()
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}


def _round_trip_df(spark: SparkSession) -> DataFrame:
    rows = [
        (1, "x", dt.date(2024, 1, 1), 1.5),
        (2, "x", dt.date(2024, 1, 2), None),
        (3, SPECIAL, dt.date(2024, 1, 1), 3.5),
        (4, None, dt.date(2024, 1, 2), 4.5),
        (5, None, None, 5.5),
        (6, "y", dt.date(2024, 1, 1), 6.5),
    ]
    return spark.createDataFrame(rows, ROUND_TRIP_DDL)


@pytest.mark.parametrize("partition_by", [[], ["s"], ["s", "d"], ["d"]])
def test_round_trip(spark: SparkSession, table_dir: Path, partition_by: list[str]) -> None:
    df = _round_trip_df(spark)
    schema = from_spark_schema(df.schema)
    adds = write_files(df, table_path=str(table_dir), partition_columns=partition_by, schema=schema)
    assert adds and all(a.data_change for a in adds)
    # Exactly the added files are on disk: nothing from staging or Spark's bookkeeping.
    assert _files_on_disk(table_dir) == {decode_uri_path(a.path) for a in adds}
    for add in adds:
        assert add.size == (table_dir / decode_uri_path(add.path)).stat().st_size
        assert add.modification_time > 1_600_000_000_000
        assert set(add.partition_values) == set(partition_by)
        assert add.path.count("/") == len(partition_by)
    back = files_to_dataframe(
        spark, table_path=str(table_dir), files=adds, schema=schema, partition_columns=partition_by
    )
    assert back.columns == ["id", "s", "d", "v"]
    assert _rows(back) == _rows(df)


def test_partition_paths_and_values_are_encoded_like_delta(
    spark: SparkSession, table_dir: Path
) -> None:
    df = _round_trip_df(spark)
    schema = from_spark_schema(df.schema)
    adds = write_files(df, table_path=str(table_dir), partition_columns=["s", "d"], schema=schema)
    by_values = {(a.partition_values["s"], a.partition_values["d"]): a for a in adds}
    assert set(by_values) == {
        ("x", "2024-01-01"),
        ("x", "2024-01-02"),
        (SPECIAL, "2024-01-01"),
        (None, "2024-01-02"),
        (None, None),
        ("y", "2024-01-01"),
    }
    special = by_values[(SPECIAL, "2024-01-01")]
    # Spark escapes '=', '%' and '/' in the directory name; the URI path encodes ' ' and '%'.
    assert special.path.startswith("s=a%20b%253Dc%2525d%252Fe/d=2024-01-01/part-")
    assert (table_dir / "s=a b%3Dc%25d%2Fe" / "d=2024-01-01").is_dir()
    null_file = by_values[(None, None)]
    assert null_file.path.startswith("s=__HIVE_DEFAULT_PARTITION__/d=__HIVE_DEFAULT_PARTITION__/")


def test_uri_path_encoding() -> None:
    assert encode_uri_path("a b%3D/é+&,;=x.parquet") == "a%20b%253D/é+&,;=x.parquet"
    assert encode_uri_path('q"#?[]{}|^`<>\\') == "q%22%23%3F%5B%5D%7B%7D%7C%5E%60%3C%3E%5C"
    for text in ["a b%3D/é+&x", "plain/part-0.parquet", "tab\there"]:
        assert decode_uri_path(encode_uri_path(text)) == text


def test_timestamp_partition_values(spark: SparkSession, table_dir: Path) -> None:
    df = spark.sql(
        "SELECT 1L AS id, TIMESTAMP'2024-03-04 05:06:07.5' AS ts UNION ALL "
        "SELECT 2L, TIMESTAMP'2024-03-04 05:06:07' UNION ALL SELECT 3L, NULL"
    )
    schema = from_spark_schema(df.schema)
    adds = write_files(df, table_path=str(table_dir), partition_columns=["ts"], schema=schema)
    assert sorted((a.partition_values["ts"] or "") for a in adds) == [
        "",
        "2024-03-04 05:06:07",
        "2024-03-04 05:06:07.500000",
    ]
    back = files_to_dataframe(
        spark, table_path=str(table_dir), files=adds, schema=schema, partition_columns=["ts"]
    )
    assert _rows(back) == _rows(df)


STATS_DDL = (
    "i int, l long, f double, s string, d date, ts timestamp, b boolean, m decimal(10,2), "
    "big decimal(30,3), p string"
)


def _stats_df(spark: SparkSession) -> DataFrame:
    base = dt.datetime(2024, 5, 6, 7, 8, 9)
    rows = []
    for n in range(40):
        null = n % 7 == 3
        rows.append(
            (
                None if null else n - 20,
                None if n % 5 == 0 else n * 10_000_000_000,
                None if null else n / 4 - 3,
                None if null else f"s{n:03d}",
                None if n % 9 == 0 else dt.date(2023, 1, 1) + dt.timedelta(days=n * 11),
                None if null else base + dt.timedelta(microseconds=n * 123_457),
                None if null else n % 3 == 0,
                None if null else Decimal(n * 7) / 4,
                None if null else Decimal(10**20 + n) / 1000,
                "p1" if n < 20 else "p2",
            )
        )
    return spark.createDataFrame(rows, STATS_DDL)


def _expected_stats(df: DataFrame, columns: list[str]) -> dict[str, Any]:
    aggs = [F.count(F.lit(1)).alias("__n")]
    for c in columns:
        aggs += [
            F.min(c).alias(f"min_{c}"),
            F.max(c).alias(f"max_{c}"),
            F.sum(F.col(c).isNull().cast("long")).alias(f"nulls_{c}"),
        ]
        if c == "ts":
            aggs += [
                F.min(F.unix_micros(c)).alias("min_us_ts"),
                F.max(F.unix_micros(c)).alias("max_us_ts"),
            ]
    return df.agg(*aggs).collect()[0].asDict()


def _iso_millis(micros: int, *, ceil: bool) -> str:
    millis = -((-micros) // 1000) if ceil else micros // 1000
    moment = dt.datetime(1970, 1, 1) + dt.timedelta(milliseconds=millis)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def _json_value(value: Any) -> Any:
    return value.isoformat() if isinstance(value, dt.date) else value


def test_stats_match_dataframe_aggregates(spark: SparkSession, table_dir: Path) -> None:
    df = _stats_df(spark).repartition(3)
    schema = from_spark_schema(df.schema)
    adds = write_files(df, table_path=str(table_dir), partition_columns=["p"], schema=schema)
    assert len(adds) >= 2
    data_columns = [f.name for f in schema.fields if f.name != "p"]
    for add in adds:
        assert add.stats is not None
        stats = json.loads(add.stats, parse_float=Decimal)
        part = files_to_dataframe(
            spark, table_path=str(table_dir), files=[add], schema=schema, partition_columns=["p"]
        )
        expected = _expected_stats(part, data_columns)
        assert stats["numRecords"] == expected["__n"]
        assert "p" not in stats["nullCount"] and "p" not in stats["minValues"]
        for c in data_columns:
            assert stats["nullCount"][c] == expected[f"nulls_{c}"], c
            if c == "ts":
                assert stats["minValues"][c] == _iso_millis(expected["min_us_ts"], ceil=False)
                assert stats["maxValues"][c] == _iso_millis(expected["max_us_ts"], ceil=True)
                continue
            low, high = expected[f"min_{c}"], expected[f"max_{c}"]
            if isinstance(low, float):
                low, high = Decimal(repr(low)), Decimal(repr(high))
            assert stats["minValues"][c] == _json_value(low), c
            assert stats["maxValues"][c] == _json_value(high), c


def test_timestamp_bounds_round_outward_and_no_int96(spark: SparkSession, table_dir: Path) -> None:
    spark.conf.set("spark.sql.parquet.outputTimestampType", "INT96")
    try:
        df = spark.sql(
            "SELECT TIMESTAMP'2024-01-01 10:00:00.123456' AS ts, 1 AS k UNION ALL "
            "SELECT TIMESTAMP'2024-01-01 10:00:00.999999', 2"
        ).coalesce(1)
        schema = from_spark_schema(df.schema)
        adds = write_files(df, table_path=str(table_dir), partition_columns=[], schema=schema)
    finally:
        spark.conf.set("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")
    (add,) = adds
    stats = json.loads(add.stats or "")
    assert stats["minValues"]["ts"] == "2024-01-01T10:00:00.123Z"
    assert stats["maxValues"]["ts"] == "2024-01-01T10:00:01.000Z"
    metadata = pq.read_metadata(table_dir / decode_uri_path(add.path))
    physical = {
        metadata.schema.column(i).name: metadata.schema.column(i).physical_type for i in range(2)
    }
    assert physical["ts"] == "INT64"
    for path in table_dir.rglob("*.parquet"):
        schema_ = pq.read_metadata(path).schema
        assert all(schema_.column(i).physical_type != "INT96" for i in range(len(schema_)))


def test_long_strings_are_truncated_safely(spark: SparkSession, table_dir: Path) -> None:
    long_low, long_high = "a" * 40, "z" * 40
    df = spark.createDataFrame([(long_low,), (long_high,), ("m",)], "s string").coalesce(1)
    schema = from_spark_schema(df.schema)
    (add,) = write_files(df, table_path=str(table_dir), partition_columns=[], schema=schema)
    stats = json.loads(add.stats or "")
    assert stats["minValues"]["s"] == "a" * 32
    high = stats["maxValues"]["s"]
    assert high.startswith("z" * 32) and len(high) == 33 and high >= long_high


def test_nested_stats_and_skipped_types(spark: SparkSession, table_dir: Path) -> None:
    df = spark.sql(
        "SELECT named_struct('a', 1, 'b', 'x') AS st, array(1, 2) AS arr, X'0102' AS bin "
        "UNION ALL SELECT named_struct('a', 5, 'b', NULL), NULL, NULL"
    ).coalesce(1)
    schema = from_spark_schema(df.schema)
    (add,) = write_files(df, table_path=str(table_dir), partition_columns=[], schema=schema)
    stats = json.loads(add.stats or "")
    assert stats["minValues"] == {"st": {"a": 1, "b": "x"}}
    assert stats["maxValues"] == {"st": {"a": 5, "b": "x"}}
    assert stats["nullCount"] == {"st": {"a": 0, "b": 1}, "bin": 1}


def test_empty_dataframe_writes_nothing(spark: SparkSession, table_dir: Path) -> None:
    df = spark.createDataFrame([], ROUND_TRIP_DDL)
    schema = from_spark_schema(df.schema)
    assert write_files(df, table_path=str(table_dir), partition_columns=[], schema=schema) == []
    assert write_files(df, table_path=str(table_dir), partition_columns=["s"], schema=schema) == []
    assert _files_on_disk(table_dir) == set()


def test_target_file_rows_and_data_change(spark: SparkSession, table_dir: Path) -> None:
    df = spark.range(10).coalesce(1)
    schema = from_spark_schema(df.schema)
    adds = write_files(
        df,
        table_path=str(table_dir),
        partition_columns=[],
        schema=schema,
        data_change=False,
        target_file_rows=3,
    )
    assert len(adds) == 4
    assert not any(a.data_change for a in adds)
    assert sum(json.loads(a.stats or "")["numRecords"] for a in adds) == 10


def test_columns_are_matched_by_name_and_cast(spark: SparkSession, table_dir: Path) -> None:
    schema = from_spark_schema(spark.createDataFrame([], "id long, Name string").schema)
    df = spark.createDataFrame([("a", 1), ("b", 2)], "name string, ID int")
    adds = write_files(df, table_path=str(table_dir), partition_columns=[], schema=schema)
    back = files_to_dataframe(
        spark, table_path=str(table_dir), files=adds, schema=schema, partition_columns=[]
    )
    assert back.columns == ["id", "Name"]
    assert _rows(back) == [(1, "a"), (2, "b")]
    written = pq.read_schema(table_dir / decode_uri_path(adds[0].path))
    assert written.names == ["id", "Name"]


def test_write_refuses_mismatched_data_and_writes_nothing(
    spark: SparkSession, table_dir: Path
) -> None:
    schema = from_spark_schema(spark.createDataFrame([], "id long, v string").schema)
    df = spark.createDataFrame([(1, "x", 2)], "id long, v string, extra int")
    with pytest.raises(SchemaMismatchError, match="'extra'") as info:
        write_files(df, table_path=str(table_dir), partition_columns=[], schema=schema)
    assert info.value.column == "extra"
    assert _files_on_disk(table_dir) == set()


def test_not_null_violation_names_the_column(spark: SparkSession, table_dir: Path) -> None:
    schema = StructType(
        (
            StructField("id", PrimitiveType("long"), nullable=False),
            StructField("v", PrimitiveType("string")),
        )
    )
    df = spark.createDataFrame([(1, "a"), (None, "b")], "id long, v string")
    with pytest.raises(SchemaMismatchError, match="NOT NULL column 'id'") as info:
        write_files(df, table_path=str(table_dir), partition_columns=[], schema=schema)
    assert info.value.column == "id"
    assert _files_on_disk(table_dir) == set()


def test_a_frame_that_already_conforms_is_written_as_it_is(spark: SparkSession) -> None:
    """No projection for a frame of the table's exact columns; any difference still gets one."""
    schema = StructType(
        (
            StructField("id", PrimitiveType("long"), nullable=False),
            StructField("v", PrimitiveType("string")),
        )
    )
    exact = spark.range(3).select("id", F.col("id").cast("string").alias("v"))
    assert exact.schema["id"].nullable is False
    assert conform_to_schema(exact, schema) is exact
    # A nullable source of a NOT NULL column, another name's case, another type, another
    # order: each needs the projection (the NULL check, the rename, the cast, the order).
    for other in (
        spark.createDataFrame([(1, "a")], "id long, v string"),
        exact.withColumnRenamed("v", "V"),
        exact.withColumn("id", F.col("id").cast("int")),
        exact.select("v", "id"),
    ):
        conformed = conform_to_schema(other, schema)
        assert conformed is not other
        assert conformed.columns == ["id", "v"]
        assert from_spark_schema(conformed.schema).fields[0].type == PrimitiveType("long")


# --- schema conversion and the write check ----------------------------------------------------


def _schema(spark: SparkSession, ddl: str) -> StructType:
    return from_spark_schema(spark.createDataFrame([], ddl).schema)


def test_schema_conversion_round_trip(spark: SparkSession) -> None:
    ddl = "a int, b struct<x: decimal(10,2), y: array<timestamp>>, c map<string, date>"
    delta = _schema(spark, ddl)
    assert from_spark_schema(to_spark_schema(delta)) == delta
    assert to_spark_schema(delta) == spark.createDataFrame([], ddl).schema


def test_char_varchar_become_strings_and_void_is_refused(spark: SparkSession) -> None:
    from pyspark.sql import types as T

    converted = from_spark_schema(T.StructType([T.StructField("c", T.VarcharType(5))]))
    assert converted.fields[0].type == PrimitiveType("string")
    assert converted.fields[0].metadata[CHAR_VARCHAR_METADATA_KEY] == "varchar(5)"
    with pytest.raises(SchemaMismatchError, match="'n'") as info:
        from_spark_schema(spark.sql("SELECT 1 AS a, NULL AS n").schema)
    assert info.value.column == "n"


def test_check_write_schema(spark: SparkSession) -> None:
    table = _schema(spark, "id long, v string, st struct<a: int>")
    assert check_write_schema(table, table, merge_schema=False) is None
    # Case-insensitive, any order; a lossless cast into the table's type is fine.
    same = _schema(spark, "ST struct<A: int>, V string, Id int")
    assert check_write_schema(table, same, merge_schema=False) is None

    cases = {
        "id": "v string, st struct<a: int>",
        "extra": "id long, v string, st struct<a: int>, extra double",
        "v": "id long, v int, st struct<a: int>",
        "st.a": "id long, v string, st struct<a: string>",
        "st.b": "id long, v string, st struct<a: int, b: int>",
    }
    for column, ddl in cases.items():
        with pytest.raises(SchemaMismatchError, match=f"'{column}'") as info:
            check_write_schema(table, _schema(spark, ddl), merge_schema=False)
        assert info.value.column == column

    # Narrowing, or widening the table, is refused even with merge_schema.
    with pytest.raises(SchemaMismatchError, match=r"'id'.*type widening"):
        check_write_schema(_schema(spark, "id int"), _schema(spark, "id long"), merge_schema=True)
    with pytest.raises(SchemaMismatchError, match="case-insensitive"):
        check_write_schema(table, _schema(spark, "id long, ID long"), merge_schema=True)


def test_merge_schema_appends_nullable_columns(spark: SparkSession) -> None:
    table = _schema(spark, "id long, st struct<a: int>, arr array<struct<x: int>>")
    data = from_spark_schema(
        spark.sql(
            "SELECT CAST(1 AS BIGINT) AS id, named_struct('a', 1, 'b', 'x') AS st, "
            "array(named_struct('x', 1, 'y', 2.0D)) AS arr, 'new' AS extra"
        ).schema
    )
    evolved = check_write_schema(table, data, merge_schema=True)
    assert evolved is not None
    assert evolved.field_names() == ["id", "st", "arr", "extra"]
    assert evolved.fields[3] == StructField("extra", PrimitiveType("string"), True)
    st = evolved.fields[1].type
    assert isinstance(st, StructType) and st.field_names() == ["a", "b"]
    arr = evolved.fields[2].type
    assert isinstance(arr, ArrayType) and isinstance(arr.element_type, StructType)
    assert arr.element_type.field_names() == ["x", "y"]
    assert all(f.nullable for f in evolved.fields)


def test_timestamp_partitions_under_another_session_time_zone(
    spark: SparkSession, table_dir: Path
) -> None:
    spark.conf.set("spark.sql.session.timeZone", "America/New_York")
    try:
        df = spark.sql("SELECT 1L AS id, TIMESTAMP'2024-07-01 08:00:00' AS ts")
        schema = from_spark_schema(df.schema)
        (add,) = write_files(df, table_path=str(table_dir), partition_columns=["ts"], schema=schema)
        # Spark named the directory in New York time; the log holds the UTC instant.
        assert add.partition_values == {"ts": "2024-07-01T12:00:00.000000Z"}
        back = files_to_dataframe(
            spark, table_path=str(table_dir), files=[add], schema=schema, partition_columns=["ts"]
        )
        assert (
            back.select(F.unix_micros("ts")).collect()[0][0]
            == df.select(F.unix_micros("ts")).collect()[0][0]
        )
    finally:
        spark.conf.set("spark.sql.session.timeZone", "UTC")


def test_stats_keep_dotted_names_apart_from_struct_fields(
    spark: SparkSession, table_dir: Path
) -> None:
    df = spark.sql(
        "SELECT 1 AS `a.b`, named_struct('b', 100) AS a, CAST(3 AS TINYINT) AS t, "
        "CAST(4 AS SMALLINT) AS sm, CAST(0.5 AS FLOAT) AS fl, map('k', 1) AS mp"
    )
    schema = from_spark_schema(df.schema)
    (add,) = write_files(df, table_path=str(table_dir), partition_columns=[], schema=schema)
    stats = json.loads(add.stats or "")
    assert stats["minValues"] == {"a.b": 1, "a": {"b": 100}, "t": 3, "sm": 4, "fl": 0.5}
    assert stats["maxValues"] == stats["minValues"]


def test_partition_column_with_a_leading_underscore(spark: SparkSession, table_dir: Path) -> None:
    df = spark.createDataFrame([(1, "a"), (2, None)], "id long, _p string")
    schema = from_spark_schema(df.schema)
    adds = write_files(df, table_path=str(table_dir), partition_columns=["_p"], schema=schema)
    assert sorted(str(a.partition_values["_p"]) for a in adds) == ["None", "a"]
    back = files_to_dataframe(
        spark, table_path=str(table_dir), files=adds, schema=schema, partition_columns=["_p"]
    )
    assert _rows(back) == _rows(df)
