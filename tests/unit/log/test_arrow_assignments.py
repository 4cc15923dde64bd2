"""SET values on the driver: Spark's result exactly, or None wherever it could differ."""

from __future__ import annotations

from decimal import Decimal

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from deltatx.kernel.expressions import Arithmetic, ArithmeticOp, Column, Literal
from deltatx.kernel.schema import PrimitiveType, StructField, StructType
from deltatx.log.row_level.arrow_assignments import Value, assigned_column

_SCHEMA = StructType(
    (
        StructField("b8", PrimitiveType("byte")),
        StructField("i32", PrimitiveType("integer")),
        StructField("i64", PrimitiveType("long")),
        StructField("s", PrimitiveType("string")),
        StructField("flag", PrimitiveType("boolean")),
        StructField("d", PrimitiveType("double")),
    )
)
_BOUNDS = {"byte": 2**7, "integer": 2**31, "long": 2**63}


def _rows(b8: list[int | None], i32: list[int | None], i64: list[int | None]) -> pa.Table:
    n = len(b8)
    return pa.table(
        {
            "b8": pa.array(b8, pa.int8()),
            "i32": pa.array(i32, pa.int32()),
            "i64": pa.array(i64, pa.int64()),
            "s": pa.array(["a", None, "c", "d"][:n] + ["e"] * max(0, n - 4), pa.string()),
            "flag": pa.array([True, None, False, True][:n] + [None] * max(0, n - 4)),
            "d": pa.array([0.5] * n, pa.float64()),
        }
    )


def _target(name: str) -> StructField:
    field = _SCHEMA.get(name)
    assert field is not None
    return field


def test_arithmetic_is_exact_with_sql_nulls() -> None:
    rows = _rows([1, None, -3], [10, 20, None], [100, None, 7])
    value = Arithmetic(
        ArithmeticOp.MULTIPLY,
        Arithmetic(ArithmeticOp.ADD, Column("i32"), Literal(1)),
        Literal(-2),
    )
    out = assigned_column(value, rows, _SCHEMA, _target("i64"))
    assert out is not None and out.type == pa.int64()
    assert out.to_pylist() == [-22, -42, None]


def test_a_step_past_the_narrowest_type_spark_could_use_is_left_to_spark() -> None:
    # byte + byte is a TINYINT in Spark: 100 + 100 wraps (or fails under ANSI).
    rows = _rows([100, 1, None], [0, 0, 0], [0, 0, 0])
    wraps = Arithmetic(ArithmeticOp.ADD, Column("b8"), Column("b8"))
    assert assigned_column(wraps, rows, _SCHEMA, _target("i64")) is None
    # Past BIGINT: pyarrow's checked arithmetic refuses, so does the driver.
    huge = _rows([0, 0, 0], [0, 0, 0], [2**62, 1, 2])
    twice = Arithmetic(ArithmeticOp.MULTIPLY, Column("i64"), Literal(4))
    assert assigned_column(twice, huge, _SCHEMA, _target("i64")) is None


def test_a_value_past_the_target_type_is_left_to_spark() -> None:
    rows = _rows([1, 2, 3], [1000, 2, 3], [0, 0, 0])
    assert assigned_column(Column("i32"), rows, _SCHEMA, _target("b8")) is None
    assert assigned_column(Literal(128), rows, _SCHEMA, _target("b8")) is None
    fits = assigned_column(Literal(-128), rows, _SCHEMA, _target("b8"))
    assert fits is not None and fits.to_pylist() == [-128] * 3


@pytest.mark.parametrize(
    ("value", "target"),
    [
        (Literal("1"), "i32"),  # a cast from text
        (Literal(1), "s"),
        (Literal(True), "i32"),
        (Column("s"), "flag"),
        (Column("flag"), "d"),
        (Literal("a\\b"), "s"),
        (Arithmetic(ArithmeticOp.ADD, Column("d"), Literal(1)), "i64"),
    ],
)
def test_conversions_are_left_to_spark(value: Value, target: str) -> None:
    rows = _rows([1], [1], [1])
    assert assigned_column(value, rows, _SCHEMA, _target(target)) is None


def test_null_and_same_type_columns_copy_for_any_type() -> None:
    rows = _rows([1, 2], [1, 2], [1, 2])
    nulls = assigned_column(Literal(None), rows, _SCHEMA, _target("d"))
    assert nulls is not None and nulls.null_count == 2 and nulls.type == pa.float64()
    copied = assigned_column(Column("d"), rows, _SCHEMA, _target("d"))
    assert copied is not None and copied.to_pylist() == [0.5, 0.5]
    text = assigned_column(Column("s"), rows, _SCHEMA, _target("s"))
    assert text is not None and text.to_pylist() == ["a", None]


_INTS = st.one_of(st.none(), st.integers(-(2**31), 2**31 - 1))


@given(
    values=st.lists(st.tuples(_INTS, _INTS), min_size=1, max_size=20),
    op=st.sampled_from(list(ArithmeticOp)),
    target=st.sampled_from(["b8", "i32", "i64"]),
)
def test_results_are_exact_or_refused(
    values: list[tuple[int | None, int | None]], op: ArithmeticOp, target: str
) -> None:
    left = [a for a, _ in values]
    right = [b for _, b in values]
    rows = _rows([0] * len(values), left, right)
    value = Arithmetic(op, Column("i32"), Column("i64"))
    out = assigned_column(value, rows, _SCHEMA, _target(target))
    python = {
        ArithmeticOp.ADD: lambda a, b: a + b,
        ArithmeticOp.SUBTRACT: lambda a, b: a - b,
        ArithmeticOp.MULTIPLY: lambda a, b: a * b,
        ArithmeticOp.REMAINDER: java_remainder,
    }[op]
    if op is ArithmeticOp.REMAINDER and 0 in right:
        # NULL or DIVIDE_BY_ZERO, by ANSI mode: Spark's to decide.
        assert out is None
        return
    exact = [None if a is None or b is None else python(a, b) for a, b in values]
    field_type = _target(target).type
    assert isinstance(field_type, PrimitiveType)
    bound = _BOUNDS[field_type.name]
    # Spark's type for i32 op i64 is BIGINT: the result is exact where it fits both.
    fits = all(v is None or (-bound <= v < bound and -(2**63) <= v < 2**63) for v in exact)
    if fits:
        assert out is not None and out.to_pylist() == exact
    else:
        assert out is None


def java_remainder(a: int, b: int) -> int:
    """Java's ``a % b``: truncated division's remainder, with the sign of ``a``."""
    r = abs(a) % abs(b)
    return -r if a < 0 else r


@pytest.mark.parametrize(
    ("dividend", "divisor", "expected"),
    [(7, 3, 1), (-7, 3, -1), (7, -3, 1), (-7, -3, -1), (-(2**63), -1, 0), (-(2**63), 7, -1)],
)
def test_remainder_has_the_sign_of_the_dividend(dividend: int, divisor: int, expected: int) -> None:
    # Java's %: -7 % 3 is -1 (Python's is 2), and Long.MIN_VALUE % -1 is 0, not an overflow.
    rows = _rows([0], [0], [dividend])
    value = Arithmetic(ArithmeticOp.REMAINDER, Column("i64"), Literal(divisor))
    out = assigned_column(value, rows, _SCHEMA, _target("i64"))
    assert out is not None and out.to_pylist() == [expected]
    assert java_remainder(dividend, divisor) == expected


def test_a_double_remainder_is_left_to_spark() -> None:
    rows = _rows([1], [1], [1])
    value = Arithmetic(ArithmeticOp.REMAINDER, Column("d"), Literal(2.0))
    assert assigned_column(value, rows, _SCHEMA, _target("d")) is None


def test_double_arithmetic_is_one_ieee_operation_per_step() -> None:
    rows = _rows([1, 2, 3, 4], [7, 2, -1, None], [0, 0, 0, 0])
    rows = rows.set_column(5, "d", pa.array([0.1, float("nan"), None, 1.0]))
    value = Arithmetic(
        ArithmeticOp.MULTIPLY,
        Arithmetic(ArithmeticOp.ADD, Column("d"), Literal(Decimal("0.2"))),
        Column("i32"),
    )
    out = assigned_column(value, rows, _SCHEMA, _target("d"))
    assert out is not None
    got = out.to_pylist()
    assert got[0] == (0.1 + 0.2) * 7 and got[1] != got[1] and got[2:] == [None, None]


@pytest.mark.parametrize(
    "value",
    [
        # INT + DECIMAL is decimal arithmetic in Spark, rounded once at the end.
        Arithmetic(ArithmeticOp.ADD, Column("i32"), Literal(Decimal("0.1"))),
        Arithmetic(ArithmeticOp.ADD, Literal(Decimal("0.1")), Literal(Decimal("0.2"))),
        Column("s"),
    ],
)
def test_decimal_arithmetic_into_a_double_is_left_to_spark(value: Value) -> None:
    rows = _rows([1], [1], [1])
    assert assigned_column(value, rows, _SCHEMA, _target("d")) is None


def test_integers_past_2_pow_53_do_not_become_doubles() -> None:
    rows = _rows([0, 0], [0, 0], [2**53, 1])
    value = Arithmetic(ArithmeticOp.ADD, Column("d"), Column("i64"))
    assert assigned_column(value, rows, _SCHEMA, _target("d")) is None
