"""Predicates on single rows with SQL's three-valued logic."""

from __future__ import annotations

from datetime import date

import pytest

from deltatx.kernel.expressions import (
    And,
    Arithmetic,
    ArithmeticOp,
    Column,
    Comparison,
    ComparisonOp,
    In,
    IsNull,
    Literal,
    Not,
    Opaque,
    Or,
)
from deltatx.kernel.row_evaluation import evaluate_on_row
from deltatx.kernel.schema import PrimitiveType, StructField, StructType


def _cmp(op: ComparisonOp, column: str, value: object) -> Comparison:
    return Comparison(op, Column(column), Literal(value))


ID_IS_1 = _cmp(ComparisonOp.EQ, "id", 1)


@pytest.mark.parametrize(
    ("predicate", "row", "expected"),
    [
        (ID_IS_1, {"id": 1}, True),
        (ID_IS_1, {"ID": 2}, False),
        (ID_IS_1, {"id": None}, None),
        (ID_IS_1, {}, None),
        (_cmp(ComparisonOp.NULL_SAFE_EQ, "id", None), {"id": None}, True),
        (IsNull(Column("id")), {"id": None}, True),
        (Not(ID_IS_1), {"id": None}, None),
        (And((ID_IS_1, Literal(False))), {"id": None}, False),
        (Or((ID_IS_1, Literal(True))), {"id": None}, True),
        (Or((ID_IS_1, Literal(False))), {"id": None}, None),
        (In(Column("id"), (Literal(1), Literal(2))), {"id": 2}, True),
        (In(Column("id"), (Literal(1), Literal(None))), {"id": 3}, None),
        (Opaque("rand() < 0.5", deterministic=False), {"id": 1}, None),
        # Arithmetic is computed only on the driver's Arrow columns: unknown on a row.
        (
            Comparison(
                ComparisonOp.EQ,
                Arithmetic(ArithmeticOp.REMAINDER, Column("id"), Literal(2)),
                Literal(1),
            ),
            {"id": 1},
            None,
        ),
        (
            Or((ID_IS_1, IsNull(Arithmetic(ArithmeticOp.ADD, Column("id"), Literal(1))))),
            {"id": 1},
            True,
        ),
    ],
)
def test_three_valued_logic(predicate: object, row: dict[str, object], expected: object) -> None:
    assert evaluate_on_row(predicate, row) is expected  # type: ignore[arg-type]


def test_the_schema_types_string_literals() -> None:
    schema = StructType((StructField("d", PrimitiveType("date")),))
    after = _cmp(ComparisonOp.GT, "d", "2024-01-01")
    assert evaluate_on_row(after, {"d": date(2024, 2, 1)}, schema=schema) is True
    assert evaluate_on_row(after, {"d": date(2023, 2, 1)}, schema=schema) is False
