"""The files one task of a ``format("delta")`` write produces, and the plan every task follows.

A task conforms its Arrow batches to the table schema, checks them against ``replaceWhere`` and
the table's constraints, and writes one Parquet file per partition value
(:class:`~deltatx.spark.data_file_writer.DataFileWriter`), with statistics read back from the
file's footer. Nothing here commits: the writer's driver side does.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_schema

from deltatx.errors import ConstraintViolationError, InvalidArgumentError, SchemaMismatchError
from deltatx.kernel.actions import AddFile
from deltatx.kernel.column_mapping import ColumnMappingMode, physical_columns, physical_schema
from deltatx.kernel.expressions import Expression
from deltatx.kernel.row_evaluation import row_truth
from deltatx.kernel.schema import StructType, parse_schema
from deltatx.log.transaction import OptimisticTransaction
from deltatx.spark.data_file_writer import DataFileWriter
from deltatx.spark.datasource.arrow_names import renamed, with_field_ids
from deltatx.spark.datasource.reader import FileReader, file_task
from deltatx.spark.partition_dirs import partition_directories, partition_value_text
from deltatx.spark.schema import to_spark_schema
from deltatx.spark.stats import file_stats_json
from deltatx.spark.write import TableLocation, encode_uri_path


@dataclass(frozen=True, slots=True)
class WritePlan:
    """What every task needs to write: the target schema, partitioning and checks.

    Attributes:
        table_path: The table root.
        read_version: The version the write started from (-1: no table yet).
        schema_json: The table schema the files are written in (after evolution).
        partition_columns: The table's partition columns after the write.
        replace_where: The ``replaceWhere`` condition, if any.
        predicate: ``replace_where`` as a predicate, which every written row must satisfy.
        column_mapping: The table's column mapping mode; with one, files use the physical
            names (and field ids) ``schema_json`` declares.
        constraints: The table's invariants and CHECK constraints as (name, SQL, predicate);
            the tasks check every row against them.
    """

    table_path: str
    read_version: int
    schema_json: str
    partition_columns: tuple[str, ...]
    replace_where: str | None
    predicate: Expression | None
    column_mapping: str = ColumnMappingMode.NONE.value
    constraints: tuple[tuple[str, str, Expression], ...] = ()


# --- writing files in a task --------------------------------------------------------------------


class TaskFiles:
    """The open Parquet files of one task, one per partition value."""

    def __init__(self, plan: WritePlan) -> None:
        self.plan = plan
        self.location = TableLocation.parse(plan.table_path)
        schema = parse_schema(plan.schema_json)
        self.schema = schema
        parts = {c.lower() for c in plan.partition_columns}
        logical_data = StructType(tuple(f for f in schema.fields if f.name.lower() not in parts))
        self.data_names = logical_data.field_names()
        self.arrow_schema = to_arrow_schema(to_spark_schema(schema), timezone="UTC")
        # Files, statistics and partition directories use physical names (and field ids).
        self.data_schema = physical_schema(logical_data, plan.column_mapping)
        self.data_arrow = with_field_ids(
            to_arrow_schema(to_spark_schema(self.data_schema), timezone="UTC"), self.data_schema
        )
        self.partition_keys = physical_columns(schema, plan.partition_columns)
        self.open: dict[tuple[str | None, ...], tuple[str, DataFileWriter]] = {}
        self.done: list[str] = []
        self.sinks: dict[str, Any] = {}
        self.location.fs.create_dir(self.location.root, recursive=True)

    def _conform(self, batch: pa.RecordBatch) -> pa.Table:
        by_name = {n.lower(): i for i, n in enumerate(batch.schema.names)}
        arrays = []
        for target in self.arrow_schema:
            at = by_name.get(target.name.lower())
            if at is None:
                arrays.append(pa.nulls(batch.num_rows, target.type))
                continue
            column = batch.column(at)
            arrays.append(column if column.type == target.type else column.cast(target.type))
            if not target.nullable and column.null_count:
                raise SchemaMismatchError(
                    f"NULL value in NOT NULL column '{target.name}'; nothing was written.",
                    column=target.name,
                )
        return pa.Table.from_arrays(arrays, schema=self.arrow_schema)

    def _check_replace_where(self, table: pa.Table) -> None:
        predicate = self.plan.predicate
        if predicate is None:
            return
        for row in table.to_pylist():
            if row_truth(predicate, row, self.schema) is not True:
                raise InvalidArgumentError(
                    f"the data to write has rows that do not satisfy replaceWhere "
                    f"'{self.plan.replace_where}'; nothing was written"
                )

    def _check_constraints(self, table: pa.Table) -> None:
        if not self.plan.constraints:
            return
        for row in table.to_pylist():
            for name, sql, predicate in self.plan.constraints:
                if row_truth(predicate, row, self.schema) is not True:
                    raise ConstraintViolationError(
                        f"the {name} ({sql}) is violated by the row {row}; nothing was written.",
                        constraint=name,
                    )

    def add(self, batch: pa.RecordBatch) -> None:
        """Checks a batch and appends it to the file of each partition value it holds.

        Raises:
            SchemaMismatchError: A NULL in a NOT NULL column.
            InvalidArgumentError: A row outside ``replaceWhere``.
            ConstraintViolationError: A row that violates a constraint.
        """
        table = self._conform(batch)
        self._check_replace_where(table)
        self._check_constraints(table)
        parts = list(self.plan.partition_columns)
        if not parts:
            self._write((), table)
            return
        keys = list(zip(*(table.column(c).to_pylist() for c in parts), strict=True))
        texts = [tuple(partition_value_text(v) for v in key) for key in keys]
        unique, inverse = np.unique(
            np.array(["\x00".join("\x01" if t is None else t for t in k) for k in texts]),
            return_inverse=True,
        )
        for group in range(len(unique)):
            rows = np.nonzero(inverse == group)[0]
            self._write(texts[int(rows[0])], table.take(pa.array(rows)))

    def _write(self, values: tuple[str | None, ...], table: pa.Table) -> None:
        data = table.select(self.data_names)
        columns = [renamed(c, f.type) for c, f in zip(data.columns, self.data_arrow, strict=True)]
        stored = pa.Table.from_arrays(columns, schema=self.data_arrow)
        entry = self.open.get(values)
        if entry is None:
            dirs = partition_directories(self.partition_keys, values)
            name = f"part-{uuid.uuid4().hex}.c000.snappy.parquet"
            relative = "/".join([*dirs, name])
            if dirs:
                self.location.fs.create_dir(self.location.fs_path("/".join(dirs)), recursive=True)
            sink = self.location.fs.open_output_stream(self.location.fs_path(relative))
            # The writer does not close a stream it was given; on S3 the upload ends at close.
            self.sinks[relative] = sink
            writer = DataFileWriter(sink, self.data_arrow, first=stored)
            entry = self.open[values] = (relative, writer)
        entry[1].write_table(stored)

    def close(self) -> list[AddFile]:
        """Closes the open files and returns their ``add`` actions, statistics included."""
        out: list[AddFile] = []
        for values, (relative, writer) in self.open.items():
            metadata = writer.close()
            self.sinks.pop(relative).close()
            self.done.append(relative)
            info = self.location.fs.get_file_info(self.location.fs_path(relative))
            out.append(
                AddFile(
                    path=encode_uri_path(relative),
                    partition_values=dict(zip(self.partition_keys, values, strict=True)),
                    size=info.size,
                    modification_time=info.mtime_ns // 1_000_000,
                    data_change=True,
                    stats=file_stats_json(metadata, self.data_schema),
                )
            )
        self.open.clear()
        return out

    def write(self, rows: pa.Table) -> list[AddFile]:
        """Writes ``rows`` and closes the files: their ``add`` actions, or nothing left.

        Raises:
            Whatever :meth:`add` raises; the files already written are deleted first.
        """
        try:
            # One batch, so that no file has an empty row group (a chunk of no rows).
            for batch in rows.combine_chunks().to_batches():
                self.add(batch)
            return self.close()
        except BaseException:
            self.discard()
            raise

    def discard(self) -> None:
        """Closes and deletes every file this task wrote (the task failed); again, nothing."""
        for relative, writer in self.open.values():
            try:
                writer.close()
                self.sinks.pop(relative).close()
            finally:
                self.done.append(relative)
        self.open.clear()
        for relative in self.done:
            with contextlib.suppress(FileNotFoundError):
                self.location.fs.delete_file(self.location.fs_path(relative))
        self.done.clear()


# --- replaceWhere on data columns: keep the rows it does not cover ------------------------------


def rows_outside(
    plan: WritePlan, txn: OptimisticTransaction, files: Sequence[AddFile], predicate: Expression
) -> list[AddFile]:
    """New files holding the live rows of ``files`` that ``predicate`` does not cover."""
    reader = FileReader(
        table_path=plan.table_path,
        schema=to_spark_schema(txn.schema),
        table_schema_json=txn.schema.to_json(),
        partition_columns=txn.partition_columns,
        column_mapping=str(txn.configuration.column_mapping_mode),
    )
    keep_plan = replace(
        plan,
        predicate=None,
        schema_json=txn.schema.to_json(),
        column_mapping=str(txn.configuration.column_mapping_mode),
    )
    out = TaskFiles(keep_plan)
    try:
        for f in files:
            for batch in reader.read(file_task(f)):
                rows = batch.to_pylist()
                keep = [row_truth(predicate, r, txn.schema) is not True for r in rows]
                kept = batch.filter(pa.array(keep))
                if kept.num_rows:
                    out.add(kept)
        return [replace(a, data_change=True) for a in out.close()]
    except BaseException:
        out.discard()
        raise


__all__ = ["TaskFiles", "WritePlan", "rows_outside"]
