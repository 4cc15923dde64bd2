"""The predicate IR that read sets, file pruning and conflict checks share.

Conditions arrive as Spark SQL strings or Columns and are translated (in ``deltatx.spark``)
into these nodes. A condition that cannot be translated becomes :class:`Opaque`, which every
evaluator treats as "may be true": correct, only coarser. Integer :class:`Arithmetic` is
computed only where Spark's result can be reproduced exactly, on the driver's Arrow columns;
statistics, partition values and single rows treat it as they treat :class:`Opaque`.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class ComparisonOp(StrEnum):
    """Binary comparison operators (``<=>`` is null-safe equality)."""

    EQ = "="
    NE = "!="
    LT = "<"
    LE = "<="
    GT = ">"
    GE = ">="
    NULL_SAFE_EQ = "<=>"


@dataclass(frozen=True, slots=True)
class Column:
    """A reference to a top-level table column (by name, case-insensitive)."""

    name: str


@dataclass(frozen=True, slots=True)
class Literal:
    """A constant; ``None`` is SQL NULL. Also str, int, float, bool, date, datetime, Decimal."""

    value: Any


@dataclass(frozen=True, slots=True)
class Comparison:
    """``left op right``."""

    op: ComparisonOp
    left: Expression
    right: Expression


class ArithmeticOp(StrEnum):
    """Integer operators whose exact result the driver can compute.

    ``%`` is Java's remainder, with the sign of the dividend.
    """

    ADD = "+"
    SUBTRACT = "-"
    MULTIPLY = "*"
    REMAINDER = "%"


@dataclass(frozen=True, slots=True)
class Arithmetic:
    """``left op right``: a value, never a condition by itself."""

    op: ArithmeticOp
    left: Expression
    right: Expression


@dataclass(frozen=True, slots=True)
class In:
    """``value IN (options...)``."""

    value: Expression
    options: tuple[Expression, ...]


@dataclass(frozen=True, slots=True)
class IsNull:
    """``child IS NULL``."""

    child: Expression


@dataclass(frozen=True, slots=True)
class IsNotNull:
    """``child IS NOT NULL``."""

    child: Expression


@dataclass(frozen=True, slots=True)
class And:
    """Conjunction of two or more children."""

    children: tuple[Expression, ...]


@dataclass(frozen=True, slots=True)
class Or:
    """Disjunction of two or more children."""

    children: tuple[Expression, ...]


@dataclass(frozen=True, slots=True)
class Not:
    """Negation."""

    child: Expression


@dataclass(frozen=True, slots=True)
class Opaque:
    """A sub-expression deltatx cannot evaluate on file metadata (UDFs, subqueries, ...).

    ``sql`` keeps its text for messages; ``deterministic`` is False for ``rand()`` and the like,
    and ``complex_type`` is True when it touches a struct, array or map (both matter to the
    row-level concurrency limitations in the docs).
    """

    sql: str
    deterministic: bool = True
    complex_type: bool = False


Expression = (
    Column | Literal | Arithmetic | Comparison | In | IsNull | IsNotNull | And | Or | Not | Opaque
)

TRUE = Literal(True)
FALSE = Literal(False)


def and_(*children: Expression) -> Expression:
    """Conjunction that flattens nested Ands, drops ``TRUE`` and is ``FALSE`` with one."""
    flat: list[Expression] = []
    for c in children:
        # Only a literal equals TRUE or FALSE (a dataclass equals only its own class).
        if type(c) is Literal:
            if c == FALSE:
                return FALSE
            if c == TRUE:
                continue
        if isinstance(c, And):
            flat.extend(c.children)
        else:
            flat.append(c)
    if not flat:
        return TRUE
    return flat[0] if len(flat) == 1 else And(tuple(flat))


def or_(*children: Expression) -> Expression:
    """Disjunction that flattens nested Ors, drops ``FALSE`` and is ``TRUE`` with one."""
    flat: list[Expression] = []
    for c in children:
        if type(c) is Literal:
            if c == TRUE:
                return TRUE
            if c == FALSE:
                continue
        if isinstance(c, Or):
            flat.extend(c.children)
        else:
            flat.append(c)
    if not flat:
        return FALSE
    return flat[0] if len(flat) == 1 else Or(tuple(flat))


def columns_of(expr: Expression) -> frozenset[str]:
    """The lower-cased names of every column the expression references."""
    match expr:
        case Column():
            return frozenset({expr.name.lower()})
        case Literal() | Opaque():
            return frozenset()
        case Comparison() | Arithmetic():
            return columns_of(expr.left) | columns_of(expr.right)
        case In():
            out = columns_of(expr.value)
            for o in expr.options:
                out |= columns_of(o)
            return out
        case IsNull() | IsNotNull() | Not():
            return columns_of(expr.child)
        case And() | Or():
            acc: frozenset[str] = frozenset()
            for c in expr.children:
                acc |= columns_of(c)
            return acc


def has_opaque(expr: Expression) -> bool:
    """Whether any part is :class:`Opaque` or :class:`Arithmetic` (not evaluable on metadata)."""
    match expr:
        case Opaque() | Arithmetic():
            return True
        case Column() | Literal():
            return False
        case Comparison():
            return has_opaque(expr.left) or has_opaque(expr.right)
        case In():
            return has_opaque(expr.value) or any(has_opaque(o) for o in expr.options)
        case IsNull() | IsNotNull() | Not():
            return has_opaque(expr.child)
        case And() | Or():
            return any(has_opaque(c) for c in expr.children)


def to_sql(expr: Expression) -> str:
    """A readable SQL rendering, for messages and hints."""
    match expr:
        case Column():
            return expr.name
        case Literal():
            v = expr.value
            if v is None:
                return "NULL"
            if isinstance(v, bool):
                return "TRUE" if v else "FALSE"
            if isinstance(v, int | float):
                return repr(v)
            return "'" + str(v).replace("'", "''") + "'"
        case Comparison():
            return f"{to_sql(expr.left)} {expr.op.value} {to_sql(expr.right)}"
        case Arithmetic():
            return f"({to_sql(expr.left)} {expr.op.value} {to_sql(expr.right)})"
        case In():
            return f"{to_sql(expr.value)} IN ({', '.join(to_sql(o) for o in expr.options)})"
        case IsNull():
            return f"{to_sql(expr.child)} IS NULL"
        case IsNotNull():
            return f"{to_sql(expr.child)} IS NOT NULL"
        case Not():
            return f"NOT ({to_sql(expr.child)})"
        case And():
            return " AND ".join(f"({to_sql(c)})" for c in expr.children)
        case Or():
            return " OR ".join(f"({to_sql(c)})" for c in expr.children)
        case Opaque():
            return expr.sql
