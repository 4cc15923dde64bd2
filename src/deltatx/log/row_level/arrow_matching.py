"""The rows a DML condition matches, found on the driver with pyarrow instead of a Spark job.

UPDATE and DELETE usually touch a few files that statistics already singled out; reading only
the condition's columns of those files on the driver is cheaper than a Spark job over them.
Only conditions whose pyarrow evaluation is exactly Spark's are translated: comparisons, IN,
IS [NOT] NULL, AND, OR and NOT over integral, string and boolean columns and literals of the
column's own kind, in SQL's three-valued logic, and integer ``+``, ``-``, ``*``, ``%`` (such as
``id % 100 = 0``, which statistics cannot narrow) wherever no step can overflow or divide by
zero. Anything else (floating point, whose NaN Spark orders above every number, dates, casts,
functions) gives None and the caller runs its Spark job.

A file whose partition values and statistics prove the condition TRUE on every row
(:func:`~deltatx.kernel.evaluation.file_must_match`) is not read: all its live rows match.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from deltatx.errors import InvalidTableError
from deltatx.kernel.actions import AddFile
from deltatx.kernel.column_mapping import ColumnMappingMode, physical_name
from deltatx.kernel.deletion_vectors import num_records
from deltatx.kernel.evaluation import file_must_match
from deltatx.kernel.expressions import (
    And,
    Arithmetic,
    Column,
    Comparison,
    ComparisonOp,
    Expression,
    In,
    IsNotNull,
    IsNull,
    Literal,
    Not,
    Or,
    columns_of,
)
from deltatx.kernel.schema import StructType
from deltatx.kernel.values import Kind, Uncoercible, kind_of_type, parse_partition_value
from deltatx.log.deletion_vectors import DvReader
from deltatx.log.row_level.arrow_assignments import integer_values
from deltatx.log.row_level.driver_threads import driver_pool
from deltatx.storage.location import Location

DRIVER_MATCH_BYTES = 1 << 30
"""Most candidate bytes (whole data files) the driver reads instead of running a Spark job."""

_ARROW_TYPES: Mapping[Kind, pa.DataType] = {
    Kind.INTEGRAL: pa.int64(),
    Kind.STRING: pa.string(),
    Kind.BOOLEAN: pa.bool_(),
}
_INT64 = (-(2**63), 2**63 - 1)

Columns = Mapping[str, pa.Array]
_Evaluator = Callable[[Columns], pa.Array]
_Values = Callable[[Columns], pa.Array | pa.Scalar]


class _NotExact(Exception):
    """A file's values make pyarrow's result differ from Spark's (an overflow, a zero divisor)."""


@dataclass(frozen=True, slots=True)
class FileRows:
    """The live rows of one candidate file that a condition matches.

    Attributes:
        matched: Physical row indexes (ascending ``int64``) of the live rows the condition is
            TRUE on.
        live: How many live rows the file has (physical rows less its deletion vector).
        deleted: Physical row indexes (ascending ``int64``) its deletion vector deletes.
        values: The condition's columns that the file stores, at the matched rows (the file's
            names and types, one row per ``matched`` index), when the caller asked to keep
            them; None otherwise.
    """

    matched: npt.NDArray[np.int64]
    live: int
    deleted: npt.NDArray[np.int64]
    values: pa.Table | None = None

    @property
    def physical(self) -> int:
        """How many rows the file stores, live or deleted."""
        return self.live + len(self.deleted)


def driver_matches(
    location: Location,
    files: Sequence[AddFile],
    predicate: Expression,
    schema: StructType,
    *,
    column_mapping: ColumnMappingMode | str,
    keep_values: int = 0,
    partition_columns: Sequence[str] = (),
) -> dict[int, FileRows] | None:
    """File index -> matched live rows, for every file of ``files``; None when not translatable.

    None also when the files are too large to read on the driver
    (:data:`DRIVER_MATCH_BYTES`) or the table maps columns by id.

    Args:
        location: Where the table's files are.
        files: The candidate files.
        predicate: The condition.
        schema: The table schema.
        column_mapping: The table's column mapping mode.
        keep_values: Up to this many matched rows in all, each file's :attr:`FileRows.values`
            keeps the condition's columns at its matched rows, so that a caller reading those
            rows again need not read these columns twice. A file past the budget keeps none,
            nor does a file whose rows all match by its metadata (it is not read).
        partition_columns: The table's partition columns.

    Raises:
        InvalidTableError: A data file is missing (vacuumed) or is not readable Parquet.
    """
    if column_mapping == ColumnMappingMode.ID or sum(f.size for f in files) > DRIVER_MATCH_BYTES:
        return None
    if not columns_of(predicate):
        return None  # a constant condition: no column gives the evaluator its row count
    kinds: dict[str, Kind] = {}
    physical: dict[str, str] = {}
    for name in columns_of(predicate):
        field = schema.get(name)
        kind = kind_of_type(field.type) if field is not None else None
        if field is None or kind is None or kind not in _ARROW_TYPES:
            return None
        kinds[name.lower()] = kind
        physical[name.lower()] = physical_name(field)
    evaluate = _translate(predicate, kinds, schema)
    if evaluate is None:
        return None
    reader = DvReader(location)
    deleted = [reader.rows(f.deletion_vector, data_file=f.path) for f in files]
    budget = _RowBudget(keep_values)
    every_row = [_rows_if_all_match(f, predicate, schema, partition_columns) for f in files]

    def match(index: int) -> FileRows | None:
        f = files[index]
        stored = every_row[index]
        if stored is not None:
            gone = np.asarray(deleted[index], dtype=np.int64)
            rows = np.arange(stored, dtype=np.int64)
            return FileRows(
                matched=rows[~np.isin(rows, gone)] if len(gone) else rows,
                live=stored - len(gone),
                deleted=gone,
            )
        columns = _read_columns(location, f, kinds, physical)
        if columns is None:
            return None
        try:
            hit = pc.fill_null(evaluate(columns.columns), False)
        except _NotExact:
            return None
        rows = np.flatnonzero(hit.to_numpy(zero_copy_only=False))
        gone = np.asarray(deleted[index], dtype=np.int64)
        if len(gone):
            rows = rows[~np.isin(rows, gone)]
        values = None
        if columns.stored is not None and len(rows) and budget.take(len(rows)):
            values = columns.stored.take(pa.array(rows))
        return FileRows(
            matched=rows.astype(np.int64, copy=False),
            live=columns.rows - len(gone),
            deleted=gone,
            values=values,
        )

    if len(files) <= 1:
        # Handing one file to a thread costs more than it saves (most 1% DML touch one).
        found = [match(i) for i in range(len(files))]
    else:
        found = list(driver_pool().map(match, range(len(files))))
    if any(r is None for r in found):
        return None
    return {i: r for i, r in enumerate(found) if r is not None}


def _rows_if_all_match(
    f: AddFile, predicate: Expression, schema: StructType, partition_columns: Sequence[str]
) -> int | None:
    """How many rows ``f`` stores when the predicate is TRUE on all of them, else None."""
    # The proof parses the statistics; the row count is read again only for a proven file.
    if not file_must_match(predicate, f, schema=schema, partition_columns=partition_columns):
        return None
    return num_records(f.stats)


class _RowBudget:
    """Rows the reader threads may still keep, taken whole or not at all."""

    __slots__ = ("_left", "_lock")

    def __init__(self, rows: int) -> None:
        self._left = rows
        self._lock = threading.Lock()

    def take(self, rows: int) -> bool:
        with self._lock:
            if rows > self._left:
                return False
            self._left -= rows
            return True


@dataclass(frozen=True, slots=True)
class _FileColumns:
    columns: dict[str, pa.Array]
    rows: int
    stored: pa.Table | None


def _read_columns(
    location: Location,
    f: AddFile,
    kinds: Mapping[str, Kind],
    physical: Mapping[str, str],
) -> _FileColumns | None:
    """The condition's columns of one file, typed as the table types them (None: give up)."""
    path = location.file(f.path, what="data file")
    try:
        parquet = pq.ParquetFile(location.fs_path(path), filesystem=location.fs)
        stored = {n.lower(): n for n in parquet.schema_arrow.names}
        partitions = {k.lower(): v for k, v in f.partition_values.items()}
        wanted = [stored[physical[c].lower()] for c in kinds if physical[c].lower() in stored]
        # Without reader threads: pyarrow's pool can abort the interpreter at exit
        # (apache/arrow#34314); files are read in parallel instead.
        table = parquet.read(columns=wanted, use_threads=False) if wanted else None
        rows = parquet.metadata.num_rows
    except FileNotFoundError:
        raise InvalidTableError(f"data file {path} does not exist (vacuumed?)") from None
    except (pa.ArrowException, OSError) as exc:
        raise InvalidTableError(f"data file {path} is not readable Parquet: {exc}") from None
    out: dict[str, pa.Array] = {}
    for name, kind in kinds.items():
        target = _ARROW_TYPES[kind]
        key = physical[name].lower()
        if key in partitions:
            try:
                value = parse_partition_value(partitions[key], kind)
            except Uncoercible:
                return None
            scalar = None if value is None else value.value
            out[name] = pa.array([scalar] * rows, type=target)
        elif key in stored and table is not None:
            column = table.column(stored[key]).combine_chunks()
            if not _castable(column.type, kind):
                return None
            out[name] = column.cast(target)
        else:
            # A column added after the file was written reads as NULL.
            out[name] = pa.nulls(rows, type=target)
    return _FileColumns(out, rows, table)


def _castable(stored: pa.DataType, kind: Kind) -> bool:
    if kind is Kind.INTEGRAL:
        return bool(pa.types.is_signed_integer(stored))
    if kind is Kind.STRING:
        return bool(pa.types.is_string(stored) or pa.types.is_large_string(stored))
    return bool(pa.types.is_boolean(stored))


def _translate(
    expr: Expression, kinds: Mapping[str, Kind], schema: StructType
) -> _Evaluator | None:
    """A vectorised evaluator of a boolean expression (nulls are SQL NULL), or None."""
    match expr:
        case Literal(value=bool() | None as value):
            return lambda cols: pa.array([value] * _length(cols), type=pa.bool_())
        case Column(name=name) if kinds.get(name.lower()) is Kind.BOOLEAN:
            key = name.lower()
            return lambda cols: cols[key]
        case And(children=children) | Or(children=children):
            parts = [_translate(c, kinds, schema) for c in children]
            if any(p is None for p in parts):
                return None
            combine = pc.and_kleene if isinstance(expr, And) else pc.or_kleene
            evaluators = [p for p in parts if p is not None]

            def combined(cols: Columns) -> pa.Array:
                result = evaluators[0](cols)
                for p in evaluators[1:]:
                    result = combine(result, p(cols))
                return result

            return combined
        case Not(child=child):
            inner = _translate(child, kinds, schema)
            return None if inner is None else (lambda cols: pc.invert(inner(cols)))
        case IsNull(child=child) | IsNotNull(child=child):
            found = _operand(child, kinds, schema)
            if found is None:
                return None
            test = pc.is_null if isinstance(expr, IsNull) else pc.is_valid
            values = found[1]
            return lambda cols: test(values(cols))
        case Comparison():
            return _comparison(expr, kinds, schema)
        case In(value=value, options=options):
            found = _operand(value, kinds, schema)
            return None if found is None else _in(found[1], found[0], options)
    return None


def _operand(
    expr: Expression, kinds: Mapping[str, Kind], schema: StructType
) -> tuple[Kind, _Values] | None:
    """A column, or integer arithmetic over integral columns: its kind and its values."""
    match expr:
        case Column(name=name) if name.lower() in kinds:
            key = name.lower()
            return kinds[key], lambda cols: cols[key]
        case Arithmetic():
            names = _integral_columns(expr, kinds, schema)
            if names is None:
                return None

            def computed(cols: Columns) -> pa.Array:
                rows = pa.table({names[c]: cols[c] for c in names})
                values = integer_values(expr, rows, schema)
                if values is None:
                    raise _NotExact
                return values

            return Kind.INTEGRAL, computed
    return None


def _integral_columns(
    expr: Arithmetic, kinds: Mapping[str, Kind], schema: StructType
) -> dict[str, str] | None:
    """Each column of ``expr`` (lower-cased) to its schema name; None unless all are integral.

    At least one column: an operation on literals alone has no column to give its row count.
    """
    names = columns_of(expr)
    if not names or any(kinds.get(c) is not Kind.INTEGRAL for c in names):
        return None
    # driver_matches typed every column of the condition, so each is in the schema.
    return {c: field.name for c in names if (field := schema.get(c)) is not None}


def _length(cols: Columns) -> int:
    return len(next(iter(cols.values()))) if cols else 0


_OPS: Mapping[ComparisonOp, Callable[[pa.Array, pa.Array | pa.Scalar], pa.Array]] = {
    ComparisonOp.EQ: pc.equal,
    ComparisonOp.NE: pc.not_equal,
    ComparisonOp.LT: pc.less,
    ComparisonOp.LE: pc.less_equal,
    ComparisonOp.GT: pc.greater,
    ComparisonOp.GE: pc.greater_equal,
}
_FLIPPED = {
    ComparisonOp.LT: ComparisonOp.GT,
    ComparisonOp.LE: ComparisonOp.GE,
    ComparisonOp.GT: ComparisonOp.LT,
    ComparisonOp.GE: ComparisonOp.LE,
}


def _comparison(
    expr: Comparison, kinds: Mapping[str, Kind], schema: StructType
) -> _Evaluator | None:
    op, left, right = expr.op, expr.left, expr.right
    if isinstance(left, Literal) and not isinstance(right, Literal):
        op, left, right = _FLIPPED.get(op, op), right, left
    found = _operand(left, kinds, schema)
    if found is None:
        return None
    kind, values = found
    if isinstance(right, Literal):
        if not _fits(right.value, kind):
            return None
        scalar = pa.scalar(right.value, type=_ARROW_TYPES[kind])
        return _compare(op, values, lambda _: scalar)
    other = _operand(right, kinds, schema)
    if other is None or other[0] is not kind:
        return None
    return _compare(op, values, other[1])


def _compare(op: ComparisonOp, left: _Values, right: _Values) -> _Evaluator:
    if op is ComparisonOp.NULL_SAFE_EQ:

        def null_safe(cols: Columns) -> pa.Array:
            a, b = left(cols), right(cols)
            both_null = pc.and_(pc.is_null(a), pc.is_null(b))
            return pc.or_(pc.fill_null(pc.equal(a, b), False), both_null)

        return null_safe
    fn = _OPS[op]
    return lambda cols: fn(left(cols), right(cols))


def _in(operand: _Values, kind: Kind, options: Sequence[Expression]) -> _Evaluator | None:
    values: list[object] = []
    has_null = False
    for option in options:
        if not isinstance(option, Literal) or not _fits(option.value, kind):
            return None
        if option.value is None:
            has_null = True
        else:
            values.append(option.value)
    value_set = pa.array(values, type=_ARROW_TYPES[kind])

    def member(cols: Columns) -> pa.Array:
        column = operand(cols)
        found = pc.is_in(column, value_set=value_set, skip_nulls=True)
        # x IN (...) is NULL for a NULL x, and for an x not found when a NULL was listed.
        unknown = pc.is_null(column)
        if has_null:
            unknown = pc.or_(unknown, pc.invert(found))
        return pc.if_else(unknown, pa.scalar(None, type=pa.bool_()), found)

    return member


def _fits(value: object, kind: Kind) -> bool:
    """Whether a literal compares with a column of ``kind`` exactly as Spark compares it."""
    if value is None:
        return True
    if kind is Kind.INTEGRAL:
        return isinstance(value, int) and not isinstance(value, bool) and _in_int64(value)
    if kind is Kind.STRING:
        # Spark reads backslash escapes in string literals; keep such text on Spark's side.
        return isinstance(value, str) and "\\" not in value
    return isinstance(value, bool)


def _in_int64(value: int) -> bool:
    return _INT64[0] <= value <= _INT64[1]
