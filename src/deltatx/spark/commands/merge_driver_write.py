"""A MERGE's new rows written on the driver from its copy of the source: no Spark write job.

With deletion vectors, a MERGE whose source the driver holds
(:mod:`deltatx.spark.commands.merge_driver_source`) writes only the new versions of the
updated rows and the inserted rows. When every column of those rows is a source column of
the table column's own type (``update_all`` / ``insert_all``, or ``s.col`` assignments; an
insert leaves the columns it does not set NULL), they are the source's rows rearranged: they
are taken from the driver's copy with pyarrow and written by the ``format("delta")`` task
writer (same file naming, compression and footer statistics), as the driver
UPDATE writes its rows. The statement keeps its Spark write when:

* a value is a Column object, an expression, or a source column of another type (Spark casts);
* an update leaves a column to the target row (its value is not in the source);
* the first WHEN NOT MATCHED clause has a condition;
* a column is CHAR/VARCHAR, the table computes generated columns, has identity columns,
  checks constraints or records its change data feed;
* the session writes Parquet with another codec than the task writer's snappy;
* the rows pass :data:`DRIVER_WRITE_ROWS` or :data:`DRIVER_WRITE_BYTES`;
* a NULL would reach a NOT NULL column (Spark raises its own error).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql import SparkSession
from pyspark.sql import types as T

from deltatx.kernel.actions import AddFile
from deltatx.kernel.schema import StructType
from deltatx.log.transaction import OptimisticTransaction
from deltatx.spark.commands.driver_update import driver_write_plan, driver_writes_allowed
from deltatx.spark.commands.merge_clauses import ClauseKind, MergeClause
from deltatx.spark.datasource.task_files import TaskFiles
from deltatx.spark.schema import CHAR_VARCHAR_METADATA_KEY, to_spark_schema

DRIVER_WRITE_ROWS = 1_000_000
"""Most rows a MERGE writes on the driver; past it the statement runs its Spark write."""

DRIVER_WRITE_BYTES = 256 << 20
"""Most bytes (in Arrow memory) of rows a MERGE writes on the driver."""

_NAME = r"(?:`([^`]+)`|([A-Za-z_][A-Za-z0-9_]*))"
_QUALIFIED = re.compile(rf"^\s*{_NAME}\s*\.\s*{_NAME}\s*$")


@dataclass(frozen=True, slots=True)
class DriverRows:
    """Which source column each table column of the written rows takes.

    Attributes:
        update: Per table column, the source column the matched update sets it to; None
            when no matched update clause applies.
        insert: Per table column, the source column the insert takes (None: NULL); None
            when no row is inserted.
    """

    update: tuple[str, ...] | None
    insert: tuple[str | None, ...] | None

    def rows(
        self, txn: OptimisticTransaction, source: pa.Table, updated: pa.Array, inserted: pa.Array
    ) -> pa.Table | None:
        """The rows to write: the update of source rows ``updated`` (positions), the inserts.

        None when they pass the caps or put a NULL in a NOT NULL column; no column when there
        is no row to write.
        """
        count = (len(updated) if self.update is not None else 0) + (
            len(inserted) if self.insert is not None else 0
        )
        if count > DRIVER_WRITE_ROWS:
            return None
        parts: list[pa.Table] = []
        if self.update is not None and len(updated):
            parts.append(_projected(txn.schema, source.take(updated), self.update))
        if self.insert is not None and len(inserted):
            parts.append(_projected(txn.schema, source.take(inserted), self.insert))
        if not parts:
            return pa.table({})  # deletes alone: the deletion vectors are the whole change
        rows = pa.concat_tables(parts, promote_options="permissive")
        if rows.nbytes > DRIVER_WRITE_BYTES:
            return None
        for f in txn.schema.fields:
            if not f.nullable and rows.column(f.name).null_count:
                return None
        return rows


def plan_driver_rows(
    txn: OptimisticTransaction,
    clauses: Sequence[MergeClause],
    source_schema: T.StructType,
    *,
    source_alias: str,
    target_alias: str,
    spark: SparkSession,
) -> DriverRows | None:
    """How the driver builds the rows a MERGE writes, or None when a Spark job must.

    Args:
        txn: The transaction (after any schema evolution).
        clauses: The MERGE's clauses; no matched clause has a condition.
        source_schema: The source's columns, none named twice (case-insensitively).
        source_alias: The qualifier the ON condition gives the source.
        target_alias: The target's alias.
        spark: The session, whose Parquet codec the written files must have.
    """
    if (
        txn.configuration.identity_columns
        or source_alias.lower() == target_alias.lower()
        or not driver_writes_allowed(txn, spark)
    ):
        return None
    schema = txn.schema
    spark_types = {f.name: f.dataType for f in to_spark_schema(schema).fields}
    if any(CHAR_VARCHAR_METADATA_KEY in f.metadata for f in schema.fields):
        return None
    source_types = {f.name.lower(): f for f in source_schema.fields}
    matched = next((c for c in clauses if c.kind.group == "matched"), None)
    not_matched = next((c for c in clauses if c.kind.group == "not_matched"), None)
    update: tuple[str, ...] | None = None
    insert: tuple[str | None, ...] | None = None
    if matched is not None and matched.kind is ClauseKind.MATCHED_UPDATE:
        found = _sources(schema, matched, source_types, spark_types, source_alias, insert=False)
        if found is None:
            return None
        update = tuple(s for s in found if s is not None)
        if len(update) != len(found):
            return None
    if not_matched is not None:
        if not_matched.condition is not None:
            return None
        inserted = _sources(
            schema, not_matched, source_types, spark_types, source_alias, insert=True
        )
        if inserted is None:
            return None
        insert = tuple(inserted)
    return DriverRows(update=update, insert=insert)


def write_rows(txn: OptimisticTransaction, rows: pa.Table) -> list[AddFile]:
    """Writes ``rows`` (the table's columns) as new data files of the table.

    Raises:
        InvalidTableError: The table's storage refuses the files.
    """
    return TaskFiles(driver_write_plan(txn)).write(rows)


def _sources(
    schema: StructType,
    clause: MergeClause,
    source_fields: Mapping[str, T.StructField],
    spark_types: Mapping[str, T.DataType],
    source_alias: str,
    *,
    insert: bool,
) -> list[str | None] | None:
    """Per table column, the source column ``clause`` sets it to (None: NULL or unset)."""
    assigned: dict[str, str | None] = {}
    if clause.assignments is None:
        assigned = {f.name.lower(): f.name for f in source_fields.values()}
    else:
        for name, value in clause.assignments.items():
            if not isinstance(value, str):
                return None
            column = _source_reference(value, source_alias)
            if column is None or column.lower() not in source_fields:
                return None
            assigned[name.lower()] = source_fields[column.lower()].name
    out: list[str | None] = []
    for f in schema.fields:
        column = assigned.get(f.name.lower())
        if column is None:
            if not insert:
                return None  # the target row's value: not in the source
            out.append(None)
            continue
        if source_fields[column.lower()].dataType != spark_types[f.name]:
            return None
        out.append(column)
    return out


def _source_reference(text: str, source_alias: str) -> str | None:
    """The column of ``source.column`` text, None for anything else."""
    match = _QUALIFIED.match(text)
    if match is None:
        return None
    qualifier = match.group(1) or match.group(2)
    column = match.group(3) or match.group(4)
    return column if qualifier.lower() == source_alias.lower() else None


def _projected(schema: StructType, rows: pa.Table, columns: Sequence[str | None]) -> pa.Table:
    """``rows`` as the table's columns: each the named source column, or NULL."""
    arrays = [rows.column(c) if c is not None else pa.nulls(rows.num_rows) for c in columns]
    return pa.table(dict(zip((f.name for f in schema.fields), arrays, strict=True)))
