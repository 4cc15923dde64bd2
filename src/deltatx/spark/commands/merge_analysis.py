"""A MERGE's Spark side, analysed on no files: its conditions and columns resolve, no job runs.

The source-driven MERGE (:mod:`deltatx.spark.commands.merge_from_source`) analyses the join,
the clauses' values and the key columns on an empty target first, so that a bad condition
fails before any Spark job; when the driver both matches and writes (every name already
checked against the schemas), the analysis waits until a Spark job needs it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from deltatx.errors import InvalidArgumentError, InvalidConditionError
from deltatx.kernel.schema import StructType
from deltatx.log.transaction import OptimisticTransaction
from deltatx.spark.commands.common import condition_column, to_spark_schema
from deltatx.spark.commands.merge_clauses import (
    ACTION,
    COPY,
    DROP,
    MergeClause,
    first_applying,
    output_columns,
    source_column,
)
from deltatx.spark.commands.rewrite import read_addressed
from deltatx.spark.expressions import merge_key_pairs
from deltatx.spark.schema import quote_column

SOURCE_ROW = "__deltatx_source_row"
"""The source's row id column."""


# Join keys whose source range can prune target files: Python's order of these values is
# Spark's, and an equality never holds for NULL or NaN surprises.
_RANGE_KEY_TYPES = ("tinyint", "smallint", "int", "bigint", "string", "date")


def _key_columns(
    src: DataFrame, condition: str | Column, schema: StructType, target_alias: str
) -> list[tuple[str, Column]]:
    """(target column, source column) of the ON condition's key equalities of one type."""
    if not isinstance(condition, str):
        return []
    target_types = {f.name: f.dataType for f in to_spark_schema(schema).fields}
    out: list[tuple[str, Column]] = []
    for name, source_sql in merge_key_pairs(condition, schema=schema, target_alias=target_alias):
        column = F.expr(source_sql)
        source_type = src.select(column).schema[0].dataType
        if source_type == target_types[name] and source_type.simpleString() in _RANGE_KEY_TYPES:
            out.append((name, column))
    return out


@dataclass(frozen=True, slots=True)
class Analysis:
    """The MERGE's Spark side, analysed on no files (no job runs).

    Attributes:
        src: The source with each column under its :func:`source_column` name and a row id.
        on: The ON condition.
        matched_action: The matched clause that applies to a joined row.
        matched_out: The table's columns of a matched row.
        insert_action: The insert clause that applies to an unmatched source row.
        insert_out: The table's columns of an inserted row.
        keys: (target column, source column) of the key equalities whose range prunes.
        empty: The target's addressed rows on no file.
    """

    src: DataFrame
    on: Column
    matched_action: Column
    matched_out: list[Column]
    insert_action: Column
    insert_out: list[Column]
    keys: list[tuple[str, Column]]
    empty: DataFrame

    def resolves(self, src: DataFrame) -> bool:
        """Whether the merge's expressions resolve on ``src`` as on the source itself."""
        try:
            _ = (
                self.empty.join(src, on=self.on)
                .withColumn(ACTION, self.matched_action)
                .select(*self.matched_out)
                .schema
            )
            _ = src.withColumn(ACTION, self.insert_action).select(*self.insert_out).schema
        except Exception:
            return False
        return True


def analyse(
    spark: SparkSession,
    txn: OptimisticTransaction,
    source: DataFrame,
    condition: str | Column,
    clauses: Sequence[MergeClause],
    target_alias: str,
    updates: set[int],
    inserts: set[int],
) -> Analysis:
    """Analyses the merge's Spark side (no job).

    Raises:
        InvalidConditionError: A condition or expression does not resolve.
    """
    schema = txn.schema
    src = source.select(
        "*",
        *[F.col(quote_column(c)).alias(source_column(i)) for i, c in enumerate(source.columns)],
        F.monotonically_increasing_id().alias(SOURCE_ROW),
    )
    on = condition_column(condition)
    matched_action = first_applying(clauses, "matched", default=COPY)
    matched_out = output_columns(schema, clauses, source.columns, target_alias, only=updates)
    insert_out = output_columns(schema, clauses, source.columns, None, only=inserts)
    insert_action = first_applying(clauses, "not_matched", default=DROP)
    try:
        # Analysed on no files: a bad condition fails before any Spark job runs.
        empty = read_addressed(spark, txn, []).alias(target_alias)
        _ = empty.join(src, on=on).withColumn(ACTION, matched_action).select(*matched_out).schema
        _ = src.withColumn(ACTION, insert_action).select(*insert_out).schema
        keys = _key_columns(src, condition, schema, target_alias)
    except InvalidArgumentError:
        raise
    except Exception as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise InvalidConditionError(f"merge does not resolve: {first}") from None
    return Analysis(src, on, matched_action, matched_out, insert_action, insert_out, keys, empty)
