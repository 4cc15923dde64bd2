"""When row-level concurrency does not apply (seed 000, its limitations): conditions whose
matched rows are not a stable fact about the data, and tables with identity columns. The
reason becomes the hint of a file-level conflict."""

from __future__ import annotations

import pytest

from deltatx.kernel.expressions import (
    And,
    Arithmetic,
    ArithmeticOp,
    Column,
    Comparison,
    ComparisonOp,
    Expression,
    In,
    Literal,
    Not,
    Opaque,
    Or,
)
from deltatx.kernel.row_level.limitations import FALLBACK_HINT, row_level_limitation
from deltatx.kernel.schema import ArrayType, PrimitiveType, StructField, StructType

SCHEMA = StructType(
    (
        StructField("id", PrimitiveType("long")),
        StructField("tags", ArrayType(PrimitiveType("string"))),
    )
)
ID = Column("id")


def _eq(column: str, value: int) -> Expression:
    return Comparison(ComparisonOp.EQ, Column(column), Literal(value))


@pytest.mark.parametrize(
    "predicate",
    [
        None,
        _eq("id", 1),
        And((_eq("id", 1), Not(_eq("id", 2)))),
        Or((_eq("id", 1), In(ID, (Literal(2), Literal(3))))),
        Opaque("abs(id) = 3"),
        Comparison(
            ComparisonOp.EQ, Arithmetic(ArithmeticOp.REMAINDER, ID, Literal(100)), Literal(0)
        ),
    ],
)
def test_deterministic_conditions_on_primitive_columns_apply(
    predicate: Expression | None,
) -> None:
    assert row_level_limitation(predicate, SCHEMA) is None


@pytest.mark.parametrize(
    ("predicate", "reason"),
    [
        (Opaque("rand() < 0.5", deterministic=False), "non-deterministic"),
        (And((_eq("id", 1), Opaque("f(id)", deterministic=False))), "non-deterministic"),
        (Opaque("tags[0] = 'a'", complex_type=True), "complex type"),
        (Comparison(ComparisonOp.EQ, Column("tags"), Literal(None)), "complex type"),
        (In(ID, (Literal(1), Opaque("x", deterministic=False))), "non-deterministic"),
        (
            Comparison(
                ComparisonOp.EQ,
                Arithmetic(ArithmeticOp.ADD, ID, Opaque("rand()", deterministic=False)),
                Literal(1),
            ),
            "non-deterministic",
        ),
    ],
)
def test_conditions_that_fall_back_say_why(predicate: Expression, reason: str) -> None:
    found = row_level_limitation(predicate, SCHEMA)
    assert found is not None and reason in found


def test_a_subquery_in_the_written_condition_falls_back() -> None:
    text = "id IN (SELECT id FROM other)"
    found = row_level_limitation(Opaque(text), SCHEMA, condition_text=text)
    assert found == "the condition contains a subquery"


def test_identity_columns_fall_back_whatever_the_condition() -> None:
    identity = StructType(
        (StructField("id", PrimitiveType("long"), metadata={"delta.identity.start": 1}),)
    )
    assert row_level_limitation(None, identity) == "the table has identity columns"
    assert row_level_limitation(_eq("id", 1), identity) == "the table has identity columns"


def test_the_hint_names_the_reason() -> None:
    hint = FALLBACK_HINT.format(reason="the condition is non-deterministic")
    assert "non-deterministic" in hint and "per file" in hint
