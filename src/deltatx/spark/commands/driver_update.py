"""UPDATE with deletion vectors written on the driver: no Spark job when the change is small.

Once the driver has found the matched rows (:mod:`deltatx.spark.commands.driver_match`), it
reads just those rows of the touched files (only the row groups holding them) with the
``format("delta")`` reader, applies the SET expressions with pyarrow
(:mod:`deltatx.log.row_level.arrow_assignments`) and writes them as new files with the
``format("delta")`` task writer (same file naming, compression and footer statistics). It
steps aside, and the statement runs its Spark job, when:

* the touched rows pass :data:`DRIVER_UPDATE_ROWS` or an estimated :data:`DRIVER_UPDATE_BYTES`;
* a SET value is a Column object, or SQL pyarrow might evaluate differently from Spark;
* a SET column or a column it reads is CHAR/VARCHAR (Spark pads or checks lengths);
* the table computes generated columns or checks constraints (their SQL runs in Spark), or
  records its change data feed;
* the session writes Parquet with another codec than the driver's writer (snappy);
* a NULL would reach a NOT NULL column (Spark raises its own error).
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, wait
from decimal import Decimal
from itertools import islice

import numpy as np
import pyarrow as pa
from pyspark.sql import Column as SparkColumn
from pyspark.sql import SparkSession
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

from deltatx.kernel.actions import AddFile
from deltatx.kernel.deletion_vectors import num_records
from deltatx.kernel.expressions import Arithmetic, Column, Literal
from deltatx.kernel.schema import StructField, StructType
from deltatx.log.row_level.arrow_assignments import Value, assigned_column
from deltatx.log.row_level.driver_threads import driver_pool
from deltatx.log.row_level.row_indexes import RowIndexes
from deltatx.log.transaction import OptimisticTransaction
from deltatx.progress import step
from deltatx.spark.commands.change_data import records_changes
from deltatx.spark.data_file_writer import COMPRESSION
from deltatx.spark.datasource.reader import FileReader, file_task
from deltatx.spark.datasource.task_files import TaskFiles, WritePlan
from deltatx.spark.expressions import ARITHMETIC_OPERATORS, parse_spark_sql
from deltatx.spark.schema import CHAR_VARCHAR_METADATA_KEY, to_spark_schema

DRIVER_UPDATE_ROWS = 1_000_000
"""Most rows an UPDATE rewrites on the driver; past it the statement runs a Spark job."""

DRIVER_UPDATE_BYTES = 256 << 20
"""Most bytes of touched rows (estimated from their files' sizes) rewritten on the driver."""

CODEC_SETTING = "spark.sql.parquet.compression.codec"
"""The session setting that names the codec of the Parquet files Spark writes."""

_WRITE_ROWS = 1 << 17
"""Updated rows gathered before they are written: a spread change touches a few rows of each
file, and writing each file's few rows on their own costs a call, statistics and a row group."""

_READ_AHEAD = 4
"""Touched files read at once on the driver: each more holds its rows in memory."""

_WRITES_AHEAD = 2
"""Parts of an UPDATE's new rows written by driver threads at once (see ``_Files``)."""

_DIGITS = re.compile(r"^[0-9]+$")
_DECIMAL = re.compile(r"^([0-9]*)\.([0-9]+)$")
_DOUBLE = re.compile(r"^[0-9]+(\.[0-9]*)?[eE][+-]?[0-9]+$")


def update_on_driver(
    txn: OptimisticTransaction,
    candidates: Sequence[AddFile],
    matched: Mapping[int, RowIndexes],
    assignments: Mapping[str, str | SparkColumn],
    *,
    spark: SparkSession,
    known: Mapping[int, pa.Table] | None = None,
) -> list[AddFile] | None:
    """Writes the new versions of the matched rows without Spark; None to use a Spark job.

    Args:
        txn: The transaction (nothing is staged: the caller adds the files).
        candidates: The files the statement read, indexed as in ``matched``.
        matched: Candidate index -> physical indexes (ascending) of the live rows to update.
        assignments: The statement's SET: column name -> SQL text (or a Column).
        spark: The session, whose Parquet codec the written files must have.
        known: Candidate index -> columns of the file already read at its matched rows (by
            the driver's matching), which are not read again.

    Raises:
        InvalidTableError: A touched data file is missing or is not readable Parquet.
    """
    if not _within_caps(candidates, matched) or not driver_writes_allowed(txn, spark):
        return None
    values = translate_assignments(txn.schema, assignments)
    if values is None:
        return None
    reader = driver_reader(txn)
    plan = driver_write_plan(txn)
    step("writing")

    def updated_rows(index: int) -> list[pa.Table] | None:
        positions = np.asarray(matched[index], dtype=np.int64)
        out: list[pa.Table] = []
        task = file_task(candidates[index])
        for batch in reader.read_rows(task, positions, known=(known or {}).get(index)):
            updated = apply_assignments(pa.Table.from_batches([batch]), values, txn.schema)
            if updated is None:
                return None
            out.append(updated)
        return out

    files = _Files(plan)
    pending: list[pa.Table] = []
    try:
        for tables in _in_order(updated_rows, sorted(matched)):
            if tables is None:
                files.discard()
                return None
            pending.extend(tables)
            if sum(t.num_rows for t in pending) >= _WRITE_ROWS:
                files.write_behind(pending)
                pending = []
        return files.close(pending)
    except BaseException:
        files.discard()
        raise


class _Files:
    """The new files of a driver UPDATE: each part of its rows gathered is a file of its own.

    A part is written by a driver thread while the next touched files are read and updated,
    so a large UPDATE writes on every core; at most :data:`_WRITES_AHEAD` parts wait to be
    written. The last part is written by the caller's thread, beside the others.
    """

    def __init__(self, plan: WritePlan) -> None:
        self._plan = plan
        self._outputs: list[TaskFiles] = []
        self._writes: deque[Future[list[AddFile]]] = deque()
        self._added: list[AddFile] = []

    def write_behind(self, tables: list[pa.Table]) -> None:
        """Starts writing ``tables`` as one file, after the oldest part if too many wait."""
        while len(self._writes) >= _WRITES_AHEAD:
            self._added.extend(self._writes.popleft().result())
        out = TaskFiles(self._plan)
        self._outputs.append(out)
        self._writes.append(driver_pool().submit(out.write, pa.concat_tables(tables)))

    def close(self, tables: list[pa.Table]) -> list[AddFile]:
        """Writes the last part here and returns every file's ``add``, once all are written."""
        if tables:
            out = TaskFiles(self._plan)
            self._outputs.append(out)
            last = out.write(pa.concat_tables(tables))
        else:
            last = []
        while self._writes:
            self._added.extend(self._writes.popleft().result())
        return [*self._added, *last]

    def discard(self) -> None:
        """Deletes every file written, once no thread still writes one."""
        wait(self._writes)
        for out in self._outputs:
            out.discard()


def _in_order(
    fn: Callable[[int], list[pa.Table] | None], indexes: Sequence[int]
) -> Iterator[list[pa.Table] | None]:
    """``fn`` of each index in order, the next files read by threads while one is written.

    pyarrow releases the GIL while it reads and writes Parquet, so a touched file is read as
    the one before it is written; at most :data:`_READ_AHEAD` files' rows wait in memory.
    """
    if len(indexes) <= 1:
        # Handing one file to a thread costs more than it saves.
        yield from (fn(i) for i in indexes)
        return
    pool = driver_pool()
    pending: deque[Future[list[pa.Table] | None]] = deque()
    ahead = iter(indexes)
    for i in islice(ahead, _READ_AHEAD):
        pending.append(pool.submit(fn, i))
    try:
        while pending:
            result = pending.popleft().result()
            for i in islice(ahead, 1):
                pending.append(pool.submit(fn, i))
            yield result
    finally:
        for future in pending:
            future.cancel()
        # A read already running finishes before the caller goes on (it may discard files).
        wait(pending)


def driver_write_plan(txn: OptimisticTransaction) -> WritePlan:
    """How the driver writes new data files of the transaction's table (no Spark task)."""
    return WritePlan(
        table_path=txn.log.table_path,
        read_version=txn.read_version,
        schema_json=txn.schema.to_json(),
        partition_columns=txn.partition_columns,
        replace_where=None,
        predicate=None,
        column_mapping=str(txn.configuration.column_mapping_mode),
    )


def driver_reader(txn: OptimisticTransaction) -> FileReader:
    """Reads the transaction's data files on the driver, in the table schema."""
    return FileReader(
        table_path=txn.log.table_path,
        schema=to_spark_schema(txn.schema),
        table_schema_json=txn.schema.to_json(),
        partition_columns=txn.partition_columns,
        column_mapping=str(txn.configuration.column_mapping_mode),
    )


def driver_writes_allowed(txn: OptimisticTransaction, spark: SparkSession) -> bool:
    """Whether the driver may write the statement's rows instead of a Spark job.

    Not when the table computes SQL in Spark (generated columns, constraints) or records its
    change data feed, nor when the session writes Parquet with another codec than the
    driver's writer: the statement's files are then the ones a Spark job would write. The
    session is asked last, since asking is a round trip to the JVM.
    """
    config = txn.configuration
    if config.generated_columns or config.constraint_checks or records_changes(txn):
        return False
    return str(spark.conf.get(CODEC_SETTING, COMPRESSION)).lower() == COMPRESSION


def _within_caps(candidates: Sequence[AddFile], matched: Mapping[int, RowIndexes]) -> bool:
    rows = sum(len(r) for r in matched.values())
    if rows > DRIVER_UPDATE_ROWS:
        return False
    estimated = 0.0
    for index, hits in matched.items():
        f = candidates[index]
        total = num_records(f.stats)
        estimated += f.size if not total else f.size * len(hits) / total
    return estimated <= DRIVER_UPDATE_BYTES


def translate_assignments(
    schema: StructType, assignments: Mapping[str, str | SparkColumn]
) -> dict[str, Value] | None:
    """The SET as the driver's value IR by column, or None when the driver cannot run it all."""
    out: dict[str, Value] = {}
    for name, text in assignments.items():
        field = schema.get(name)
        if field is None or not isinstance(text, str) or _char_varchar(field):
            return None
        value = translate_value(text, schema)
        if value is None:
            return None
        out[field.name] = value
    return out


def _char_varchar(field: StructField) -> bool:
    return CHAR_VARCHAR_METADATA_KEY in field.metadata


def translate_value(text: str, schema: StructType) -> Value | None:
    """A SET expression as the driver's value IR, or None when it is not one the driver runs.

    Text with a backslash or a double quote (escapes and quoting Spark and sqlglot might read
    differently) and string literals holding a quote are left to Spark.
    """
    if "\\" in text or '"' in text or text.count("'") > 2:
        return None
    try:
        trees = parse_spark_sql(text)
    except (ParseError, TokenError):
        return None
    return _value(trees[0], schema) if len(trees) == 1 else None


def _value(node: exp.Expression, schema: StructType) -> Value | None:
    match node:
        case exp.Paren():
            return _value(node.this, schema)
        case exp.Null():
            return Literal(None)
        case exp.Boolean():
            return Literal(bool(node.this))
        case exp.Literal() if node.is_string:
            return Literal(str(node.this))
        case exp.Literal():
            return _number(str(node.this))
        case exp.Neg(this=exp.Literal() as inner) if not inner.is_string:
            number = _number(str(inner.this))
            return None if number is None else Literal(-number.value)
        case exp.Column():
            if node.table or node.args.get("db") is not None:
                return None
            field = schema.get(node.name)
            if field is None or _char_varchar(field):
                return None
            return Column(field.name)
    op = ARITHMETIC_OPERATORS.get(type(node))
    if op is None:
        return None
    left, right = _value(node.this, schema), _value(node.expression, schema)
    if left is None or right is None:
        return None
    return Arithmetic(op, left, right)


def _number(text: str) -> Literal | None:
    """A numeric literal as Spark types it: INT/BIGINT, DECIMAL, or DOUBLE (with an exponent).

    Decimals keep to 15 significant digits and 15 decimal places, where Spark's conversion to
    DOUBLE is correctly rounded; longer ones are left to Spark.
    """
    if _DIGITS.match(text):
        return Literal(int(text))
    if _DOUBLE.match(text):
        return Literal(float(text))
    match = _DECIMAL.match(text)
    if match and len(match.group(1)) + len(match.group(2)) <= 15:
        return Literal(Decimal(text))
    return None


def apply_assignments(
    rows: pa.Table, values: Mapping[str, Value], schema: StructType
) -> pa.Table | None:
    """``rows`` with the SET applied (every value reads the old row), or None to use Spark."""
    new: dict[str, pa.Array] = {}
    for name, value in values.items():
        field = schema.get(name)
        assert field is not None
        column = assigned_column(value, rows, schema, field)
        if column is None or (not field.nullable and column.null_count):
            return None
        new[field.name] = column
    for name, column in new.items():
        at = rows.schema.get_field_index(name)
        target = rows.schema.field(at)
        rows = rows.set_column(at, target, column.cast(target.type))
    return rows
