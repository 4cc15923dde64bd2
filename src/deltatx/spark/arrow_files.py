"""Data files read and written by pyarrow in the executors, where Spark cannot reach the store.

Spark's own Parquet reader and writer need a Hadoop connector for the table's scheme (S3A for
S3). Where the session has none, the same work runs in Python tasks: ``mapInArrow`` hands each
task its rows as Arrow batches, and the task reads or writes the Parquet files through the
table's pyarrow filesystem (:attr:`deltatx.storage.location.Location.fs`), which reaches the
store from the executor with the same credentials and endpoint as the driver.

Reading yields each row with its file's index and its position in the file, exactly what
Spark's ``_metadata.row_index`` reports, so deletion vectors and rewrites work unchanged.
Writing puts files straight in their final place (an object store has no rename to make a
staging directory cheap); a file that a failed job leaves behind is in no commit, so no reader
sees it, and VACUUM removes it.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_schema

from deltatx.spark.data_file_writer import DataFileWriter
from deltatx.spark.partition_dirs import partition_directories, partition_value_text
from deltatx.storage.location import Location

FILE_INDEX = "__deltatx_file_index"
ROW_INDEX = "__deltatx_row_index"
_BATCH_ROWS = 64 * 1024
_FILES_PER_TASK = 4
_S3A = "s3a"


def spark_reaches(spark: SparkSession, location: Location) -> bool:
    """Whether Spark's own file sources can read and write the table's files.

    Local files always; S3 when the session has Hadoop's S3A connector on its class path.
    """
    if not location.on_object_store:
        return True
    try:
        jvm = spark.sparkContext._jvm
        assert jvm is not None
        conf = spark.sparkContext._jsc.hadoopConfiguration()
        jvm.org.apache.hadoop.fs.FileSystem.getFileSystemClass(_S3A, conf)
        return True
    except Exception:
        return False


def spark_uri(location: Location, canonical: str) -> str:
    """A canonical location as Spark addresses it (``file://`` or ``s3a://``)."""
    if location.on_object_store:
        return f"{_S3A}://{location.fs_path(canonical)}"
    return "file://" + canonical


# --- reading --------------------------------------------------------------------------------


def read_files(
    spark: SparkSession, location: Location, files: Sequence[str], data_schema: T.StructType
) -> DataFrame:
    """The rows of ``files`` (canonical locations) with :data:`FILE_INDEX` and :data:`ROW_INDEX`.

    Columns are matched by name, case-insensitively (as Spark's reader does), cast to the
    schema's types; a column a file lacks reads as NULL.
    """
    out_schema = T.StructType(
        [
            *data_schema.fields,
            T.StructField(FILE_INDEX, T.LongType(), False),
            T.StructField(ROW_INDEX, T.LongType(), False),
        ]
    )
    arrow = to_arrow_schema(out_schema, timezone="UTC")
    root = location.root
    tasks = max(1, min(len(files) // _FILES_PER_TASK + 1, spark.sparkContext.defaultParallelism))
    listing = spark.createDataFrame(
        list(enumerate(files)), f"{FILE_INDEX} BIGINT, path STRING"
    ).repartition(tasks)

    def read(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        task_location = Location.of(root)
        for batch in batches:
            indexes = batch.column(0).to_pylist()
            paths = batch.column(1).to_pylist()
            for index, path in zip(indexes, paths, strict=True):
                yield from _read_one(task_location, index, path, arrow)

    return listing.mapInArrow(read, out_schema)


def _read_one(
    location: Location, index: int, path: str, arrow: pa.Schema
) -> Iterator[pa.RecordBatch]:
    parquet = pq.ParquetFile(location.fs.open_input_file(location.fs_path(path)))
    names = {n.lower(): n for n in parquet.schema_arrow.names}
    data_fields = list(arrow)[:-2]
    wanted = [names[f.name.lower()] for f in data_fields if f.name.lower() in names]
    first = 0
    for batch in parquet.iter_batches(batch_size=_BATCH_ROWS, columns=wanted):
        rows = batch.num_rows
        arrays: list[pa.Array] = []
        for field in data_fields:
            physical = names.get(field.name.lower())
            if physical is None:
                arrays.append(pa.nulls(rows, field.type))
                continue
            column = batch.column(physical)
            arrays.append(column if column.type == field.type else column.cast(field.type))
        arrays.append(pa.array(np.full(rows, index, dtype=np.int64)))
        arrays.append(pa.array(np.arange(first, first + rows, dtype=np.int64)))
        first += rows
        yield pa.RecordBatch.from_arrays(arrays, schema=arrow)


# --- writing --------------------------------------------------------------------------------


def write_files(
    df: DataFrame,
    location: Location,
    *,
    partition_columns: Sequence[str] = (),
    target_file_rows: int | None = None,
    group_column: str | None = None,
    group_directories: Mapping[int, str] | None = None,
) -> list[tuple[str, dict[str, str | None]]]:
    """Writes the rows of ``df`` as Parquet files under the table root, from the executors.

    Args:
        df: The rows, in the table's column order (partition columns included).
        location: The table.
        partition_columns: Columns whose values name the directories (Hive style) and are
            left out of the files.
        target_file_rows: At most this many rows per file.
        group_column: Instead of partition columns: an integer column that groups the rows
            into one file per value per task (compaction bins); left out of the files.
        group_directories: With ``group_column``: the directory (relative to the root) each
            group's file goes to.

    Returns:
        Each written file's path relative to the root (not encoded) with its partition values
        (or its group, as text).
    """
    keys = [group_column] if group_column is not None else list(partition_columns)
    root = location.root
    dirs = dict(group_directories or {})
    grouped = group_column is not None
    max_rows = target_file_rows or 0

    def write(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        files = _TaskWriter(Location.of(root), keys, grouped, dirs, max_rows)
        try:
            for batch in batches:
                files.add(batch)
            done = files.close()
        except BaseException:
            files.discard()
            raise
        yield pa.RecordBatch.from_arrays(
            [
                pa.array([rel for rel, _ in done], pa.string()),
                pa.array([json.dumps(values) for _, values in done], pa.string()),
            ],
            names=["path", "values"],
        )

    rows = df.mapInArrow(write, "path STRING, values STRING").collect()
    return [(r["path"], json.loads(r["values"])) for r in rows]


class _TaskWriter:
    """The open Parquet files of one task, one per partition value (or group)."""

    def __init__(
        self,
        location: Location,
        keys: list[str],
        grouped: bool,
        dirs: dict[int, str],
        max_rows: int,
    ) -> None:
        self.location = location
        self.keys = keys
        self.grouped = grouped
        self.dirs = dirs
        self.max_rows = max_rows
        self.open: dict[tuple[Any, ...], tuple[str, DataFileWriter, int]] = {}
        # The writer does not close a stream it was given; on S3 the upload ends at close.
        self.sinks: dict[str, Any] = {}
        self.done: list[tuple[str, dict[str, str | None]]] = []

    def add(self, batch: pa.RecordBatch) -> None:
        table = pa.Table.from_batches([batch])
        data = table.drop_columns(self.keys) if self.keys else table
        if not self.keys:
            self._write((), data)
            return
        values = list(zip(*(table.column(k).to_pylist() for k in self.keys), strict=True))
        texts = [
            tuple(v if self.grouped else partition_value_text(v) for v in key) for key in values
        ]
        flat = np.array(["\x00".join("\x01" if t is None else str(t) for t in k) for k in texts])
        unique, inverse = np.unique(flat, return_inverse=True)
        for group in range(len(unique)):
            rows = np.nonzero(inverse == group)[0]
            self._write(texts[int(rows[0])], data.take(pa.array(rows)))

    def _directory(self, key: tuple[Any, ...]) -> str:
        if self.grouped:
            return self.dirs.get(int(key[0]), "")
        return "/".join(partition_directories(self.keys, key))

    def _write(self, key: tuple[Any, ...], table: pa.Table) -> None:
        offset = 0
        while offset < table.num_rows:
            entry = self.open.get(key)
            room = table.num_rows - offset
            if self.max_rows:
                room = min(room, self.max_rows - (0 if entry is None else entry[2]))
            chunk = table.slice(offset, room)
            if entry is None:
                directory = self._directory(key)
                name = f"part-{uuid.uuid4().hex}.c000.snappy.parquet"
                rel = f"{directory}/{name}" if directory else name
                if not self.location.on_object_store and directory:
                    self.location.fs.create_dir(
                        self.location.fs_path(self.location.child(directory)), recursive=True
                    )
                sink = self.location.fs.open_output_stream(
                    self.location.fs_path(self.location.child(rel))
                )
                self.sinks[rel] = sink
                entry = (rel, DataFileWriter(sink, table.schema, first=chunk), 0)
            rel, writer, written = entry
            writer.write_table(chunk)
            offset += room
            written += room
            self.open[key] = (rel, writer, written)
            if self.max_rows and written >= self.max_rows:
                self._finish(key)

    def _finish(self, key: tuple[Any, ...]) -> None:
        rel, writer, _ = self.open.pop(key)
        writer.close()
        self.sinks.pop(rel).close()
        values = {k: None if v is None else str(v) for k, v in zip(self.keys, key, strict=True)}
        self.done.append((rel, values))

    def close(self) -> list[tuple[str, dict[str, str | None]]]:
        for key in list(self.open):
            self._finish(key)
        return self.done

    def discard(self) -> None:
        for rel, writer, _ in self.open.values():
            writer.close()
            self.sinks.pop(rel).close()
            self.done.append((rel, {}))
        self.open.clear()
        for rel, _ in self.done:
            try:
                self.location.fs.delete_file(self.location.fs_path(self.location.child(rel)))
            except (FileNotFoundError, OSError):
                continue
