"""Spark's pushed filters -> deltatx's predicate IR, for file skipping.

Every filter Spark pushes is a conjunct. Those with a column path of one name and literal
values become predicates that :func:`deltatx.kernel.evaluation.file_may_match` evaluates on
each file's partition values and statistics; the others (nested fields, arrays, string
patterns) cannot rule a file out and are skipped. Spark still evaluates every filter on the
rows read, so skipping only ever drops files that hold no matching row.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from pyspark.sql import datasource as ds

from deltatx.kernel.expressions import (
    Column,
    Comparison,
    ComparisonOp,
    Expression,
    In,
    IsNotNull,
    IsNull,
    Literal,
    Not,
    and_,
)

_COMPARISONS: dict[type[ds.Filter], ComparisonOp] = {
    ds.EqualTo: ComparisonOp.EQ,
    ds.EqualNullSafe: ComparisonOp.NULL_SAFE_EQ,
    ds.GreaterThan: ComparisonOp.GT,
    ds.GreaterThanOrEqual: ComparisonOp.GE,
    ds.LessThan: ComparisonOp.LT,
    ds.LessThanOrEqual: ComparisonOp.LE,
}


def _column(attribute: Sequence[str]) -> Column | None:
    # Statistics are kept per top-level column here; a nested path cannot skip files.
    return Column(attribute[0]) if len(attribute) == 1 else None


def _scalar(value: Any) -> bool:
    return not isinstance(value, list | tuple | dict)


def to_predicate(spark_filter: ds.Filter) -> Expression | None:
    """The predicate of one pushed filter, or None when it cannot skip files."""
    if isinstance(spark_filter, ds.Not):
        child = to_predicate(spark_filter.child)
        return None if child is None else Not(child)
    if isinstance(spark_filter, ds.IsNull | ds.IsNotNull):
        col = _column(spark_filter.attribute)
        if col is None:
            return None
        return IsNull(col) if isinstance(spark_filter, ds.IsNull) else IsNotNull(col)
    if isinstance(spark_filter, ds.In):
        col = _column(spark_filter.attribute)
        if col is None or not all(_scalar(v) for v in spark_filter.value):
            return None
        return In(col, tuple(Literal(v) for v in spark_filter.value))
    op = _COMPARISONS.get(type(spark_filter))
    if op is None:
        return None
    col = _column(spark_filter.attribute)  # type: ignore[attr-defined]
    value = spark_filter.value  # type: ignore[attr-defined]
    if col is None or not _scalar(value):
        return None
    return Comparison(op, col, Literal(value))


def conjunction(filters: Iterable[ds.Filter]) -> Expression | None:
    """The AND of the filters that can skip files (None when none can)."""
    parts = [p for f in filters if (p := to_predicate(f)) is not None]
    return and_(*parts) if parts else None
