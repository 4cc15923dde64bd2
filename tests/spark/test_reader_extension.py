"""deltatx's reader extension: built with Spark's own Java compiler, read through by every scan.

Every read here is checked against rows computed in Python and against the same scan with the
extension turned off (the Spark SQL filter), so a fault in either shows as a difference.
"""

from __future__ import annotations

import contextlib
import json
import logging
import struct
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyroaring import BitMap
from pyspark.sql import DataFrame, SparkSession

import deltatx
from deltatx import DeltaTable
from deltatx.errors import ExtensionBuildError, InvalidArgumentError, InvalidTableError
from deltatx.kernel.codec import deletion_vector_to_json
from deltatx.kernel.deletion_vectors import frame_dv_file, inline_descriptor
from deltatx.kernel.roaring import NATIVE_MAGIC, serialize
from deltatx.log.deletion_vectors import DvReader
from deltatx.log.delta_log import DeltaLog
from deltatx.spark import reader_extension as extension_module
from deltatx.spark.datasource.reader import FileReader, file_task
from deltatx.spark.reader_extension import (
    ENABLED_SETTING,
    FORMAT_CLASS,
    VECTORS_OPTION,
    extension_jar,
    reader_available,
    session_jars,
)
from deltatx.spark.schema import to_spark_schema


def _rows(df: DataFrame) -> list[tuple[Any, ...]]:
    return sorted(tuple(r) for r in df.collect())


def _plan(df: DataFrame) -> str:
    return str(df._jdf.queryExecution().executedPlan().toString())


def _read_both(
    spark: SparkSession, use: Callable[[bool], None], read: Callable[[], DataFrame]
) -> list[tuple[Any, ...]]:
    """The rows of ``read()`` with the extension, checked equal to those without it."""
    use(True)
    frame = read()
    assert "Parquet with deletion vectors" in _plan(frame), _plan(frame)
    with_extension = _rows(frame)
    use(False)
    frame = read()
    assert "Parquet with deletion vectors" not in _plan(frame)
    assert _rows(frame) == with_extension
    return with_extension


@contextlib.contextmanager
def _settings(spark: SparkSession, settings: dict[str, str]) -> Iterator[None]:
    """The session settings ``settings`` while the block runs, the old ones after."""
    before = {k: spark.conf.get(k, None) for k in settings}
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, old in before.items():
            if old is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, old)


@pytest.fixture(autouse=True)
def batches(spark: SparkSession) -> Iterator[None]:
    """Spark's default scan: batches, which only whole-stage code generation hands on.

    The other suites' session runs without code generation (``SMALL_DATA_SPARK``); this
    module is about the batch path, so it runs with Spark's default back on.
    """
    with _settings(spark, {"spark.sql.codegen.wholeStage": "true"}):
        yield


# -- the jar ---------------------------------------------------------------------------------


def test_the_jar_is_compiled_once_and_found_after(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DELTATX_CACHE_DIR", str(tmp_path))
    jar = extension_jar()
    assert jar.parent == tmp_path and jar.name.startswith("deltatx-spark-")
    with zipfile.ZipFile(jar) as opened:
        names = set(opened.namelist())
    assert "io/deltatx/spark/DeletionVectorParquetFormat.class" in names
    assert "io/deltatx/spark/DeletionVectorParquetFormat$Rows.class" in names
    assert "io/deltatx/spark/BatchCompactor.class" in names
    assert not list(tmp_path.glob("*.partial"))

    def no_second_build(sources: dict[str, bytes], target: Path) -> None:
        raise AssertionError("the cached jar was compiled again")

    monkeypatch.setattr(extension_module, "_build", no_second_build)
    assert extension_jar() == jar


@pytest.mark.parametrize(
    ("patch", "message"),
    [
        (("find_java", lambda: None), "no Java runtime"),
        (("_pyspark_jars", lambda: Path("/nonexistent")), "Janino is not among PySpark's jars"),
        (("_COMPILER_MAIN", "org.example.NoSuchCompiler"), "compiling .* failed: .*NoSuchCompiler"),
    ],
    ids=["no-java", "no-janino", "compiler-fails"],
)
def test_a_jar_that_cannot_be_built_is_a_typed_error_and_sessions_go_on_without_it(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    patch: tuple[str, Any],
    message: str,
) -> None:
    monkeypatch.setenv("DELTATX_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(extension_module, *patch)
    with pytest.raises(ExtensionBuildError, match=message):
        extension_jar()
    assert not list(tmp_path.iterdir())
    with caplog.at_level(logging.WARNING, logger=extension_module.__name__):
        assert session_jars("a.jar") == "a.jar"
    assert "without its reader extension" in caplog.text


def test_sessions_started_by_deltatx_load_the_jar(spark: SparkSession) -> None:
    assert str(extension_jar()) in spark.conf.get("spark.jars", "")
    assert reader_available(spark)
    assert deltatx.spark_jar() == str(extension_jar())


def test_the_setting_turns_the_extension_off_and_is_checked(
    spark: SparkSession, reader_extension: Callable[[bool], None]
) -> None:
    reader_extension(False)
    assert not reader_available(spark)
    spark.conf.set(ENABLED_SETTING, "maybe")
    with pytest.raises(InvalidArgumentError, match=f"{ENABLED_SETTING} must be"):
        reader_available(spark)


def test_a_session_without_a_jvm_here_takes_the_sql_filter() -> None:
    class Connect:
        _jvm = None

    assert not reader_available(Connect())  # type: ignore[arg-type]


# -- reads -----------------------------------------------------------------------------------


def _deleted_table(spark: SparkSession, path: str, *, files: int = 3, rows: int = 3000) -> None:
    deltatx.write(spark.range(0, rows, numPartitions=files).selectExpr("id", "id * 2 AS v"), path)
    deltatx.write(
        spark.range(rows, rows + 500, numPartitions=1).selectExpr("id", "id * 2 AS v"),
        path,
        mode="append",
    )
    DeltaTable.for_path(spark, path).delete(f"id % 7 = 3 AND id < {rows}")


def _expected(rows: int = 3000) -> list[tuple[int, int]]:
    return [(i, 2 * i) for i in range(rows + 500) if not (i % 7 == 3 and i < rows)]


@pytest.mark.parametrize(
    ("settings_", "query", "keep"),
    [
        ({}, None, lambda row: True),
        # Pushed down: row groups of files without a vector may be skipped; files with one
        # are read whole, so their counted positions stay right.
        ({}, "id > 2900", lambda row: row[0] > 2900),
        # Spark's row-wise Parquet reader instead of batches.
        ({"spark.sql.parquet.enableVectorizedReader": "false"}, None, lambda row: True),
        # Batches in off-heap memory: the deleted-row column must be of the same kind.
        ({"spark.sql.columnVector.offheap.enabled": "true"}, "v >= 10", lambda row: row[1] >= 10),
    ],
    ids=["plain", "pushed-filter", "row-reader", "off-heap"],
)
def test_reads_drop_exactly_the_deleted_rows(
    spark: SparkSession,
    tmp_path: Path,
    reader_extension: Callable[[bool], None],
    settings_: dict[str, str],
    query: str | None,
    keep: Callable[[tuple[int, int]], bool],
) -> None:
    path = str(tmp_path / "t")
    _deleted_table(spark, path)
    expected = [r for r in _expected() if keep(r)]
    with _settings(spark, settings_):

        def read() -> DataFrame:
            frame = DeltaTable.for_path(spark, path).to_df()
            return frame if query is None else frame.filter(query)

        assert _read_both(spark, reader_extension, read) == expected
        assert spark.read.format("delta").load(path).count() == len(_expected())


@pytest.mark.parametrize("partitions", [5, 80], ids=["union-of-partitions", "file-search"])
def test_partitioned_tables(
    spark: SparkSession, tmp_path: Path, reader_extension: Callable[[bool], None], partitions: int
) -> None:
    path = str(tmp_path / "t")
    frame = spark.range(0, 4000, numPartitions=2).selectExpr("id", f"id % {partitions} AS p")
    deltatx.write(frame, path, partition_by=["p"])
    DeltaTable.for_path(spark, path).delete("id % 3 = 0")
    expected = sorted((i, i % partitions) for i in range(4000) if i % 3)
    got = _read_both(spark, reader_extension, lambda: DeltaTable.for_path(spark, path).to_df())
    assert got == expected
    one = _read_both(
        spark, reader_extension, lambda: DeltaTable.for_path(spark, path).to_df().filter("p = 1")
    )
    assert one == [r for r in expected if r[1] == 1]


def test_column_mapping_and_paths_that_need_escaping(
    spark: SparkSession, tmp_path: Path, reader_extension: Callable[[bool], None]
) -> None:
    path = str(tmp_path / "a dir, 100% [x] #1")
    frame = spark.range(0, 2000, numPartitions=2).selectExpr("id", "id * 2 AS `the value`")
    deltatx.write(frame, path, properties={"delta.columnMapping.mode": "name"})
    DeltaTable.for_path(spark, path).delete("id % 4 = 0")
    got = _read_both(spark, reader_extension, lambda: DeltaTable.for_path(spark, path).to_df())
    assert got == [(i, 2 * i) for i in range(2000) if i % 4]


def _deleted_rows(path: Path) -> dict[str, list[int]]:
    """Each file's deleted rows, by its path in the log."""
    reader = DvReader(DeltaLog.for_table(str(path)))
    files = DeltaLog.for_table(str(path)).snapshot().add_files()
    return {f.path: reader.rows(f.deletion_vector, data_file=f.path) for f in files}


def _set_vectors(path: Path, vectors: dict[str, dict[str, Any]]) -> None:
    """Rewrites the newest commit's deletion vectors: ``vectors`` maps a file to its new one."""
    newest = sorted((path / "_delta_log").glob("*.json"))[-1]
    lines = []
    for line in newest.read_text().splitlines():
        action = json.loads(line)
        add = action.get("add")
        if add and add.get("deletionVector"):
            add["deletionVector"] = vectors[add["path"]]
        lines.append(json.dumps(action))
    newest.write_text("\n".join(lines) + "\n")


def test_inline_vectors(
    spark: SparkSession, tmp_path: Path, reader_extension: Callable[[bool], None]
) -> None:
    path = tmp_path / "t"
    _deleted_table(spark, str(path), files=2, rows=200)
    inline = {
        name: deletion_vector_to_json(inline_descriptor(rows))
        for name, rows in _deleted_rows(path).items()
        if rows
    }
    _set_vectors(path, inline)
    got = _read_both(spark, reader_extension, lambda: DeltaTable.for_path(spark, str(path)).to_df())
    assert got == _expected(200)


def _native_bitmap(rows: list[int]) -> bytes:
    """Delta's older native layout: big-endian header, then each 32-bit bitmap with its size."""
    body = BitMap(rows).serialize()
    return struct.pack(">II", NATIVE_MAGIC, 1) + struct.pack(">I", len(body)) + body


def test_vectors_by_absolute_path_in_the_native_layout(
    spark: SparkSession, tmp_path: Path, reader_extension: Callable[[bool], None]
) -> None:
    path = tmp_path / "t"
    _deleted_table(spark, str(path), files=2, rows=2000)
    deleted = {name: rows for name, rows in _deleted_rows(path).items() if rows}
    bitmaps = [_native_bitmap(rows) for rows in deleted.values()]
    data, offsets = frame_dv_file(bitmaps)
    stored = tmp_path / "elsewhere" / "native vectors.bin"
    stored.parent.mkdir()
    stored.write_bytes(data)
    _set_vectors(
        path,
        {
            name: {
                "storageType": "p",
                "pathOrInlineDv": stored.as_uri(),
                "offset": offset,
                "sizeInBytes": len(bitmap),
                "cardinality": len(rows),
            }
            for (name, rows), bitmap, offset in zip(deleted.items(), bitmaps, offsets, strict=True)
        },
    )
    got = _read_both(spark, reader_extension, lambda: DeltaTable.for_path(spark, str(path)).to_df())
    assert got == _expected(2000)


def test_a_corrupt_vector_fails_the_read_naming_its_file(
    spark: SparkSession, tmp_path: Path, reader_extension: Callable[[bool], None]
) -> None:
    path = tmp_path / "t"
    _deleted_table(spark, str(path), files=1, rows=2000)
    (vector,) = path.glob("*.bin")
    data = bytearray(vector.read_bytes())
    data[12] ^= 0xFF
    vector.write_bytes(bytes(data))
    reader_extension(True)
    with pytest.raises(Exception, match=rf"{vector.name}.*checksum mismatch"):
        DeltaTable.for_path(spark, str(path)).to_df().collect()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        # The log's cardinality disagrees with the bitmap it describes.
        (lambda rows: {"cardinality": len(rows) + 1}, r"holds \d+ rows where the log says"),
        # The vector deletes a row the data file does not have.
        (lambda rows: inline_descriptor([*rows, 10_000]), r"deletes row 10000 of its \d+"),
    ],
    ids=["cardinality", "row-past-the-end"],
)
def test_a_vector_that_disagrees_with_its_file_fails_the_read(
    spark: SparkSession,
    tmp_path: Path,
    reader_extension: Callable[[bool], None],
    change: Callable[[list[int]], Any],
    message: str,
) -> None:
    path = tmp_path / "t"
    _deleted_table(spark, str(path), files=2, rows=200)
    vectors = {}
    for name, rows in _deleted_rows(path).items():
        if rows:
            changed = change(rows)
            base = deletion_vector_to_json(inline_descriptor(rows))
            if isinstance(changed, dict):
                vectors[name] = {**base, **changed}
            else:
                vectors[name] = deletion_vector_to_json(changed)
    _set_vectors(path, vectors)
    reader_extension(True)
    with pytest.raises(Exception, match=message):
        DeltaTable.for_path(spark, str(path)).to_df().collect()


def test_files_without_a_vector_are_still_split(
    spark: SparkSession, tmp_path: Path, reader_extension: Callable[[bool], None]
) -> None:
    path = str(tmp_path / "t")
    hadoop = spark.sparkContext._jsc.hadoopConfiguration()  # type: ignore[union-attr]
    hadoop.set("parquet.block.size", "131072")
    try:
        frame = spark.range(0, 100_000, numPartitions=1).selectExpr("id", "uuid() AS pad")
        deltatx.write(frame, path)
        deltatx.write(
            spark.range(100_000, 100_100, numPartitions=1).selectExpr("id", "uuid() AS pad"),
            path,
            mode="append",
        )
    finally:
        hadoop.unset("parquet.block.size")
    DeltaTable.for_path(spark, path).delete("id >= 100000 AND id % 2 = 0")
    before = spark.conf.get("spark.sql.files.maxPartitionBytes")
    spark.conf.set("spark.sql.files.maxPartitionBytes", "262144")
    try:
        reader_extension(True)
        frame = DeltaTable.for_path(spark, path).to_df().select("id")
        assert frame.rdd.getNumPartitions() > 2
        expected = [(i,) for i in range(100_100) if i < 100_000 or i % 2]
        assert _rows(frame) == expected
    finally:
        spark.conf.set("spark.sql.files.maxPartitionBytes", before)


def test_a_file_the_option_does_not_name_fails_the_read(
    spark: SparkSession, tmp_path: Path
) -> None:
    path = tmp_path / "t"
    deltatx.write(spark.range(0, 10, numPartitions=1), str(path))
    (data,) = path.glob("*.parquet")
    reader = (
        spark.read.format(FORMAT_CLASS)
        .schema("id BIGINT")
        .option(VECTORS_OPTION, "file%3A%2F%2F%2Fnot%2Fthis%2Fone.parquet\t-")
    )
    with pytest.raises(Exception, match="is not among the files the log names"):
        reader.load(data.as_uri()).collect()


@settings(
    max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    deletes=st.lists(
        st.tuples(st.integers(2, 40), st.integers(0, 39), st.integers(100, 6000)),
        min_size=1,
        max_size=3,
    )
)
def test_any_sequence_of_deletes_reads_as_the_oracle(
    spark: SparkSession,
    tmp_path_factory: pytest.TempPathFactory,
    reader_extension: Callable[[bool], None],
    deletes: list[tuple[int, int, int]],
) -> None:
    path = str(tmp_path_factory.mktemp("t"))
    deltatx.write(spark.range(0, 6000, numPartitions=3), path)
    live = set(range(6000))
    for modulus, remainder, below in deletes:
        DeltaTable.for_path(spark, path).delete(
            f"id % {modulus} = {remainder % modulus} AND id < {below}"
        )
        live -= {i for i in range(below) if i % modulus == remainder % modulus}
    got = _read_both(spark, reader_extension, lambda: DeltaTable.for_path(spark, path).to_df())
    assert got == sorted((i,) for i in live)


# -- moving kept rows down in each batch -----------------------------------------------------

# One column of every type the reader moves in place, each with NULLs at its own rows (and at
# each level of the nested ones): fixed widths, a string column that stays dictionary-encoded
# and one that does not, binaries, the three storages of decimals (int, long, bytes), arrays,
# maps and structs within structs.
_EVERY_TYPE = [
    "id",
    "IF(id % 11 = 0, NULL, id % 2 = 0) AS b",
    "IF(id % 13 = 0, NULL, CAST(id % 100 AS TINYINT)) AS t",
    "IF(id % 17 = 0, NULL, CAST(id AS SMALLINT)) AS s",
    "IF(id % 19 = 0, NULL, CAST(id * 3 AS INT)) AS i",
    "IF(id % 23 = 0, NULL, CAST(id AS FLOAT) / 3) AS f",
    "IF(id % 29 = 0, NULL, CAST(id AS DOUBLE) / 7) AS d",
    "IF(id % 31 = 0, NULL, CAST(id / 4 AS DECIMAL(7, 2))) AS d_int",
    "IF(id % 37 = 0, NULL, CAST(id * 1000003 AS DECIMAL(16, 3))) AS d_long",
    "IF(id % 41 = 0, NULL, CAST(id AS DECIMAL(30, 5)) * 1000000000) AS d_bytes",
    "IF(id % 43 = 0, NULL, DATE_ADD(DATE'2020-01-01', CAST(id AS INT))) AS dt",
    "IF(id % 47 = 0, NULL, TIMESTAMP_SECONDS(id * 3600)) AS ts",
    "IF(id % 53 = 0, NULL, CAST(TIMESTAMP_SECONDS(id) AS TIMESTAMP_NTZ)) AS ntz",
    "IF(id % 59 = 0, NULL, CONCAT('k', CAST(id % 5 AS STRING))) AS dictionary_string",
    "IF(id % 61 = 0, NULL, SHA2(CAST(id AS STRING), 256)) AS plain_string",
    "IF(id % 67 = 0, NULL, UNHEX(SHA2(CAST(id AS STRING), 224))) AS bin",
    "IF(id % 71 = 0, NULL, ARRAY(IF(id % 3 = 0, NULL, id), id + 1)) AS arr",
    "IF(id % 73 = 0, NULL, MAP(CONCAT('m', CAST(id % 3 AS STRING)), CAST(id AS INT))) AS m",
    "IF(id % 79 = 0, NULL, NAMED_STRUCT("
    "'a', IF(id % 83 = 0, NULL, CAST(id AS INT)), "
    "'b', IF(id % 89 = 0, NULL, CONCAT('x', CAST(id AS STRING))), "
    "'c', NAMED_STRUCT('e', IF(id % 97 = 0, NULL, CAST(id AS DOUBLE)), 'f', ARRAY(id)))) AS st",
]
# Single deleted rows, a run longer than a batch's worth of a file, and rows at batch edges.
_WHOLE_STAGE = "spark.sql.codegen.wholeStage"
_EVERY_TYPE_DELETE = "id % 7 = 3 OR id BETWEEN 1000 AND 1200 OR id % 4096 IN (0, 4095)"


@pytest.mark.sample(every=2)
@pytest.mark.parametrize(
    "settings_",
    [
        {},
        {"spark.sql.parquet.columnarReaderBatchSize": "512"},
        {"spark.sql.columnVector.offheap.enabled": "true"},
        # Rows taken out of the vectorised reader's batches one at a time.
        {_WHOLE_STAGE: "false"},
        {"spark.sql.parquet.enableVectorizedReader": "false"},
    ],
    ids=["batches", "small-batches", "off-heap", "rows-from-batches", "row-reader"],
)
def test_every_type_keeps_its_values_and_nulls(
    spark: SparkSession,
    tmp_path: Path,
    reader_extension: Callable[[bool], None],
    settings_: dict[str, str],
) -> None:
    path = str(tmp_path / "t")
    source = spark.range(0, 9000, numPartitions=2).selectExpr(*_EVERY_TYPE)
    deltatx.write(source, path)
    DeltaTable.for_path(spark, path).delete(_EVERY_TYPE_DELETE)
    assert any(f.deletion_vector for f in DeltaLog.for_table(path).snapshot().add_files())
    expected = _rows(source.filter(f"NOT ({_EVERY_TYPE_DELETE})"))
    with _settings(spark, settings_):
        got = _read_both(spark, reader_extension, lambda: DeltaTable.for_path(spark, path).to_df())
        columnar = "ColumnarToRow" in _plan(DeltaTable.for_path(spark, path).to_df())
    assert got == expected
    # Spark hands batches on only with whole-stage code generation; without it, the vectorised
    # reader gives rows out of its batches.
    assert columnar == (
        not {"spark.sql.parquet.enableVectorizedReader", _WHOLE_STAGE} & set(settings_)
    )


def test_a_type_that_cannot_move_is_read_row_by_row(spark: SparkSession, tmp_path: Path) -> None:
    # A variant column cannot have its rows moved down in place: the scan reads rows, skipping
    # the deleted ones, while a scan of the same file's other columns still reads batches.
    data = tmp_path / "data"
    spark.range(0, 3000, numPartitions=1).selectExpr(
        "id", "PARSE_JSON(CONCAT('{\"n\": ', CAST(id AS STRING), '}')) AS v"
    ).write.parquet(str(data))
    (file,) = data.glob("*.parquet")
    deleted = [i for i in range(3000) if i % 5 == 0]
    bitmap = serialize(deleted).hex()
    option = f"{quote(file.as_uri(), safe='')}\ti\t{bitmap}\t{len(deleted)}\t3000"

    def read(schema: str) -> DataFrame:
        reader = spark.read.format(FORMAT_CLASS).schema(schema).option(VECTORS_OPTION, option)
        return reader.load(file.as_uri())

    rows = read("id BIGINT, v VARIANT").selectExpr("id", "CAST(v:n AS BIGINT) AS n")
    assert "ColumnarToRow" not in _plan(rows)
    assert _rows(rows) == [(i, i) for i in range(3000) if i % 5]
    ids = read("id BIGINT")
    assert "ColumnarToRow" in _plan(ids)
    assert _rows(ids) == [(i,) for i in range(3000) if i % 5]


def test_the_python_reader_also_fails_a_vector_past_the_end(
    spark: SparkSession, tmp_path: Path
) -> None:
    # The Python data source's reader (streaming reads) checks what the Java reader checks.
    path = tmp_path / "t"
    _deleted_table(spark, str(path), files=1, rows=200)
    vectors = {
        name: deletion_vector_to_json(inline_descriptor([*rows, 10_000]))
        for name, rows in _deleted_rows(path).items()
        if rows
    }
    _set_vectors(path, vectors)
    snapshot = DeltaLog.for_table(str(path)).snapshot()
    reader = FileReader(
        table_path=str(path),
        schema=to_spark_schema(snapshot.schema),
        table_schema_json=snapshot.schema.to_json(),
        partition_columns=[],
        column_mapping="none",
    )
    (broken,) = [f for f in snapshot.add_files() if f.path in vectors]
    with pytest.raises(InvalidTableError, match=r"deletes row 10000 of its \d+"):
        list(reader.read(file_task(broken)))
