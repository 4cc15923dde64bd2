"""format("delta") / format("deltatx"): reads, file skipping, deletion vectors, writes."""

from __future__ import annotations

import json
import pickle
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import datasource as ds

import deltatx
from deltatx import DeltaTable
from deltatx.errors import (
    ConcurrentModificationException,
    TableAlreadyExistsError,
    UnsupportedOptionError,
)
from deltatx.log.delta_log import DeltaLog
from deltatx.spark import dv_filter
from deltatx.spark.datasource import DeltatxDataSource, jvm_delta_loaded
from deltatx.spark.datasource.reader import DeltaReader, FilesPartition
from deltatx.spark.datasource.writer import DeltaWriter


def _rows(df: DataFrame) -> list[tuple[Any, ...]]:
    return sorted(tuple(r) for r in df.collect())


def _reader(path: Path, **options: str) -> DeltaReader:
    source = DeltatxDataSource({"path": str(path), **options})
    reader = source.reader(source.schema())
    assert isinstance(reader, DeltaReader)
    return reader


def _files_read(path: Path, filters: list[ds.Filter]) -> int:
    reader = _reader(path)
    reader.pushFilters(filters)
    return sum(len(p.files) for p in reader.partitions() if isinstance(p, FilesPartition))


# -- registration --------------------------------------------------------------------------------


def test_spark_session_registers_both_names(spark: SparkSession, table_dir: Path) -> None:
    assert not jvm_delta_loaded(spark)
    assert deltatx.configure(spark) is spark
    deltatx.write(spark.range(3), str(table_dir))
    for name in ("delta", "deltatx"):
        assert _rows(spark.read.format(name).load(str(table_dir))) == [(0,), (1,), (2,)]


# -- reads ---------------------------------------------------------------------------------------


def test_read_by_path_version_and_timestamp(spark: SparkSession, table_dir: Path) -> None:
    path = str(table_dir)
    deltatx.write(spark.range(2), path)
    time.sleep(0.05)
    millis = DeltaLog.for_table(path).snapshot(0).timestamp + 1
    between = datetime.fromtimestamp(millis / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S.%f")
    time.sleep(0.05)
    deltatx.write(spark.range(10, 13), path)
    assert len(_rows(spark.read.format("delta").load(path))) == 5
    v0 = spark.read.format("delta").option("versionAsOf", 0).load(path)
    assert _rows(v0) == [(0,), (1,)]
    at = spark.read.format("delta").option("timestampAsOf", between).load(path)
    assert _rows(at) == [(0,), (1,)]


def test_batch_reads_are_spark_native_parquet_scans(spark: SparkSession, table_dir: Path) -> None:
    # A Python data source would move every row through a Python worker and read every
    # column; a batch read is Spark's own scan of the version's files instead.
    path = str(table_dir)
    df = spark.createDataFrame([(i, i % 3, f"s{i}") for i in range(30)], "id long, p int, s string")
    deltatx.write(df, path, partition_by=["p"])
    for read in (
        lambda: spark.read.format("delta").load(path),
        lambda: spark.read.format("deltatx").load(path),
        lambda: spark.read.format("delta").option("path", path).load(),
        lambda: spark.read.load(path, format="delta"),
        lambda: spark.read.format("delta").options(versionAsOf="0").load(path),
    ):
        one_column = read().filter("p = 1").select("s")
        plan = one_column._jdf.queryExecution().executedPlan().toString()
        assert "FileScan parquet" in plan and "Python" not in plan, plan
        assert "ReadSchema: struct<s:string>" in plan, plan
        assert sorted(r.s for r in one_column.collect()) == sorted(
            f"s{i}" for i in range(30) if i % 3 == 1
        )
    # Other formats' readers are untouched.
    parquet = str(table_dir / "p=1")
    assert spark.read.format("parquet").load(parquet).count() == 10


def test_partition_values_and_types_come_from_the_log(spark: SparkSession, table_dir: Path) -> None:
    df = spark.createDataFrame(
        [(1, "a", "2024-01-02", 1.5), (2, None, "2024-01-03", None)],
        "id long, k string, d string, x double",
    ).selectExpr("id", "k", "cast(d as date) d", "x")
    deltatx.write(df, str(table_dir), partition_by=["k", "d"])
    back = spark.read.format("delta").load(str(table_dir))
    assert back.schema == df.schema
    assert _rows(back) == _rows(df)


def test_pushed_filters_skip_files_past_64_partitions(spark: SparkSession, table_dir: Path) -> None:
    path = str(table_dir)
    df = spark.range(0, 800, numPartitions=1).selectExpr("id", "cast(id % 80 as int) p")
    deltatx.write(df, path, partition_by=["p"])
    assert _files_read(table_dir, []) == 80
    assert _files_read(table_dir, [ds.EqualTo(("p",), 7)]) == 1
    assert _files_read(table_dir, [ds.In(("p",), (1, 2, 3))]) == 3
    assert _files_read(table_dir, [ds.LessThan(("p",), 10), ds.GreaterThan(("p",), 5)]) == 4
    assert _files_read(table_dir, [ds.IsNull(("p",))]) == 0
    assert _files_read(table_dir, [ds.Not(ds.EqualTo(("p",), 7))]) == 79
    # Statistics: the file of partition p holds ids p, p + 80, ..., p + 720.
    assert _files_read(table_dir, [ds.GreaterThan(("id",), 900)]) == 0
    assert _files_read(table_dir, [ds.GreaterThanOrEqual(("id",), 795)]) == 5


def test_skipped_files_are_never_opened(spark: SparkSession, table_dir: Path) -> None:
    path = str(table_dir)
    df = spark.range(0, 700, numPartitions=1).selectExpr("id", "cast(id % 70 as int) p")
    deltatx.write(df, path, partition_by=["p"])
    # Corrupt every data file but p = 3's: a scan that opened one would fail.
    for f in DeltaLog.for_table(path).snapshot().add_files():
        if f.partition_values["p"] != "3":
            (table_dir / f.path).write_bytes(b"not parquet")
    got = spark.read.format("delta").load(path).filter("p = 3")
    assert _rows(got) == [(i, 3) for i in range(3, 700, 70)]
    with pytest.raises(Exception):  # noqa: B017 (any Spark failure: the file is garbage)
        spark.read.format("delta").load(path).filter("p = 4").collect()


def test_deletion_vector_rows_are_dropped(spark: SparkSession, table_dir: Path) -> None:
    path = str(table_dir)
    deltatx.write(spark.range(0, 1000, numPartitions=2), path)
    DeltaTable.for_path(spark, path).delete("id % 3 = 0")
    expected = [(i,) for i in range(1000) if i % 3]
    assert _rows(spark.read.format("delta").load(path)) == expected
    assert _rows(DeltaTable.for_path(spark, path).to_df()) == expected
    assert _rows(spark.read.format("delta").option("versionAsOf", 0).load(path)) == [
        (i,) for i in range(1000)
    ]


def _partition_bytes(path: Path) -> int:
    return sum(len(pickle.dumps(p)) for p in _reader(path).partitions())


@pytest.mark.parametrize("extension", [True, False], ids=["reader-extension", "sql-filter"])
def test_tasks_carry_no_deleted_row_ids(
    spark: SparkSession, tmp_path: Path, extension: bool, reader_extension: Callable[[bool], None]
) -> None:
    reader_extension(extension)
    sizes = {}
    plans = {}
    for deleted in (10, 50_000):
        path = tmp_path / f"t{deleted}"
        deltatx.write(spark.range(0, 100_000, numPartitions=1), str(path))
        DeltaTable.for_path(spark, str(path)).delete(f"id < {deleted}")
        reader = _reader(path)
        files = [f for p in reader.partitions() for f in p.files]  # type: ignore[attr-defined]
        assert [f.deletion_vector.cardinality for f in files] == [deleted]
        sizes[deleted] = _partition_bytes(path)
        frame = DeltaTable.for_path(spark, str(path)).to_df()
        plans[deleted] = frame._jdf.queryExecution().executedPlan().toString()
        # A deleted row reads as gone through both paths.
        assert spark.read.format("delta").load(str(path)).count() == 100_000 - deleted
        assert frame.count() == 100_000 - deleted
        assert frame.filter(f"id = {deleted - 1}").count() == 0
        assert frame.filter(f"id = {deleted}").count() == 1
    # 50,000 deleted ids would take at least 50 kB; only the descriptor's numbers differ.
    assert abs(sizes[50_000] - sizes[10]) < 32
    # dt.to_df(): with the reader extension each task reads its own file's vector; without
    # it, the deleted positions travel once per executor with the stage, as one literal
    # block of words the plan names but does not print. No Python sees the rows.
    for plan in plans.values():
        assert ("Parquet with deletion vectors" in plan) == extension, plan
        assert ("UnsafeArrayData" in plan) != extension, plan
        assert "Python" not in plan, plan
    assert abs(len(plans[50_000]) - len(plans[10])) < 64


@pytest.mark.parametrize(
    ("patched", "value", "marker"),
    [
        # Past the broadcast limit, a vectorised Python filter loads each file's vector.
        ("BROADCAST_LIMIT", 10, "Python"),
        # A session that cannot build the literal (no JVM classes for it) joins the words.
        ("long_array", lambda spark, values: None, "BroadcastExchange"),
    ],
    ids=["past-the-broadcast-limit", "no-literal"],
)
@pytest.mark.usefixtures("without_reader_extension")
def test_to_df_drops_deleted_rows_by_the_other_filters(
    spark: SparkSession,
    table_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    patched: str,
    value: object,
    marker: str,
) -> None:
    path = str(table_dir)
    deltatx.write(spark.range(0, 1000, numPartitions=2), path)
    DeltaTable.for_path(spark, path).delete("id % 3 = 0")
    monkeypatch.setattr(dv_filter, patched, value)
    frame = DeltaTable.for_path(spark, path).to_df()
    assert marker in frame._jdf.queryExecution().executedPlan().toString()
    assert _rows(frame) == [(i,) for i in range(1000) if i % 3]


@pytest.mark.sample(every=2)
@pytest.mark.parametrize("words", ["reader-extension", "literal", "dense", "sparse"])
def test_words_drop_deleted_rows_of_files_of_any_size(
    spark: SparkSession,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    words: str,
    reader_extension: Callable[[bool], None],
) -> None:
    # Files of very different sizes, a vector that ends long before its file does (rows past
    # the last word must not reach the next file's words), and a file with no vector, read
    # through both doors and each way the words travel: one literal array in the stage's
    # code, every word in one broadcast array per file, and only the words that delete
    # something joined by key (what a table too large for the array takes); or none of
    # these, the reader extension loading each file's vector in its task.
    reader_extension(words == "reader-extension")
    if words not in ("literal", "reader-extension"):
        monkeypatch.setattr(dv_filter, "LITERAL_WORDS_LIMIT", 0)
    if words == "sparse":
        monkeypatch.setattr(dv_filter, "DENSE_WORDS_LIMIT", 0)
    path = str(tmp_path / "t")
    deltatx.write(spark.range(0, 100_000, numPartitions=1), path)
    deltatx.write(spark.range(100_000, 100_050, numPartitions=1), path, mode="append")
    deltatx.write(spark.range(200_000, 203_000, numPartitions=1), path, mode="append")
    DeltaTable.for_path(spark, path).delete("id < 40 OR id BETWEEN 100010 AND 100012")
    DeltaTable.for_path(spark, path).delete("id % 997 = 0 AND id < 100000")
    expected = [
        (i,)
        for i in [*range(100_000), *range(100_000, 100_050), *range(200_000, 203_000)]
        if not (i < 40 or 100_010 <= i <= 100_012 or (i % 997 == 0 and i < 100_000))
    ]
    frame = DeltaTable.for_path(spark, path).to_df()
    plan = frame._jdf.queryExecution().executedPlan().toString()
    assert "Python" not in plan, plan
    assert ("Parquet with deletion vectors" in plan) == (words == "reader-extension"), plan
    assert ("BroadcastExchange" in plan) == (words in ("dense", "sparse")), plan
    assert ("__deltatx_dv_words" in plan) == (words == "dense"), plan
    assert _rows(frame) == expected
    assert _rows(spark.read.format("delta").load(path)) == expected
    assert _rows(frame.filter("id >= 200000")) == [(i,) for i in range(200_000, 203_000)]


@pytest.mark.usefixtures("without_reader_extension")
def test_a_search_over_many_sizes_keeps_the_words_behind_a_join(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Past a few sizes the file index comes out of a chain of projections; a filter Spark
    # pushed through them would copy the chain at every step, so the words are joined (a
    # join is not pushed through) and the literal is kept for the one-expression search.
    monkeypatch.setattr("deltatx.spark.scan._INLINE_SEARCH_LIMIT", 2)
    path = str(tmp_path / "t")
    for n in (300, 700, 1100, 1500):
        deltatx.write(spark.range(0, n, numPartitions=1), path, mode="append")
    DeltaTable.for_path(spark, path).delete("id % 4 = 1")
    frame = DeltaTable.for_path(spark, path).to_df()
    plan = frame._jdf.queryExecution().executedPlan().toString()
    assert "BroadcastExchange" in plan and "__deltatx_dv_words" in plan, plan
    expected = sorted((i,) for n in (300, 700, 1100, 1500) for i in range(n) if i % 4 != 1)
    assert _rows(frame) == expected
    monkeypatch.setattr("deltatx.spark.scan._INLINE_SEARCH_LIMIT", 16)
    frame = DeltaTable.for_path(spark, path).to_df()
    plan = frame._jdf.queryExecution().executedPlan().toString()
    assert "UnsafeArrayData" in plan and "BroadcastExchange" not in plan, plan
    assert "__deltatx_dv_words" not in plan, plan
    assert _rows(frame) == expected


@pytest.mark.parametrize("extension", [True, False], ids=["reader-extension", "sql-filter"])
def test_deleted_rows_stay_deleted_when_spark_splits_files(
    spark: SparkSession, tmp_path: Path, extension: bool, reader_extension: Callable[[bool], None]
) -> None:
    # Each row's index comes from the Parquet reader, which counts from the file's start even
    # when a task reads only a later part of it: a split must not shift which rows are gone.
    # The reader extension counts rows itself, so it reads a file with a vector whole.
    import pyarrow.parquet as pq

    reader_extension(extension)

    path = str(tmp_path / "t")
    frame = spark.range(0, 200_000, numPartitions=1).selectExpr("id", "uuid() AS pad")
    hadoop = spark.sparkContext._jsc.hadoopConfiguration()  # type: ignore[union-attr]
    hadoop.set("parquet.block.size", "262144")
    try:
        deltatx.write(frame, path)
    finally:
        hadoop.unset("parquet.block.size")
    (data,) = Path(path).glob("*.parquet")
    assert pq.ParquetFile(data).metadata.num_row_groups > 4
    DeltaTable.for_path(spark, path).delete("id % 7 = 0")
    before = spark.conf.get("spark.sql.files.maxPartitionBytes")
    spark.conf.set("spark.sql.files.maxPartitionBytes", "262144")
    try:
        table = DeltaTable.for_path(spark, path).to_df()
        assert (table.rdd.getNumPartitions() == 1) == extension
        expected = [(i,) for i in range(200_000) if i % 7]
        assert _rows(table.select("id")) == expected
        assert _rows(spark.read.format("delta").load(path).select("id")) == expected
    finally:
        spark.conf.set("spark.sql.files.maxPartitionBytes", before)


def test_a_column_named_like_the_readers_row_index_is_refused_by_name(
    spark: SparkSession, tmp_path: Path
) -> None:
    # Spark's Parquet reader fills a column of this name with row positions, whatever the
    # file stores (plain spark.read.parquet returns 0, 1, 2 for 0, 10, 20): reading it would
    # return wrong values, so the read is refused and says how to go on.
    path = str(tmp_path / "t")
    frame = spark.range(0, 10, numPartitions=1).selectExpr(
        "id", "id * 10 AS _TMP_metadata_row_index"
    )
    deltatx.write(frame, path)
    for read in (
        lambda: DeltaTable.for_path(spark, path).to_df(),
        lambda: spark.read.format("delta").load(path).collect(),
    ):
        with pytest.raises(Exception, match=r"_TMP_metadata_row_index.*columnMapping"):
            read()


@pytest.mark.usefixtures("without_reader_extension")
def test_files_without_a_row_count_take_the_broadcast(spark: SparkSession, tmp_path: Path) -> None:
    # The literal words cover each file to its last row, which the statistics' numRecords
    # give; an engine may write no statistics, and then the words are joined by file.
    path = tmp_path / "t"
    deltatx.write(spark.range(0, 3000, numPartitions=3), str(path))
    DeltaTable.for_path(spark, str(path)).delete("id % 3 = 0 AND id < 2500")
    for commit in sorted((path / "_delta_log").glob("*.json")):
        lines = []
        for line in commit.read_text().splitlines():
            action = json.loads(line)
            if "add" in action:
                action["add"].pop("stats", None)
            lines.append(json.dumps(action))
        commit.write_text("\n".join(lines) + "\n")
    frame = DeltaTable.for_path(spark, str(path)).to_df()
    assert "BroadcastExchange" in frame._jdf.queryExecution().executedPlan().toString()
    assert _rows(frame) == [(i,) for i in range(3000) if i % 3 or i >= 2500]


def test_files_of_equal_size_are_told_apart_by_path(spark: SparkSession, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    for _ in range(2):
        deltatx.write(spark.range(0, 500, numPartitions=1), path, mode="append")
    deltatx.write(spark.range(0, 7, numPartitions=1), path, mode="append")
    files = DeltaLog.for_table(path).snapshot().add_files()
    assert len({f.size for f in files}) == 2, "the first two files must be the same size"
    DeltaTable.for_path(spark, path).delete("id % 5 = 0 AND id < 250")
    expected = sorted(
        [(i,) for i in range(500) if not (i % 5 == 0 and i < 250)] * 2
        + [(i,) for i in range(7) if i % 5]
    )
    assert _rows(DeltaTable.for_path(spark, path).to_df()) == expected
    assert _rows(spark.read.format("delta").load(path)) == expected


@pytest.mark.parametrize(
    ("extension", "message"),
    [
        (True, r"read 1000 rows of data file \S+ where the log records 500"),
        (False, r"no log entry matches (a )?data file"),
    ],
    ids=["reader-extension", "sql-filter"],
)
def test_a_data_file_whose_size_is_not_the_logs_fails_the_read(
    spark: SparkSession,
    tmp_path: Path,
    extension: bool,
    message: str,
    reader_extension: Callable[[bool], None],
) -> None:
    # Rows find their file (and so their deletion vector) by its size, or are counted against
    # the log's numRecords: a file that does not match the log must fail the read rather
    # than keep rows the vector deletes.
    reader_extension(extension)
    path = tmp_path / "t"
    deltatx.write(spark.range(0, 1000, numPartitions=2), str(path))
    DeltaTable.for_path(spark, str(path)).delete("id % 2 = 0")
    data = sorted(p for p in path.glob("*.parquet") if p.stat().st_size)
    import pyarrow.parquet as pq

    bigger = pq.read_table(data[0])
    pq.write_table(pa.concat_tables([bigger, bigger]), data[0])
    with pytest.raises(Exception, match=message):
        DeltaTable.for_path(spark, str(path)).to_df().collect()


def test_reading_a_file_list_leaves_the_listing_setting_as_it_was(
    spark: SparkSession, table_dir: Path
) -> None:
    key = "spark.sql.sources.parallelPartitionDiscovery.threshold"
    path = str(table_dir)
    deltatx.write(spark.range(0, 100, numPartitions=40), path)
    assert spark.conf.get(key, None) is None
    assert DeltaTable.for_path(spark, path).to_df().count() == 100
    assert spark.conf.get(key, None) is None
    spark.conf.set(key, "7")
    try:
        assert DeltaTable.for_path(spark, path).to_df().count() == 100
        assert spark.conf.get(key) == "7"
    finally:
        spark.conf.unset(key)


# -- writes --------------------------------------------------------------------------------------


def test_write_modes(spark: SparkSession, table_dir: Path) -> None:
    path = str(table_dir)
    spark.range(3).write.format("delta").save(path)  # default mode: error, table absent
    with pytest.raises(TableAlreadyExistsError):
        spark.range(3).write.format("delta").save(path)
    spark.range(100, 101).write.format("delta").mode("ignore").save(path)
    spark.range(3, 5).write.format("delta").mode("append").save(path)
    assert _rows(DeltaTable.for_path(spark, path).to_df()) == [(i,) for i in range(5)]
    spark.range(7, 8).write.format("delta").mode("overwrite").save(path)
    assert _rows(DeltaTable.for_path(spark, path).to_df()) == [(7,)]
    spark.range(9, 10).write.mode("errorifexists").format("deltatx").save(str(table_dir) + "2")
    assert _rows(spark.read.format("deltatx").load(str(table_dir) + "2")) == [(9,)]


def test_partition_by(spark: SparkSession, table_dir: Path) -> None:
    path = str(table_dir)
    df = spark.range(6).selectExpr("id", "cast(id % 2 as string) k")
    df.write.format("delta").partitionBy("k").save(path)
    snapshot = DeltaLog.for_table(path).snapshot()
    assert snapshot.partition_columns == ("k",)
    assert {f.partition_values["k"] for f in snapshot.add_files()} == {"0", "1"}
    assert all(f.path.startswith("k=") for f in snapshot.add_files())
    assert _rows(spark.read.format("delta").load(path).filter("k = '1'")) == [
        (1, "1"),
        (3, "1"),
        (5, "1"),
    ]
    with pytest.raises(Exception, match="partition"):
        df.write.format("delta").mode("append").partitionBy("id").save(path)


def test_replace_where(spark: SparkSession, table_dir: Path) -> None:
    path = str(table_dir)
    df = spark.range(6).selectExpr("id", "cast(id % 2 as string) k")
    df.write.format("delta").partitionBy("k").save(path)
    new = spark.createDataFrame([(10, "1")], "id long, k string")
    new.write.format("delta").mode("overwrite").option("replaceWhere", "k = '1'").save(path)
    assert _rows(DeltaTable.for_path(spark, path).to_df()) == [
        (0, "0"),
        (2, "0"),
        (4, "0"),
        (10, "1"),
    ]
    # On a data column: the rows it does not cover are kept.
    low = spark.createDataFrame([(1, "0")], "id long, k string")
    low.write.format("delta").mode("overwrite").option("replaceWhere", "id < 3").save(path)
    assert _rows(DeltaTable.for_path(spark, path).to_df()) == [(1, "0"), (4, "0"), (10, "1")]
    with pytest.raises(Exception, match="replaceWhere"):
        new.write.format("delta").mode("overwrite").option("replaceWhere", "k = '0'").save(path)
    assert DeltaLog.for_table(path).latest_version() == 2


def test_merge_and_overwrite_schema(spark: SparkSession, table_dir: Path) -> None:
    path = str(table_dir)
    spark.range(2).write.format("delta").save(path)
    wider = spark.range(2, 3).selectExpr("id", "'x' s")
    with pytest.raises(Exception, match="SchemaMismatchError"):
        wider.write.format("delta").mode("append").save(path)
    wider.write.format("delta").mode("append").option("mergeSchema", "true").save(path)
    assert _rows(DeltaTable.for_path(spark, path).to_df()) == [(0, None), (1, None), (2, "x")]
    other = spark.createDataFrame([("a", 1)], "name string, n int")
    other.write.format("delta").mode("overwrite").option("overwriteSchema", "true").option(
        "partitionBy", "n"
    ).save(path)
    snapshot = DeltaLog.for_table(path).snapshot()
    assert snapshot.schema.field_names() == ["name", "n"]
    assert snapshot.partition_columns == ("n",)
    assert _rows(DeltaTable.for_path(spark, path).to_df()) == [("a", 1)]


def test_null_in_a_not_null_column_writes_nothing(spark: SparkSession, table_dir: Path) -> None:
    path = str(table_dir)
    DeltaTable.create(spark, path, schema="id BIGINT NOT NULL, s STRING")
    bad = spark.createDataFrame([(None, "a")], "id long, s string")
    with pytest.raises(Exception, match=r"NOT NULL column 'id'"):
        bad.write.format("delta").mode("append").save(path)
    assert DeltaLog.for_table(path).latest_version() == 0
    assert [p.name for p in table_dir.iterdir() if p.suffix == ".parquet"] == []


def test_idempotent_writes_and_user_metadata(spark: SparkSession, table_dir: Path) -> None:
    path = str(table_dir)
    for _ in range(2):
        (
            spark.range(3)
            .write.format("delta")
            .mode("append")
            .option("txnAppId", "job")
            .option("txnVersion", "4")
            .option("userMetadata", "nightly")
            .save(path)
        )
    log = DeltaLog.for_table(path)
    assert log.latest_version() == 0
    assert log.snapshot().app_transaction_version("job") == 4
    (entry,) = log.history()
    assert entry.commit_info is not None
    assert entry.commit_info.user_metadata == "nightly"
    assert entry.commit_info.is_blind_append


def test_unknown_options_are_refused(spark: SparkSession, table_dir: Path) -> None:
    path = str(table_dir)
    with pytest.raises(Exception, match=r"(?is)UnsupportedOptionError.*compression"):
        spark.range(1).write.format("delta").option("compression", "zstd").save(path)
    assert not DeltaLog.for_table(path).table_exists()
    spark.range(1).write.format("delta").save(path)
    # A batch read is refused at load(), with deltatx's own error naming the option.
    with pytest.raises(UnsupportedOptionError, match="'recursiveFileLookup'"):
        spark.read.format("delta").option("recursiveFileLookup", "true").load(path)


# -- transactions --------------------------------------------------------------------------------


def _staged_writer(
    spark: SparkSession, path: str, rows: range, *, overwrite: bool
) -> tuple[DeltaWriter, Any]:
    df = spark.createDataFrame([(i,) for i in rows], "id long")
    source = DeltatxDataSource({"path": path})
    writer = source.writer(df.schema, overwrite)
    assert isinstance(writer, DeltaWriter)
    batch = pa.record_batch([pa.array(list(rows), pa.int64())], names=["id"])
    return writer, writer.write(iter([batch]))


def test_blind_append_does_not_conflict_with_a_concurrent_delete(
    spark: SparkSession, table_dir: Path
) -> None:
    path = str(table_dir)
    deltatx.write(spark.range(10), path)
    writer, message = _staged_writer(spark, path, range(100, 103), overwrite=False)
    DeltaTable.for_path(spark, path).delete("id < 5")  # commits while the write runs
    writer.commit([message])
    log = DeltaLog.for_table(path)
    assert log.latest_version() == 2
    last = log.history(1)[0].commit_info
    assert last is not None and last.is_blind_append and last.read_version == 0
    assert _rows(spark.read.format("delta").load(path)) == [
        (i,) for i in [*range(5, 10), 100, 101, 102]
    ]


def test_overwrite_conflicts_with_a_concurrent_delete(spark: SparkSession, table_dir: Path) -> None:
    path = str(table_dir)
    deltatx.write(spark.range(10, numPartitions=1), path)
    writer, message = _staged_writer(spark, path, range(100, 103), overwrite=True)
    DeltaTable.for_path(spark, path).delete("id < 5")
    with pytest.raises(ConcurrentModificationException):
        writer.commit([message])
    assert DeltaLog.for_table(path).latest_version() == 1
    # The failed write's files were deleted; the table still reads as the delete left it.
    assert _rows(spark.read.format("delta").load(path)) == [(i,) for i in range(5, 10)]


# -- dt.to_df() on partitions --------------------------------------------------------------------


@pytest.mark.parametrize("partitions", [4, 70])
def test_to_df_prunes_partitions(spark: SparkSession, table_dir: Path, partitions: int) -> None:
    # Files of the other partitions are not Parquet: reading one would fail the query. Few
    # partitions and many take the same single scan (Spark's partition discovery).
    path = str(table_dir)
    df = spark.range(0, 700, numPartitions=1).selectExpr(
        "id", f"cast(id % {partitions} as int) p", "'x' s"
    )
    deltatx.write(df, path, partition_by=["p"])
    for f in DeltaLog.for_table(path).snapshot().add_files():
        if f.partition_values["p"] != "3":
            (table_dir / f.path).write_bytes(b"not parquet")
    got = DeltaTable.for_path(spark, path).to_df().filter("p = 3")
    assert got.columns == ["id", "p", "s"]
    assert _rows(got) == [(i, 3, "x") for i in range(3, 700, partitions)]


def test_partition_discovery_only_where_paths_match_the_log(
    spark: SparkSession, table_dir: Path
) -> None:
    import dataclasses

    from deltatx.spark.partitioned_scan import partition_discovery_frame

    path = str(table_dir)
    df = spark.range(0, 10, numPartitions=1).selectExpr("id", "cast(id % 2 as string) k")
    deltatx.write(df, path, partition_by=["k"])
    snapshot = DeltaLog.for_table(path).snapshot()
    files = snapshot.add_files()
    args = {"table_path": path, "schema": snapshot.schema, "partition_columns": ["k"]}
    native = partition_discovery_frame(spark, files=files, **args)  # type: ignore[arg-type]
    assert native is not None and _rows(native) == _rows(df)
    relabeled = [dataclasses.replace(f, partition_values={"k": "7"}) for f in files]
    assert partition_discovery_frame(spark, files=relabeled, **args) is None  # type: ignore[arg-type]


def test_a_table_without_files_reads_as_empty(spark: SparkSession, tmp_path: Path) -> None:
    spark.range(0).write.format("delta").save(str(tmp_path / "t"))
    assert spark.read.format("delta").load(str(tmp_path / "t")).count() == 0
