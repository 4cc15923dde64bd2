from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from deltatx.errors import InvalidArgumentError
from deltatx.kernel.actions import AddFile
from deltatx.kernel.schema import PrimitiveType, StructField, StructType
from deltatx.spark.scan import FILE_INDEX_COLUMN, ROW_INDEX_COLUMN, files_to_dataframe
from deltatx.spark.schema import from_spark_schema
from deltatx.spark.write import decode_uri_path, encode_uri_path, write_files


def _rows(df: DataFrame) -> list[tuple[Any, ...]]:
    return sorted((tuple(r) for r in df.collect()), key=repr)


def _write(
    spark: SparkSession, table_dir: Path, ddl: str, rows: list[tuple[Any, ...]], parts: list[str]
) -> tuple[StructType, list[AddFile]]:
    df = spark.createDataFrame(rows, ddl)
    schema = from_spark_schema(df.schema)
    adds = write_files(df, table_path=str(table_dir), partition_columns=parts, schema=schema)
    return schema, adds


def _read(
    spark: SparkSession, table_dir: Path, schema: StructType, adds: list[AddFile], parts: list[str]
) -> DataFrame:
    return files_to_dataframe(
        spark, table_path=str(table_dir), files=adds, schema=schema, partition_columns=parts
    )


def _addressed(
    spark: SparkSession, table_dir: Path, schema: StructType, adds: list[AddFile]
) -> DataFrame:
    """The rows of ``adds`` (partitioned by ``k``) with their file and row indexes."""
    return files_to_dataframe(
        spark,
        table_path=str(table_dir),
        files=adds,
        schema=schema,
        partition_columns=["k"],
        with_address=True,
    )


def test_a_subset_of_files_reads_only_their_rows(spark: SparkSession, table_dir: Path) -> None:
    rows = [(i, f"k{i % 3}") for i in range(9)]
    schema, adds = _write(spark, table_dir, "id long, k string", rows, ["k"])
    assert {a.partition_values["k"] for a in adds} == {"k0", "k1", "k2"}
    chosen = [a for a in adds if a.partition_values["k"] != "k1"]
    back = _read(spark, table_dir, schema, chosen, ["k"])
    assert _rows(back) == sorted((r for r in rows if r[1] != "k1"), key=repr)


def test_no_files_is_an_empty_frame_with_the_schema(spark: SparkSession, table_dir: Path) -> None:
    schema = from_spark_schema(spark.createDataFrame([], "id long, k string").schema)
    back = _read(spark, table_dir, schema, [], ["k"])
    assert back.columns == ["id", "k"]
    assert back.count() == 0


def test_partition_values_come_from_the_log(spark: SparkSession, table_dir: Path) -> None:
    schema, adds = _write(spark, table_dir, "id long, k int", [(1, 10), (2, 20)], ["k"])
    relabeled = [dataclasses.replace(a, partition_values={"k": "7"}) for a in adds]
    assert _rows(_read(spark, table_dir, schema, relabeled, ["k"])) == [(1, 7), (2, 7)]
    nulled = [dataclasses.replace(a, partition_values={"k": ""}) for a in adds]
    assert _rows(_read(spark, table_dir, schema, nulled, ["k"])) == [(1, None), (2, None)]


def test_evolved_schema_reads_old_files_with_nulls(spark: SparkSession, table_dir: Path) -> None:
    schema, adds = _write(spark, table_dir, "id long, p string", [(1, "a"), (2, "b")], ["p"])
    evolved = StructType(
        (
            schema.fields[0],
            StructField("extra", PrimitiveType("double")),
            schema.fields[1],
            StructField("later", PrimitiveType("date")),
        )
    )
    back = _read(spark, table_dir, evolved, adds, ["p"])
    assert back.columns == ["id", "extra", "p", "later"]
    assert _rows(back) == [(1, None, "a", None), (2, None, "b", None)]


def test_unpartitioned_read_ignores_directory_names(spark: SparkSession, table_dir: Path) -> None:
    # Files that happen to sit in a 'k=...' directory are not partitioned by the reader.
    schema, adds = _write(spark, table_dir, "id long, k string", [(1, "x"), (2, "y")], ["k"])
    data_only = StructType((schema.fields[0],))
    back = _read(spark, table_dir, data_only, adds, [])
    assert back.columns == ["id"]
    assert _rows(back) == [(1,), (2,)]


def test_typed_partition_values(spark: SparkSession, table_dir: Path) -> None:
    ddl = "id long, b boolean, d date, m decimal(5,2), ts timestamp"
    df = spark.sql(
        "SELECT 1L AS id, true AS b, DATE'2024-02-29' AS d, 1.50BD AS m, "
        "TIMESTAMP'2024-01-01 00:00:01.25' AS ts"
    ).selectExpr("id", "b", "d", "CAST(m AS decimal(5,2)) AS m", "ts")
    schema = from_spark_schema(spark.createDataFrame([], ddl).schema)
    adds = write_files(
        df, table_path=str(table_dir), partition_columns=["b", "d", "m", "ts"], schema=schema
    )
    (add,) = adds
    assert add.partition_values == {
        "b": "true",
        "d": "2024-02-29",
        "m": "1.50",
        "ts": "2024-01-01 00:00:01.250000",
    }
    back = _read(spark, table_dir, schema, adds, ["b", "d", "m", "ts"])
    assert back.schema == spark.createDataFrame([], ddl).schema
    assert _rows(back) == _rows(df)
    # The protocol's ISO-8601 UTC spelling of a timestamp reads the same.
    iso = dataclasses.replace(
        add, partition_values={**add.partition_values, "ts": "2024-01-01T00:00:01.250000Z"}
    )
    assert _rows(_read(spark, table_dir, schema, [iso], ["b", "d", "m", "ts"])) == _rows(df)


def test_row_filter_sees_file_and_row_indexes(spark: SparkSession, table_dir: Path) -> None:
    df = spark.range(12).coalesce(1)
    schema = from_spark_schema(df.schema)
    adds = write_files(
        df, table_path=str(table_dir), partition_columns=[], schema=schema, target_file_rows=4
    )
    assert len(adds) == 3

    def drop_even_rows_of_first_file(
        rows: DataFrame, file_index: str, row_index: str, *, index_folds: bool
    ) -> DataFrame:
        return rows.filter(f"NOT ({file_index} = 0 AND {row_index} % 2 = 0)")

    back = files_to_dataframe(
        spark,
        table_path=str(table_dir),
        files=adds,
        schema=schema,
        partition_columns=[],
        row_filter=drop_even_rows_of_first_file,
    )
    assert back.columns == ["id"]
    first = json.loads(adds[0].stats or "")
    first_ids = set(range(first["minValues"]["id"], first["maxValues"]["id"] + 1))
    kept = {r[0] for r in back.collect()}
    assert len(kept) == 10
    assert kept == set(range(12)) - {i for i in first_ids if (i - min(first_ids)) % 2 == 0}


def _rename_oddly(
    table_dir: Path, adds: list[AddFile], *, absolute_every_other: bool = False
) -> list[AddFile]:
    """Renames each file to a name full of glob and URI characters; optionally every other
    file is then named by an absolute ``file://`` URI."""
    renamed = []
    for n, add in enumerate(adds):
        old = table_dir / decode_uri_path(add.path)
        new = old.with_name(f"f[{n}] *?{{a}} é+&%41.parquet")
        old.rename(new)
        relative = new.relative_to(table_dir).as_posix()
        path = encode_uri_path(relative)
        if absolute_every_other and n % 2:
            path = "file://" + encode_uri_path(f"{table_dir}/{relative}")
        renamed.append(dataclasses.replace(add, path=path))
    return renamed


def test_file_names_with_glob_and_uri_characters(spark: SparkSession, table_dir: Path) -> None:
    schema, adds = _write(spark, table_dir, "id long, k string", [(1, "x"), (2, "y")], ["k"])
    back = _read(spark, table_dir, schema, _rename_oddly(table_dir, adds), ["k"])
    assert _rows(back) == [(1, "x"), (2, "y")]


def test_absolute_file_uris(spark: SparkSession, table_dir: Path) -> None:
    schema, adds = _write(spark, table_dir, "id long, k string", [(1, "a b")], ["k"])
    absolute = [
        dataclasses.replace(
            a, path="file://" + encode_uri_path(f"{table_dir}/{decode_uri_path(a.path)}")
        )
        for a in adds
    ]
    assert _rows(_read(spark, table_dir, schema, absolute, ["k"])) == [(1, "a b")]


def test_a_file_listed_twice_is_refused(spark: SparkSession, table_dir: Path) -> None:
    schema, adds = _write(spark, table_dir, "id long", [(1,)], [])
    with pytest.raises(InvalidArgumentError, match="twice"):
        _read(spark, table_dir, schema, [adds[0], adds[0]], [])


def test_many_files_and_partitions(spark: SparkSession, table_dir: Path) -> None:
    df = spark.range(300).select(F.col("id"), (F.col("id") % 60).alias("k"))
    schema = from_spark_schema(df.schema)
    adds = write_files(df, table_path=str(table_dir), partition_columns=["k"], schema=schema)
    assert len(adds) >= 60
    back = _read(spark, table_dir, schema, adds, ["k"])
    assert back.filter("id % 60 != k").count() == 0
    assert back.count() == 300


def test_with_address_adds_file_and_row_indexes(spark: SparkSession, table_dir: Path) -> None:
    schema, adds = _write(
        spark, table_dir, "id long, k string", [(i, "a") for i in range(5)], ["k"]
    )
    back = _addressed(spark, table_dir, schema, adds)
    assert back.columns == ["id", "k", FILE_INDEX_COLUMN, ROW_INDEX_COLUMN]
    addresses = [(r[FILE_INDEX_COLUMN], r[ROW_INDEX_COLUMN]) for r in back.collect()]
    assert len(set(addresses)) == 5
    for index, add in enumerate(adds):
        rows = sorted(row for file, row in addresses if file == index)
        assert rows == list(range(json.loads(add.stats or "")["numRecords"]))
    empty = _addressed(spark, table_dir, schema, [])
    assert empty.columns == ["id", "k", FILE_INDEX_COLUMN, ROW_INDEX_COLUMN]


@pytest.mark.parametrize(
    "lookup", ["size search", "ties by join", "broadcast join", "normalised join"]
)
def test_addressed_reads_agree_across_lookups(
    spark: SparkSession, table_dir: Path, monkeypatch: pytest.MonkeyPatch, lookup: str
) -> None:
    """Rows are tied to their file (index, partition values) by a search over file sizes up
    to a number of files (files of one size told apart by path) and by a broadcast join past
    it, or past a number of files sharing a size; all give the same rows, for renamed files
    with URI and glob characters, absolute URIs and NULL partition values. The join looks
    paths spelt as expected up as they are, and normalises the others (every one, past a
    number of files)."""
    if lookup == "ties by join":
        monkeypatch.setattr("deltatx.spark.scan._TIES_LIMIT", 0)
    elif lookup != "size search":
        monkeypatch.setattr("deltatx.spark.scan._SEARCH_LIMIT", 0)
    if lookup == "normalised join":
        monkeypatch.setattr("deltatx.spark.scan._EXACT_LIMIT", 0)
    rows = [(1, "x"), (2, "y"), (3, None), (4, "a b")]
    schema, adds = _write(spark, table_dir, "id long, k string", rows, ["k"])
    spelled = _rename_oddly(table_dir, adds, absolute_every_other=True)
    back = _addressed(spark, table_dir, schema, spelled)
    got = sorted(
        (r["id"], r["k"], r[FILE_INDEX_COLUMN], r[ROW_INDEX_COLUMN]) for r in back.collect()
    )
    by_value = {a.partition_values["k"] or None: i for i, a in enumerate(spelled)}
    assert got == sorted((i, k, by_value[k], 0) for i, k in rows)


@pytest.mark.sample(every=2)
@pytest.mark.parametrize("search", ["inlined", "array"])
@pytest.mark.parametrize("count", [1, 2, 3, 7, 8, 9, 33])
def test_each_row_finds_its_file_by_size(
    spark: SparkSession,
    table_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    count: int,
    search: str,
) -> None:
    """The binary search over the log's file sizes, inlined or over an array padded to one
    less than a power of two: at every file count around one, every row finds its own file,
    including files that share a size (files 2m and 2m + 1 hold the same data, so the same
    bytes)."""
    limit = 10**6 if search == "inlined" else 0
    monkeypatch.setattr("deltatx.spark.scan._INLINE_SEARCH_LIMIT", limit)
    rows = [(1000 * (k // 2) + i, k) for k in range(count) for i in range(1 + k // 2)]
    df = spark.createDataFrame(rows, "id long, k int").coalesce(1)
    schema = from_spark_schema(df.schema)
    adds = write_files(df, table_path=str(table_dir), partition_columns=["k"], schema=schema)
    assert len(adds) == count
    if count > 1:
        assert len({a.size for a in adds}) < count
    back = _addressed(spark, table_dir, schema, adds)
    file_of_k = {int(a.partition_values["k"] or "-1"): i for i, a in enumerate(adds)}
    got = sorted((r["id"], r["k"], r[FILE_INDEX_COLUMN]) for r in back.collect())
    assert got == sorted((i, k, file_of_k[k]) for i, k in rows)
