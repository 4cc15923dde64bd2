"""The read half of ``format("delta")``: skip files on the driver, read Arrow in the tasks.

Planning (in a Python process Spark starts for it) replays the log at the pinned version,
turns the pushed filters into one predicate and keeps only the files whose partition values
and statistics may satisfy it; the files are packed into partitions by size. A partition
carries, per file, its path, partition values and deletion vector *descriptor*: a task reads
the vector itself, so no partition grows with the number of deleted rows.

Reading a task's files is pyarrow's Parquet reader, batch by batch; each batch gets the
partition values as constant columns, NULL for columns a file lacks (added later to the
table), and the file's deletion vector applied by row position.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql.datasource import DataSourceReader, Filter, InputPartition
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StructType as SparkStructType

from deltatx.errors import InvalidTableError
from deltatx.kernel.actions import AddFile, DeletionVectorDescriptor
from deltatx.kernel.column_mapping import ID_KEY, ColumnMappingMode, physical_schema
from deltatx.kernel.expressions import Expression
from deltatx.kernel.schema import StructType, parse_schema
from deltatx.kernel.values import kind_of_type, parse_partition_value
from deltatx.log.delta_log import DeltaLog
from deltatx.spark.datasource.arrow_names import field_id_names, renamed
from deltatx.spark.datasource.filters import conjunction
from deltatx.spark.dv_filter import deleted_row_indexes
from deltatx.spark.schema import to_spark_schema
from deltatx.spark.write import TableLocation

# Packing files into tasks, as Spark's own file scan does: a task holds up to
# _MAX_TASK_BYTES, each file counting _OPEN_COST more than its size, and tasks shrink (to
# no less than _OPEN_COST) so that a small table still spreads over _MIN_TASKS tasks.
_MAX_TASK_BYTES = 128 * 1024 * 1024
_OPEN_COST = 4 * 1024 * 1024
_MIN_TASKS = 8
_BATCH_ROWS = 64 * 1024


@dataclass(frozen=True, slots=True)
class FileTask:
    """One data file of a task: where it is, its partition values, its deletion vector.

    Attributes:
        path: The file's ``add.path`` (relative to the table root, or a URI).
        partition_values: ``(column, value)`` pairs, values as the log spells them.
        size: The file's size in bytes.
        deletion_vector: The descriptor of the file's deletion vector (not its rows).
    """

    path: str
    partition_values: tuple[tuple[str, str | None], ...]
    size: int
    deletion_vector: DeletionVectorDescriptor | None


class FilesPartition(InputPartition):
    """The files one Spark task reads."""

    def __init__(self, files: tuple[FileTask, ...]) -> None:
        """Holds ``files``; small enough to ship to every task."""
        super().__init__(None)
        self.files = files


def file_task(add: AddFile) -> FileTask:
    """What a task needs to read the live rows of ``add``."""
    return FileTask(
        path=add.path,
        partition_values=tuple(sorted(add.partition_values.items())),
        size=add.size,
        deletion_vector=add.deletion_vector,
    )


class _Source(Protocol):
    @property
    def table_path(self) -> str: ...
    @property
    def schema(self) -> SparkStructType: ...
    @property
    def table_schema_json(self) -> str: ...
    @property
    def partition_columns(self) -> Sequence[str]: ...
    @property
    def column_mapping(self) -> str: ...


def read_partition(source: _Source, partition: InputPartition) -> Iterator[pa.RecordBatch]:
    """The live rows of a planned partition's files (batch and stream reads alike)."""
    if not isinstance(partition, FilesPartition):
        # Spark still runs one task, with a placeholder partition, when there are no files.
        return
    reader = FileReader(
        table_path=source.table_path,
        schema=source.schema,
        table_schema_json=source.table_schema_json,
        partition_columns=source.partition_columns,
        column_mapping=source.column_mapping,
    )
    for task in partition.files:
        yield from reader.read(task)


def plan_partitions(files: Sequence[AddFile]) -> list[FilesPartition]:
    """Packs files into partitions by size, in the order given."""
    tasks = [file_task(f) for f in files]
    total = sum(t.size + _OPEN_COST for t in tasks)
    target = max(_OPEN_COST, min(_MAX_TASK_BYTES, total // _MIN_TASKS))
    out: list[FilesPartition] = []
    current: list[FileTask] = []
    current_bytes = 0
    for task in sorted(tasks, key=lambda t: -t.size):
        cost = task.size + _OPEN_COST
        if current and current_bytes + cost > target:
            out.append(FilesPartition(tuple(current)))
            current, current_bytes = [], 0
        current.append(task)
        current_bytes += cost
    if current:
        out.append(FilesPartition(tuple(current)))
    return out


class DeltaReader(DataSourceReader):
    """Reads one version of a table; holds only what every task needs (no file list)."""

    def __init__(
        self,
        *,
        table_path: str,
        version: int,
        schema: SparkStructType,
        table_schema_json: str,
        partition_columns: Sequence[str],
        column_mapping: str,
    ) -> None:
        """Reads ``version`` of the table at ``table_path``; ``schema`` is its Spark schema."""
        self.table_path = table_path
        self.version = version
        self.schema = schema
        self.table_schema_json = table_schema_json
        self.partition_columns = tuple(partition_columns)
        self.column_mapping = column_mapping
        self.predicate: Expression | None = None

    def pushFilters(self, filters: list[Filter]) -> list[Filter]:
        """Keeps the filters that can skip files; Spark still checks every filter on rows."""
        self.predicate = conjunction(filters)
        return filters

    def files(self) -> list[AddFile]:
        """The files a scan with the pushed filters reads (the others cannot match)."""
        snapshot = DeltaLog.for_table(self.table_path).snapshot(self.version)
        return snapshot.scan_files(self.predicate)

    def partitions(self) -> list[InputPartition]:
        """One partition per group of files, packed by size."""
        return list(plan_partitions(self.files()))

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """The live rows of the partition's files, as Arrow batches of the table schema."""
        yield from read_partition(self, partition)


class FileReader:
    """Reads the live rows of a table's data files in the table schema (batch and stream)."""

    def __init__(
        self,
        *,
        table_path: str,
        schema: SparkStructType,
        table_schema_json: str,
        partition_columns: Sequence[str],
        column_mapping: str,
    ) -> None:
        """Reads files of the table at ``table_path`` as rows of ``schema``."""
        self.table_path = table_path
        self.location = TableLocation.parse(table_path)
        self.arrow_schema = to_arrow_schema(schema, timezone="UTC")
        table_schema: StructType = parse_schema(table_schema_json)
        self.fields = table_schema.fields
        self.partition_columns = {c.lower() for c in partition_columns}
        physical = physical_schema(table_schema, column_mapping)
        self.physical = physical.field_names()
        self.physical_arrow = to_arrow_schema(to_spark_schema(physical), timezone="UTC")
        self.by_field_id = column_mapping == ColumnMappingMode.ID
        self.ids = [f.metadata.get(ID_KEY) for f in self.fields]
        self.string_columns = (
            []
            if self.by_field_id
            else [
                f.name
                for f in self.physical_arrow
                if pa.types.is_string(f.type) or pa.types.is_large_string(f.type)
            ]
        )

    def _open(self, add_path: str, *, dictionaries: Sequence[str] = ()) -> pq.ParquetFile:
        # Resolved as every scan resolves log paths: inside the root, or on the table's store.
        location = self.location.location
        canonical = location.file(add_path, what="data file")
        source = location.fs.open_input_file(location.fs_path(canonical))
        parquet = pq.ParquetFile(source)
        present = set(parquet.schema_arrow.names)
        # pyarrow refuses a dictionary column the file lacks (a partition or later column).
        wanted = [c for c in dictionaries if c in present]
        if not wanted:
            return parquet
        return pq.ParquetFile(source, metadata=parquet.metadata, read_dictionary=wanted)

    def _constant(self, field_index: int, raw: str | None, rows: int) -> pa.Array:
        arrow_type = self.arrow_schema.field(field_index).type
        if raw is None or raw == "":
            return pa.nulls(rows, arrow_type)
        typed = parse_partition_value(raw, kind_of_type(self.fields[field_index].type))
        value: Any = None if typed is None else typed.value
        return pa.repeat(pa.scalar(value, arrow_type), rows)

    def read(self, task: FileTask) -> Iterator[pa.RecordBatch]:
        """The live rows of one file, with its deletion vector applied, a batch at a time.

        Raises:
            InvalidTableError: The file's deletion vector deletes a row past its end.
        """
        deleted: np.ndarray | None = None
        if task.deletion_vector is not None:
            deleted = deleted_row_indexes(
                self.table_path, task.deletion_vector, data_file=task.path
            )
        yield from self._kept_rows(task, drop=deleted, rows=None, whole_row_groups=False)

    def read_physical(
        self, task: FileTask, *, drop: np.ndarray | None = None, rows: int | None = None
    ) -> Iterator[pa.RecordBatch]:
        """The rows one file stores, in file order, less those at physical indexes ``drop``.

        The file's deletion vector is not applied: the caller names the rows to leave out in
        ``drop`` (in any order). Whole row groups are decoded at once, which took half the
        time of pyarrow's batch iterator over the same rows (for the driver's rewrites of a
        few files; :meth:`read` keeps batches small).

        Args:
            task: The file.
            drop: Physical row indexes to leave out.
            rows: How many rows the file must store.

        Raises:
            InvalidTableError: The file does not store ``rows`` rows, or ``drop`` names a row
                past its end.
        """
        yield from self._kept_rows(task, drop=drop, rows=rows, whole_row_groups=True)

    def _kept_rows(
        self,
        task: FileTask,
        *,
        drop: np.ndarray | None,
        rows: int | None,
        whole_row_groups: bool,
    ) -> Iterator[pa.RecordBatch]:
        # Strings stay dictionary-encoded until the dropped rows are gone.
        parquet = self._open(task.path, dictionaries=self.string_columns)
        stored = parquet.metadata.num_rows
        if rows is not None and stored != rows:
            raise InvalidTableError(
                f"data file {task.path} stores {stored} rows where {rows} were read from it "
                "earlier (the file changed outside the table's log)"
            )
        keep: np.ndarray | None = None
        if drop is not None and len(drop):
            last = int(drop.max())
            if last >= stored:
                raise InvalidTableError(
                    f"the deletion vector of data file {task.path} deletes row {last} of its "
                    f"{stored}"
                )
            keep = np.ones(stored, dtype=bool)
            keep[drop] = False
        layout = self._layout(parquet, task)
        chunks: Iterator[pa.Table | pa.RecordBatch] = (
            (
                parquet.read_row_group(g, columns=layout.wanted)
                for g in range(parquet.metadata.num_row_groups)
            )
            if whole_row_groups
            else parquet.iter_batches(batch_size=_BATCH_ROWS, columns=layout.wanted)
        )
        first_row = 0
        for chunk in chunks:
            count = chunk.num_rows
            if keep is not None:
                chunk = chunk.filter(pa.array(keep[first_row : first_row + count]))
            first_row += count
            # A whole row group stays one batch: the driver's rewrite writes it as it is, and
            # slices of it would be joined again (a copy of every column) before writing.
            batches = chunk.to_batches() if isinstance(chunk, pa.Table) else [chunk]
            for batch in batches:
                if batch.num_rows:
                    yield self._conform(batch, layout)

    def read_rows(
        self, task: FileTask, rows: np.ndarray, *, known: pa.Table | None = None
    ) -> Iterator[pa.RecordBatch]:
        """The rows of one file at physical indexes ``rows`` (ascending), in that order.

        Only the row groups holding them are read; the deletion vector is not applied (the
        caller names live rows).

        Args:
            task: The file.
            rows: Physical row indexes, ascending.
            known: Columns of the file already read at ``rows`` (one row per index, under the
                file's column names and types), which are not read again.
        """
        # Strings stay dictionary-encoded until the rows are picked: a row group of 100,000
        # short strings decodes in a quarter of the CPU, and only the picked rows are cast.
        parquet = self._open(task.path, dictionaries=self.string_columns)
        layout = self._layout(parquet, task)
        have = frozenset(() if known is None else known.column_names)
        unread = [c for c in layout.wanted if c not in have]
        first_row = 0
        for group in range(parquet.metadata.num_row_groups):
            count = parquet.metadata.row_group(group).num_rows
            low, high = np.searchsorted(rows, [first_row, first_row + count])
            if high > low:
                local = rows[low:high] - first_row
                if known is None:
                    table = self._picked(parquet, group, unread, local)
                else:
                    table = known.slice(int(low), int(high - low))
                    if unread:
                        read = self._picked(parquet, group, unread, local)
                        for name in table.column_names:
                            read = read.append_column(name, table.column(name))
                        table = read
                for batch in table.to_batches():
                    yield self._conform(batch, layout)
            first_row += count

    @staticmethod
    def _picked(
        parquet: pq.ParquetFile, group: int, columns: list[str], local: np.ndarray
    ) -> pa.Table:
        """Rows ``local`` (ascending) of one row group, ``columns`` only."""
        table = parquet.read_row_group(group, columns=columns, use_threads=False)
        if bool(np.all(np.diff(local) == 1)):
            # One run of rows (a range condition on sorted data): a slice copies nothing.
            return table.slice(int(local[0]), len(local))
        return table.take(pa.array(local))

    def _layout(self, parquet: pq.ParquetFile, task: FileTask) -> _Layout:
        present = set(parquet.schema_arrow.names)
        in_file = list(self.physical)
        if self.by_field_id:
            # Id mode resolves columns by Parquet field id; the names in a file may differ.
            by_id = field_id_names(parquet.schema_arrow)
            in_file = [by_id.get(i, "") if isinstance(i, int) else "" for i in self.ids]
        wanted = [
            p
            for f, p in zip(self.fields, in_file, strict=True)
            if f.name.lower() not in self.partition_columns and p in present
        ]
        values = {k.lower(): v for k, v in task.partition_values}
        return _Layout(present=present, in_file=in_file, wanted=wanted, values=values)

    def _conform(self, batch: pa.RecordBatch, layout: _Layout) -> pa.RecordBatch:
        rows = batch.num_rows
        arrays: list[pa.Array] = []
        for i, (field, stored) in enumerate(zip(self.fields, layout.in_file, strict=True)):
            arrow_type = self.arrow_schema.field(i).type
            if field.name.lower() in self.partition_columns:
                raw = layout.values.get(self.physical[i].lower())
                arrays.append(self._constant(i, raw, rows))
            elif stored in layout.present:
                column = batch.column(stored)
                # Cast under physical names (structs cast by field name), then rename.
                physical_type = self.physical_arrow.field(i).type
                if column.type != physical_type:
                    column = column.cast(physical_type)
                arrays.append(renamed(column, arrow_type))
            else:
                arrays.append(pa.nulls(rows, arrow_type))
        return pa.RecordBatch.from_arrays(arrays, schema=self.arrow_schema)


@dataclass(frozen=True, slots=True)
class _Layout:
    """Where one file keeps the table's columns."""

    present: set[str]
    in_file: list[str]
    wanted: list[str]
    values: dict[str, str | None]
