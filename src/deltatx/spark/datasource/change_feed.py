"""Reading the change data feed: ``option("readChangeFeed", "true")`` and ``dt.changes``.

The driver asks the log which files make up the changes of each version in the range
(:func:`deltatx.log.change_feed.changes_between`); the tasks read those files with pyarrow,
as a plain read does, and add ``_change_type`` (when the file does not carry it),
``_commit_version`` and ``_commit_timestamp``. :func:`read_change_file` is also the unit a
streaming reader uses per commit.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, InputPartition
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import LongType, StringType, StructField, TimestampType
from pyspark.sql.types import StructType as SparkStructType

from deltatx.errors import VersionNotReadableError
from deltatx.kernel.schema import PrimitiveType, StructType, parse_schema
from deltatx.kernel.schema import StructField as DeltaField
from deltatx.log.change_feed import (
    CHANGE_TYPE_COLUMN,
    COMMIT_TIMESTAMP_COLUMN,
    COMMIT_VERSION_COLUMN,
    ChangeFile,
    changes_between,
)
from deltatx.log.delta_log import DeltaLog
from deltatx.spark.datasource.reader import FileReader, FileTask
from deltatx.spark.schema import to_spark_schema

_FILES_PER_TASK = 16


def change_feed_schema(table_schema: StructType) -> SparkStructType:
    """The Spark schema of change feed rows: the table's columns, then the three feed columns."""
    base = to_spark_schema(table_schema)
    return SparkStructType(
        [
            *base.fields,
            StructField(CHANGE_TYPE_COLUMN, StringType(), True),
            StructField(COMMIT_VERSION_COLUMN, LongType(), True),
            StructField(COMMIT_TIMESTAMP_COLUMN, TimestampType(), True),
        ]
    )


def _with_change_type(table_schema: StructType) -> StructType:
    return StructType(
        (*table_schema.fields, DeltaField(CHANGE_TYPE_COLUMN, PrimitiveType("string"), True))
    )


class ChangesPartition(InputPartition):
    """The change files one Spark task reads."""

    def __init__(self, files: tuple[ChangeFile, ...]) -> None:
        """Holds ``files``."""
        super().__init__(None)
        self.files = files


def plan_change_partitions(files: Sequence[ChangeFile]) -> list[InputPartition]:
    """Change files packed a few per task, in order (never an empty list)."""
    # Spark reads an empty partition list as "one partition, whatever it is"; say empty.
    return [
        ChangesPartition(tuple(files[i : i + _FILES_PER_TASK]))
        for i in range(0, len(files), _FILES_PER_TASK)
    ] or [ChangesPartition(())]


class ChangeFeedReader(DataSourceReader):
    """Reads the change rows of versions ``start`` to ``end`` of a table."""

    def __init__(
        self,
        *,
        table_path: str,
        start: int,
        end: int,
        table_schema_json: str,
        partition_columns: Sequence[str],
        column_mapping: str,
    ) -> None:
        """Reads the changes of ``[start, end]``, under the schema of version ``end``."""
        self.table_path = table_path
        self.start = start
        self.end = end
        self.table_schema_json = table_schema_json
        self.partition_columns = tuple(partition_columns)
        self.column_mapping = column_mapping

    def partitions(self) -> list[InputPartition]:
        """The range's change files, a few per task, in version order."""
        files = changes_between(DeltaLog.for_table(self.table_path), self.start, self.end)
        return plan_change_partitions(files)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """The change rows of the partition's files, as Arrow batches."""
        assert isinstance(partition, ChangesPartition)
        schema = parse_schema(self.table_schema_json)
        for f in partition.files:
            yield from read_change_file(
                self.table_path,
                f,
                table_schema=schema,
                partition_columns=self.partition_columns,
                column_mapping=self.column_mapping,
            )


def read_changes(table_path: str, start: int, end: int) -> Iterator[pa.RecordBatch]:
    """The change rows of versions ``start`` to ``end`` (inclusive), read on this process.

    The per-commit call a streaming source makes (``start == end``); the rows follow the
    schema of version ``end``, as a batch read's do.

    Raises:
        ChangeDataNotRecordedError: A version of the range was written with the feed off.
    """
    log = DeltaLog.for_table(table_path)
    snapshot = log.snapshot(end)
    for change in changes_between(log, start, end):
        yield from read_change_file(
            log.table_path,
            change,
            table_schema=snapshot.schema,
            partition_columns=snapshot.partition_columns,
            column_mapping=str(snapshot.table_configuration.column_mapping_mode),
        )


def read_change_file(
    table_path: str,
    change: ChangeFile,
    *,
    table_schema: StructType,
    partition_columns: Sequence[str],
    column_mapping: str = "none",
) -> Iterator[pa.RecordBatch]:
    """The change rows one :class:`ChangeFile` contributes, as Arrow batches.

    The batches have the table's columns, ``_change_type``, ``_commit_version`` and
    ``_commit_timestamp`` (see :func:`change_feed_schema`).

    Raises:
        InvalidTableError: A deletion vector the file needs is missing or corrupt.
        VersionNotReadableError: VACUUM removed the file (change data files age out with the
            table's retention, like removed data files).
    """
    extended = _with_change_type(table_schema)
    spark_schema = to_spark_schema(extended)
    reader = FileReader(
        table_path=table_path,
        schema=spark_schema,
        table_schema_json=extended.to_json(),
        partition_columns=partition_columns,
        column_mapping=column_mapping,
    )
    task = FileTask(
        path=change.path,
        partition_values=change.partition_values,
        size=change.size,
        deletion_vector=change.deletion_vector,
    )
    output = to_arrow_schema(change_feed_schema(table_schema), timezone="UTC")
    wanted = None if change.only_rows is None else np.array(change.only_rows, dtype=np.int64)
    first_row = 0
    type_index = len(table_schema.fields)
    for batch in _file_batches(reader, task, change):
        rows = batch.num_rows
        if wanted is not None:
            # Without a deletion vector every physical row comes out, so positions count up.
            positions = np.arange(first_row, first_row + rows, dtype=np.int64)
            batch = batch.filter(pa.array(np.isin(positions, wanted)))
            first_row += rows
            rows = batch.num_rows
            if not rows:
                continue
        columns = list(batch.columns)
        if change.change_type is not None:
            columns[type_index] = pa.repeat(pa.scalar(change.change_type.value, pa.string()), rows)
        columns.append(pa.repeat(pa.scalar(change.version, pa.int64()), rows))
        columns.append(
            pa.repeat(pa.scalar(change.timestamp * 1000, output.field(type_index + 2).type), rows)
        )
        yield pa.RecordBatch.from_arrays(columns, schema=output)


def _file_batches(
    reader: FileReader, task: FileTask, change: ChangeFile
) -> Iterator[pa.RecordBatch]:
    try:
        yield from reader.read(task)
    except FileNotFoundError as exc:
        raise VersionNotReadableError(
            f"the change data of version {change.version} cannot be read: VACUUM removed "
            f"{change.path} (VACUUM deletes change data older than the table's "
            f"delta.deletedFileRetentionDuration). Read a range of later versions.",
            version=change.version,
            missing_files=(change.path,),
        ) from exc


__all__ = [
    "ChangeFeedReader",
    "ChangesPartition",
    "change_feed_schema",
    "plan_change_partitions",
    "read_change_file",
    "read_changes",
]
