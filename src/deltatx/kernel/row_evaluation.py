"""Evaluate the predicate IR on one row, with SQL's three-valued logic."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

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
    Opaque,
    Or,
)
from deltatx.kernel.schema import StructType
from deltatx.kernel.values import (
    Kind,
    Typed,
    Uncoercible,
    coerce_literal,
    compare,
    kind_of_type,
    kind_of_value,
    string_as_integer,
)

# --------------------------------------------------------------------------- row evaluation


class _Unknown(Exception):
    """An Opaque or arithmetic sub-expression was met while evaluating a row."""


def evaluate_on_row(
    predicate: Expression, row: Mapping[str, Any], *, schema: StructType | None = None
) -> bool | None:
    """Evaluates a predicate on one row with SQL three-valued logic.

    Args:
        predicate: The predicate.
        row: Column name (any case) to a Python value; a missing column is NULL.
        schema: Types the row's columns; without it a value's Python type decides.

    Returns:
        True, False, or None for NULL. An :class:`Opaque` part cannot be evaluated and makes
        the affected sub-expression None (unknown); callers that need a sound answer about
        Opaque parts must check for them first.
    """
    lowered = {k.lower(): v for k, v in row.items()}
    return row_truth(predicate, lowered, schema)


def _row_value(expr: Expression, row: Mapping[str, Any], schema: StructType | None) -> Any:
    match expr:
        case Column():
            return row.get(expr.name.lower())
        case Literal():
            return expr.value
        case Opaque() | Arithmetic():
            raise _Unknown
        case _:
            return row_truth(expr, row, schema)


def _row_kind(expr: Expression, value: Any, schema: StructType | None) -> Kind | None:
    if isinstance(expr, Column):
        if schema is not None:
            f = schema.get(expr.name)
            if f is not None:
                return kind_of_type(f.type)
        return kind_of_value(value)
    if isinstance(expr, Literal):
        return None
    return Kind.BOOLEAN


def _row_compare(
    op: ComparisonOp,
    left: Expression,
    right: Expression,
    row: Mapping[str, Any],
    schema: StructType | None,
) -> bool | None:
    a = _row_value(left, row, schema)
    b = _row_value(right, row, schema)
    if op is ComparisonOp.NULL_SAFE_EQ:
        if a is None or b is None:
            return a is None and b is None
    elif a is None or b is None:
        return None
    kind = _row_kind(left, a, schema) or _row_kind(right, b, schema) or kind_of_value(a)
    if kind is None:
        return None
    ta: Typed | None
    tb: Typed | None
    try:
        ta, tb = coerce_literal(a, kind), coerce_literal(b, kind)
    except Uncoercible:
        ta = tb = None
        if kind is Kind.STRING and isinstance(a, str):
            ta, tb = string_as_integer(a, b), Typed(b)
        elif kind is Kind.STRING and isinstance(b, str):
            ta, tb = Typed(a), string_as_integer(b, a)
        if ta is None or tb is None:
            return None
    c = compare(ta.value, tb.value)
    if c is None:
        return None
    match op:
        case ComparisonOp.EQ | ComparisonOp.NULL_SAFE_EQ:
            return c == 0
        case ComparisonOp.NE:
            return c != 0
        case ComparisonOp.LT:
            return c < 0
        case ComparisonOp.LE:
            return c <= 0
        case ComparisonOp.GT:
            return c > 0
        case ComparisonOp.GE:
            return c >= 0


def _kleene_and(values: Iterable[bool | None]) -> bool | None:
    result: bool | None = True
    for v in values:
        if v is False:
            return False
        if v is None:
            result = None
    return result


def _kleene_or(values: Iterable[bool | None]) -> bool | None:
    result: bool | None = False
    for v in values:
        if v is True:
            return True
        if v is None:
            result = None
    return result


def row_truth(expr: Expression, row: Mapping[str, Any], schema: StructType | None) -> bool | None:
    """Three-valued truth of ``expr`` on ``row``; raises an internal error on Opaque."""
    try:
        match expr:
            case Literal() | Column():
                v = _row_value(expr, row, schema)
                return v if isinstance(v, bool) else None
            case Comparison():
                return _row_compare(expr.op, expr.left, expr.right, row, schema)
            case In():
                return _kleene_or(
                    _row_compare(ComparisonOp.EQ, expr.value, o, row, schema) for o in expr.options
                )
            case IsNull():
                return _row_value(expr.child, row, schema) is None
            case IsNotNull():
                return _row_value(expr.child, row, schema) is not None
            case Not():
                inner = row_truth(expr.child, row, schema)
                return None if inner is None else not inner
            case And():
                return _kleene_and(row_truth(c, row, schema) for c in expr.children)
            case Or():
                return _kleene_or(row_truth(c, row, schema) for c in expr.children)
            case Opaque() | Arithmetic():
                return None
    except _Unknown:
        return None
