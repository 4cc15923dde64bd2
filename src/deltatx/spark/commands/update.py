"""UPDATE: rewrite the rows matching a condition, touching only the files that hold them."""

from __future__ import annotations

import time
from collections.abc import Mapping

from pyspark.sql import Column, SparkSession
from pyspark.sql import functions as F

from deltatx.kernel.expressions import to_sql
from deltatx.kernel.metrics import UpdateMetrics
from deltatx.kernel.operations import Operation, OperationName
from deltatx.log.transaction import OptimisticTransaction
from deltatx.spark.commands.common import (
    condition_column,
    condition_to_predicate,
    validate_assignments,
    validate_condition,
)
from deltatx.spark.commands.rewrite import match_counts, read_addressed, without_address
from deltatx.spark.schema import quote_column
from deltatx.spark.write import write_files


def stage_update(
    spark: SparkSession,
    txn: OptimisticTransaction,
    *,
    set: Mapping[str, str | Column],
    condition: str | Column | None = None,
) -> UpdateMetrics:
    """Stages an UPDATE into ``txn`` and returns its metrics.

    Args:
        spark: The session that does the work.
        txn: The transaction to stage into.
        set: Column name to new value (a SQL expression string or a Column).
        condition: Which rows to update; None updates every row.

    Raises:
        InvalidArgumentError: A set column does not exist.
        InvalidConditionError: The condition or an expression does not resolve.
    """
    started = time.monotonic()
    assignments = validate_assignments(spark, txn, set)
    predicate = condition_to_predicate(condition, schema=txn.schema)
    if condition is not None:
        validate_condition(spark, txn, condition)
    cond = (
        F.lit(True) if condition is None else F.coalesce(condition_column(condition), F.lit(False))
    )
    candidates = txn.scan(predicate)
    matches = match_counts(spark, txn, candidates, cond)
    touched = [m.file for m in matches]
    added = []
    if touched:
        rows = without_address(read_addressed(spark, txn, touched))
        updated = rows.select(
            *[
                F.when(cond, assignments[f.name])
                .otherwise(F.col(quote_column(f.name)))
                .alias(f.name)
                if f.name in assignments
                else F.col(quote_column(f.name))
                for f in txn.schema.fields
            ]
        )
        added = write_files(
            updated,
            table_path=txn.log.table_path,
            partition_columns=txn.partition_columns,
            schema=txn.schema,
        )
    txn.remove_files(touched)
    txn.add_files(added)
    metrics = UpdateMetrics(
        num_added_files=len(added),
        num_removed_files=len(touched),
        num_updated_rows=sum(m.matched for m in matches),
        num_copied_rows=sum(m.total - m.matched for m in matches),
        execution_time_ms=int((time.monotonic() - started) * 1000),
    )
    params = {"predicate": [to_sql(predicate)] if predicate is not None else []}
    txn.record_operation(Operation(OperationName.UPDATE, params), metrics.to_operation_metrics())
    return metrics
