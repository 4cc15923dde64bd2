"""When row-level concurrency applies (the docs, row-level concurrency limitations).

Row-level conflict detection needs conditions whose matched rows are a stable fact about the
data: deterministic, without subqueries, on primitive columns; and a table without identity
columns (whose concurrent writers the docs do not support). Anything else falls back to
file-level detection, and the reason goes into the conflict's hint.
"""

from __future__ import annotations

import re

from deltatx.kernel.expressions import (
    And,
    Arithmetic,
    Column,
    Comparison,
    Expression,
    In,
    IsNotNull,
    IsNull,
    Literal,
    Not,
    Opaque,
    Or,
)
from deltatx.kernel.schema import PrimitiveType, StructType

_SUBQUERY = re.compile(r"\bselect\b|\bexists\s*\(", re.IGNORECASE)

FALLBACK_HINT = (
    "Row-level concurrency did not apply ({reason}), so conflicts were detected per file "
    "(a documented limitation of row-level concurrency)."
)


def row_level_limitation(
    predicate: Expression | None, schema: StructType, *, condition_text: str | None = None
) -> str | None:
    """Why a DML condition cannot use row-level concurrency, or None when it can.

    Args:
        predicate: The condition as parsed into the IR (None: every row).
        schema: The table schema.
        condition_text: The condition as written, when it was a string (finds subqueries
            the IR may hide in an Opaque part). Whether a call is deterministic is decided
            once, when the condition is parsed, and carried by ``Opaque.deterministic``.
    """
    if "delta.identity." in schema.to_json():
        return "the table has identity columns"
    if condition_text is not None and _SUBQUERY.search(condition_text):
        return "the condition contains a subquery"
    if predicate is None:
        return None
    return _limitation(predicate, schema)


def _limitation(expr: Expression, schema: StructType) -> str | None:
    match expr:
        case Opaque():
            if not expr.deterministic:
                return "the condition is non-deterministic"
            if expr.complex_type:
                return "the condition uses a complex type (struct, array or map)"
            if _SUBQUERY.search(expr.sql):
                return "the condition contains a subquery"
            return None
        case Column():
            f = schema.get(expr.name)
            if f is not None and not isinstance(f.type, PrimitiveType):
                return "the condition uses a complex type (struct, array or map)"
            return None
        case Literal():
            return None
        case Comparison() | Arithmetic():
            return _limitation(expr.left, schema) or _limitation(expr.right, schema)
        case In():
            for part in (expr.value, *expr.options):
                found = _limitation(part, schema)
                if found:
                    return found
            return None
        case IsNull() | IsNotNull() | Not():
            return _limitation(expr.child, schema)
        case And() | Or():
            for child in expr.children:
                found = _limitation(child, schema)
                if found:
                    return found
            return None
    return None
