"""When a DML condition cannot use row-level concurrency, and why (seed 000 limitations)."""

from __future__ import annotations

import pytest

from deltatx.kernel.expressions import Column, Comparison, ComparisonOp, Literal, Opaque
from deltatx.kernel.row_level.limitations import row_level_limitation
from deltatx.kernel.schema import ArrayType, PrimitiveType, StructField, StructType

SCHEMA = StructType(
    (
        StructField("id", PrimitiveType("long")),
        StructField("tags", ArrayType(PrimitiveType("string"))),
    )
)
ID_IS_1 = Comparison(ComparisonOp.EQ, Column("id"), Literal(1))


def test_a_plain_condition_and_no_condition_qualify() -> None:
    assert row_level_limitation(ID_IS_1, SCHEMA, condition_text="id = 1") is None
    assert row_level_limitation(None, SCHEMA) is None


@pytest.mark.parametrize(
    ("predicate", "text", "reason"),
    [
        (Opaque("rand() < 0.1", deterministic=False), None, "non-deterministic"),
        (Opaque("uuid() IS NOT NULL", deterministic=False), None, "non-deterministic"),
        (ID_IS_1, "id IN (SELECT id FROM t)", "subquery"),
        (Comparison(ComparisonOp.EQ, Column("TAGS"), Literal(None)), None, "complex type"),
        (Opaque("size(tags) > 1", complex_type=True), None, "complex type"),
    ],
)
def test_limitations_are_named(predicate: object, text: str | None, reason: str) -> None:
    found = row_level_limitation(predicate, SCHEMA, condition_text=text)  # type: ignore[arg-type]
    assert found is not None and reason in found


def test_identity_columns_disable_row_level_concurrency() -> None:
    identity = StructType(
        (StructField("id", PrimitiveType("long"), metadata={"delta.identity.start": 1}),)
    )
    assert row_level_limitation(ID_IS_1, identity) == "the table has identity columns"
