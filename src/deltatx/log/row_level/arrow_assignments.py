"""UPDATE's SET expressions evaluated with pyarrow, exactly as Spark evaluates them, or not at all.

Only values whose pyarrow result is provably Spark's are evaluated: NULL, literals and column
references of the target column's own kind (integral, string, boolean), a column of exactly
the target's type (any type, copied), ``+``, ``-``, ``*``, ``%`` over integral columns and
literals, and for a DOUBLE column ``+``, ``-``, ``*`` over doubles (one IEEE operation each,
as in the JVM; a decimal literal next to a double becomes the nearest double, as in Spark).
Spark's integer arithmetic wraps or fails on overflow (depending on ANSI mode) and its cast to
the target type does the same, so a result is accepted only when no step can overflow: every
intermediate value fits the narrowest type Spark could give that step, and every final value
fits the target column. A remainder by zero (NULL or an error, depending on ANSI mode) is
left to Spark too. Anything else gives None and the caller runs Spark. The same integer
evaluation serves conditions (:func:`integer_values`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from decimal import Decimal

import pyarrow as pa
import pyarrow.compute as pc

from deltatx.kernel.expressions import Arithmetic, ArithmeticOp, Column, Expression, Literal
from deltatx.kernel.schema import PrimitiveType, StructField, StructType

# Bits of each integral type; Spark widens a binary operation to its wider operand's type.
_INTEGRAL_BITS: Mapping[str, int] = {"byte": 8, "short": 16, "integer": 32, "long": 64}
_ARROW_INTEGRAL: Mapping[int, pa.DataType] = {
    8: pa.int8(),
    16: pa.int16(),
    32: pa.int32(),
    64: pa.int64(),
}
_SIMPLE: Mapping[str, pa.DataType] = {"string": pa.string(), "boolean": pa.bool_()}


Value = Column | Literal | Arithmetic
"""A SET expression the driver may evaluate (an Arithmetic's operands are Values too)."""

_DOUBLE_OPS: Mapping[
    ArithmeticOp, Callable[[pa.Array | pa.Scalar, pa.Array | pa.Scalar], pa.Array | pa.Scalar]
] = {
    ArithmeticOp.ADD: pc.add,
    ArithmeticOp.SUBTRACT: pc.subtract,
    ArithmeticOp.MULTIPLY: pc.multiply,
}
# Integers up to 2**53 in magnitude convert to DOUBLE exactly (54 bits, sign included).
_EXACT_DOUBLE_BITS = 54
_CHECKED: Mapping[ArithmeticOp, Callable[[pa.Array, pa.Array], pa.Array]] = {
    ArithmeticOp.ADD: pc.add_checked,
    ArithmeticOp.SUBTRACT: pc.subtract_checked,
    ArithmeticOp.MULTIPLY: pc.multiply_checked,
    # Java's remainder: the sign of the dividend, and MIN % -1 is 0 (the checked kernel
    # calls that an overflow). Zero divisors never reach it.
    ArithmeticOp.REMAINDER: pc.remainder,
}


class _NotExact(Exception):
    """The value might differ from Spark's (an overflow, an unsupported type)."""


@dataclass(frozen=True, slots=True)
class _Integers:
    """Exact integer values (int64) and the fewest bits Spark's type for them can have.

    A literal's value stays one scalar, which pyarrow's kernels broadcast: repeating it for
    every row cost more than the arithmetic of ``id % 100 = 0`` itself.
    """

    values: pa.Array | pa.Scalar
    bits: int

    def column(self, rows: int) -> pa.Array:
        """The values as an array of ``rows`` values."""
        return _broadcast(self.values, rows)


def assigned_column(
    value: Value, rows: pa.Table, schema: StructType, target: StructField
) -> pa.Array | None:
    """The new values of column ``target`` for ``rows`` (the table's columns), or None.

    None when the pyarrow result could differ from Spark's ``CAST(value AS target type)``.
    """
    if not isinstance(target.type, PrimitiveType):
        return _copied(value, rows, schema, target)
    name = target.type.name
    try:
        if name in _INTEGRAL_BITS:
            integers = _integers(value, rows, schema)
            bits = _INTEGRAL_BITS[name]
            _check_fits(integers.values, bits)
            return integers.column(rows.num_rows).cast(_ARROW_INTEGRAL[bits])
        if name in _SIMPLE:
            return _simple(value, rows, schema, name)
        if name == "double":
            return _broadcast(_doubles(value, rows, schema), rows.num_rows)
    except _NotExact:
        return None
    return _copied(value, rows, schema, target)


def integer_values(value: Arithmetic, rows: pa.Table, schema: StructType) -> pa.Array | None:
    """An integer arithmetic value of ``rows`` as int64, or None where Spark's might differ.

    Args:
        value: The operation; its operands are integral columns, integer literals or
            operations.
        rows: The table's columns (at least those ``value`` reads), by the schema's names.
        schema: The table schema, whose types give each step's narrowest type.

    Returns:
        The exact values (NULL where an operand is), or None when an operand is not integral,
        a step might overflow, or a divisor is zero.
    """
    try:
        return _integers(value, rows, schema).column(rows.num_rows)
    except _NotExact:
        return None


def _copied(
    value: Value, rows: pa.Table, schema: StructType, target: StructField
) -> pa.Array | None:
    """NULL, or a column of exactly the target's type: any type, nothing to convert."""
    if isinstance(value, Literal) and value.value is None:
        return pa.nulls(rows.num_rows, type=rows.schema.field(target.name).type)
    if isinstance(value, Column):
        field = schema.get(value.name)
        if field is not None and field.type == target.type:
            return _whole(rows.column(field.name))
    return None


def _simple(value: Value, rows: pa.Table, schema: StructType, name: str) -> pa.Array:
    arrow = _SIMPLE[name]
    if isinstance(value, Literal):
        v = value.value
        if v is None:
            return pa.nulls(rows.num_rows, type=arrow)
        ok = isinstance(v, bool) if name == "boolean" else isinstance(v, str) and "\\" not in v
        if not ok:
            raise _NotExact
        return _repeated(v, arrow, rows.num_rows)
    if isinstance(value, Column):
        field = schema.get(value.name)
        if field is not None and field.type == PrimitiveType(name):
            return _whole(rows.column(field.name))
    raise _NotExact


def _integers(value: Expression, rows: pa.Table, schema: StructType) -> _Integers:
    match value:
        case Literal(value=None):
            return _Integers(pa.scalar(None, type=pa.int64()), 8)
        case Literal(value=int() as v) if not isinstance(v, bool):
            bits = next((b for b in _ARROW_INTEGRAL if _fits(v, b)), None)
            if bits is None:
                raise _NotExact  # Spark reads a literal past BIGINT as a decimal
            return _Integers(pa.scalar(v, type=pa.int64()), bits)
        case Column(name=name):
            field = schema.get(name)
            if field is None or not isinstance(field.type, PrimitiveType):
                raise _NotExact
            bits = _INTEGRAL_BITS.get(field.type.name)
            if bits is None:
                raise _NotExact
            return _Integers(_whole(rows.column(field.name)).cast(pa.int64()), bits)
        case Arithmetic(op=op, left=left, right=right):
            a, b = _integers(left, rows, schema), _integers(right, rows, schema)
            if op is ArithmeticOp.REMAINDER and _has_zero(b.values):
                raise _NotExact
            try:
                result = _CHECKED[op](a.values, b.values)
            except pa.ArrowInvalid:
                raise _NotExact from None  # past BIGINT: Spark wraps or fails
            bits = max(a.bits, b.bits)
            _check_fits(result, bits)
            return _Integers(result, bits)
    raise _NotExact


def _doubles(value: Expression, rows: pa.Table, schema: StructType) -> pa.Array | pa.Scalar:
    """A DOUBLE value: IEEE arithmetic, as the JVM does it, once every operand is a double.

    A literal stays one scalar, which pyarrow's kernels broadcast (as :class:`_Integers`).
    """
    match value:
        case Literal(value=float() as v):
            return pa.scalar(v, type=pa.float64())
        case Literal(value=Decimal() as v):
            # Spark casts a decimal literal to DOUBLE next to a double: correctly rounded,
            # as float() is, for the few digits the translator lets through. A decimal has
            # no negative zero: -0.0 is 0.0.
            return pa.scalar(float(v) if v else 0.0, type=pa.float64())
        case Column(name=name) if _fractional_column(name, schema):
            return _whole(rows.column(name)).cast(pa.float64())
        case Arithmetic(op=op, left=left, right=right) if _is_double(value, schema):
            if op not in _DOUBLE_OPS:
                raise _NotExact
            return _DOUBLE_OPS[op](_doubles(left, rows, schema), _doubles(right, rows, schema))
    if _is_double(value, schema) or (
        isinstance(value, Literal) and isinstance(value.value, Decimal)
    ):
        raise _NotExact
    # An integral value (Spark computes it as integers, then casts): exact up to 2**53.
    integers = _integers(value, rows, schema)
    _check_fits(integers.values, _EXACT_DOUBLE_BITS)
    return integers.values.cast(pa.float64())


def _fractional_column(name: str, schema: StructType) -> bool:
    field = schema.get(name)
    # Not FLOAT: Spark adds a FLOAT and an integer in single precision.
    return field is not None and field.type == PrimitiveType("double")


def _is_double(value: Expression, schema: StructType) -> bool:
    """Whether Spark types ``value`` DOUBLE (a decimal next to integers stays a decimal)."""
    match value:
        case Literal(value=float()):
            return True
        case Column(name=name):
            return _fractional_column(name, schema)
        case Arithmetic(left=left, right=right):
            return _is_double(left, schema) or _is_double(right, schema)
    return False


def _broadcast(values: pa.Array | pa.Scalar, rows: int) -> pa.Array:
    """A literal's one scalar repeated for every row; an array as it is."""
    return pa.repeat(values, rows) if isinstance(values, pa.Scalar) else values


def _whole(column: pa.ChunkedArray) -> pa.Array:
    """The column as one array; joining chunks copies even a lone one, so that is avoided."""
    return column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()


def _repeated(value: object, arrow: pa.DataType, count: int) -> pa.Array:
    # Built in C: a Python list of 100,000 copies costs more than the whole SET.
    return pa.repeat(pa.scalar(value, type=arrow), count)


def _has_zero(values: pa.Array | pa.Scalar) -> bool:
    if isinstance(values, pa.Scalar):
        return bool(values.as_py() == 0)
    return bool(pc.any(pc.equal(values, 0)).as_py())


def _check_fits(values: pa.Array | pa.Scalar, bits: int) -> None:
    if isinstance(values, pa.Scalar):
        low = high = values.as_py()
    else:
        bounds = pc.min_max(values)
        low, high = bounds["min"].as_py(), bounds["max"].as_py()
    if low is not None and not (_fits(low, bits) and _fits(high, bits)):
        raise _NotExact


def _fits(value: int, bits: int) -> bool:
    return -(1 << (bits - 1)) <= value < 1 << (bits - 1)
