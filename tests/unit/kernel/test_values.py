"""Typed values for pruning: partition strings, statistics, literals, comparison."""

from __future__ import annotations

from datetime import date
from decimal import Decimal

import pytest

from deltatx.kernel.schema import PrimitiveType
from deltatx.kernel.values import (
    Kind,
    Typed,
    Uncoercible,
    coerce_literal,
    compare,
    kind_of_type,
    parse_partition_value,
    string_as_integer,
)


def test_kinds_of_protocol_types() -> None:
    assert kind_of_type(PrimitiveType("long")) is Kind.INTEGRAL
    assert kind_of_type(PrimitiveType("string")) is Kind.STRING
    assert kind_of_type(PrimitiveType("decimal(10,2)")) is Kind.DECIMAL
    assert kind_of_type(None) is None


def test_partition_values_null_string_and_typed() -> None:
    assert parse_partition_value(None, Kind.INTEGRAL) is None
    assert parse_partition_value("", Kind.STRING) is None
    assert parse_partition_value("x", Kind.STRING) == Typed("x")
    assert parse_partition_value("42", Kind.INTEGRAL) == Typed(42)
    assert parse_partition_value("2024-01-31", Kind.DATE) == Typed(date(2024, 1, 31))
    with pytest.raises(Uncoercible):
        parse_partition_value("forty", Kind.INTEGRAL)


def test_literals_are_coerced_only_when_safe() -> None:
    assert coerce_literal(3, Kind.FRACTIONAL).value == 3
    assert coerce_literal("1.50", Kind.DECIMAL).value == Decimal("1.50")
    with pytest.raises(Uncoercible):
        coerce_literal(True, Kind.INTEGRAL)


def test_strings_compare_with_integers_only_when_plain() -> None:
    assert string_as_integer("-12", 5) == Typed(-12)
    assert string_as_integer("1.5", 5) is None
    assert string_as_integer("12", "12") is None


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [(1, 2, -1), (2, 2, 0), ("b", "a", 1), (1, "a", None), (float("nan"), 1.0, None)],
)
def test_compare(a: object, b: object, expected: int | None) -> None:
    assert compare(a, b) == expected
