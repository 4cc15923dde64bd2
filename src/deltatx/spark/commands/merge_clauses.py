"""MERGE clauses and what they make of a joined row: the clause that applies, the new values.

Both ways a MERGE runs (driven by the source, or over every candidate target row) classify a
row by the index of the first clause that applies to it, in ``ACTION``, and build the
table's columns from that index.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from pyspark.sql import Column
from pyspark.sql import functions as F

from deltatx.kernel.expressions import (
    Expression,
    to_sql,
)
from deltatx.kernel.schema import StructType
from deltatx.spark.commands.common import (
    condition_column,
    to_spark_schema,
)

ACTION = "__deltatx_action"
COPY = -1
DROP = -2
AMBIGUOUS = (
    "merge refused: several source rows matched the same target row, so which one should win "
    "is ambiguous. Deduplicate the source (e.g. keep the latest row per key) or make the ON "
    "condition match at most one source row per target row. Nothing was written."
)


class ClauseKind(StrEnum):
    """The seven kinds of MERGE clause."""

    MATCHED_UPDATE = "matched_update"
    MATCHED_DELETE = "matched_delete"
    NOT_MATCHED_INSERT = "not_matched_insert"
    NOT_MATCHED_BY_SOURCE_UPDATE = "not_matched_by_source_update"
    NOT_MATCHED_BY_SOURCE_DELETE = "not_matched_by_source_delete"

    @property
    def group(self) -> str:
        """Which rows the clause applies to: matched, not_matched or by_source."""
        if self.value.startswith("matched"):
            return "matched"
        if self.value.startswith("not_matched_by_source"):
            return "by_source"
        return "not_matched"


@dataclass(frozen=True, slots=True)
class MergeClause:
    """One WHEN clause. ``assignments`` None with an update/insert means ``*`` (all columns)."""

    kind: ClauseKind
    condition: str | Column | None = None
    assignments: Mapping[str, str | Column] | None = field(default=None)


def merge_parameters(
    condition: str | Column, predicate: Expression, clauses: Sequence[MergeClause]
) -> dict[str, Any]:
    """The MERGE's operation parameters in commitInfo (as delta-spark names them)."""
    return {
        "predicate": str(condition) if isinstance(condition, str) else "<Column>",
        "targetPredicate": to_sql(predicate),
        "matchedPredicates": [describe(c) for c in clauses if c.kind.group == "matched"],
        "notMatchedPredicates": [describe(c) for c in clauses if c.kind.group == "not_matched"],
        "notMatchedBySourcePredicates": [
            describe(c) for c in clauses if c.kind.group == "by_source"
        ],
    }


def first_applying(clauses: Sequence[MergeClause], group: str, *, default: int) -> Column:
    """The index of the first clause of ``group`` whose condition holds (else ``default``)."""
    expr = F.lit(default)
    for i in reversed(range(len(clauses))):
        c = clauses[i]
        if c.kind.group != group:
            continue
        if c.condition is None:
            expr = F.lit(i)
        else:
            expr = F.when(
                F.coalesce(condition_column(c.condition), F.lit(False)), F.lit(i)
            ).otherwise(expr)
    return expr


def source_column(i: int) -> str:
    """The name under which the ``i``-th source column is carried through the join."""
    return f"__deltatx_src_{i}"


def describe(clause: MergeClause) -> dict[str, str]:
    """A clause as its operation parameter: action type and condition."""
    out = {"actionType": clause.kind.value.rsplit("_", 1)[-1]}
    if clause.condition is not None:
        out["predicate"] = str(clause.condition)
    return out


def output_columns(
    schema: StructType,
    clauses: Sequence[MergeClause],
    source_columns: Sequence[str],
    target_alias: str | None,
    *,
    only: Collection[int] | None = None,
) -> list[Column]:
    """The table's columns as the clauses set them (by ``ACTION``).

    Without a target alias (inserted rows only) a column no clause sets is NULL.
    """
    spark_types = {f.name: f.dataType for f in to_spark_schema(schema).fields}
    positions = {c.lower(): i for i, c in enumerate(source_columns)}
    columns: list[Column] = []
    for f in schema.fields:
        expr: Column | None = None
        for i, c in enumerate(clauses):
            if c.kind.value.endswith("delete") or (only is not None and i not in only):
                continue
            value = _clause_value(
                c, f.name, positions, is_insert=c.kind is ClauseKind.NOT_MATCHED_INSERT
            )
            if value is None:
                continue
            cond = F.col(ACTION) == i
            expr = (
                F.when(cond, value.cast(spark_types[f.name]))
                if expr is None
                else expr.when(cond, value.cast(spark_types[f.name]))
            )
        # Qualified by the target alias: the source may have a column of the same name.
        base = (
            F.col(f"`{target_alias}`.`{f.name}`")
            if target_alias is not None
            else F.lit(None).cast(spark_types[f.name])
        )
        columns.append((base if expr is None else expr.otherwise(base)).alias(f.name))
    return columns


def _clause_value(
    clause: MergeClause, column: str, positions: Mapping[str, int], *, is_insert: bool
) -> Column | None:
    if clause.assignments is None:
        pos = positions.get(column.lower())
        if pos is None:
            if is_insert:
                return F.lit(None)
            return None
        return F.col(source_column(pos))
    for name, value in clause.assignments.items():
        if name.lower() == column.lower():
            return value if isinstance(value, Column) else F.expr(value)
    return F.lit(None) if is_insert else None
