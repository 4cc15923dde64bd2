"""DELETE: remove the rows matching a condition, rewriting only the files that hold them."""

from __future__ import annotations

import time

from pyspark.sql import Column, SparkSession
from pyspark.sql import functions as F

from deltatx.errors import InvalidArgumentError
from deltatx.kernel.actions import AddFile
from deltatx.kernel.expressions import Expression, to_sql
from deltatx.kernel.metrics import DeleteMetrics
from deltatx.kernel.operations import Operation, OperationName
from deltatx.log.transaction import OptimisticTransaction
from deltatx.progress import step
from deltatx.spark.commands.common import (
    condition_column,
    condition_to_predicate,
    covers_whole_files,
    file_metrics,
    validate_condition,
)
from deltatx.spark.commands.dv_dml import mark_deleted, record_row_level
from deltatx.spark.commands.rewrite import match_counts, read_addressed, without_address
from deltatx.spark.deletion_vectors import collect_addresses
from deltatx.spark.write import write_files


def stage_delete(
    spark: SparkSession, txn: OptimisticTransaction, condition: str | Column | None = None
) -> DeleteMetrics:
    """Stages a DELETE into ``txn`` and returns its metrics.

    Raises:
        InvalidConditionError: The condition does not parse or names a missing column.
        InvalidArgumentError: The table is append-only.
    """
    started = time.monotonic()
    if txn.properties.append_only:
        raise InvalidArgumentError(
            f"table {txn.log.table_path} is append-only (delta.appendOnly=true); DELETE refused"
        )
    predicate = condition_to_predicate(condition, schema=txn.schema)
    if condition is not None:
        validate_condition(spark, txn, condition)
    step("scanning")
    candidates = txn.scan(predicate)
    removed: list[AddFile] = []
    added: list[AddFile] = []
    deleted_rows = 0
    copied_rows = 0
    if predicate is None or covers_whole_files(predicate, txn.partition_columns):
        removed = list(candidates)
        deleted_rows, _ = file_metrics(removed)
    elif txn.deletion_vectors_enabled:
        assert condition is not None
        hit = F.coalesce(condition_column(condition), F.lit(False))
        matched = collect_addresses(read_addressed(spark, txn, candidates).filter(hit))
        changes = mark_deleted(txn, candidates, matched)
        record_row_level(txn, candidates, matched, predicate=predicate, condition=condition)
        metrics = DeleteMetrics(
            num_removed_files=changes.removed_files,
            num_deleted_rows=changes.rows,
            num_deletion_vectors_added=changes.dvs_added,
            num_deletion_vectors_removed=sum(
                1 for i in matched if candidates[i].deletion_vector is not None
            ),
            execution_time_ms=int((time.monotonic() - started) * 1000),
        )
        return _record(txn, predicate, metrics)
    else:
        assert condition is not None
        cond = condition_column(condition)
        matches = match_counts(spark, txn, candidates, cond)
        removed = [m.file for m in matches]
        partial = [m for m in matches if not m.all_match]
        deleted_rows = sum(m.matched for m in matches)
        copied_rows = sum(m.total - m.matched for m in partial)
        if partial:
            keep = without_address(
                read_addressed(spark, txn, [m.file for m in partial]).filter(
                    ~F.coalesce(cond, F.lit(False))
                )
            )
            added = write_files(
                keep,
                table_path=txn.log.table_path,
                partition_columns=txn.partition_columns,
                schema=txn.schema,
            )
    txn.remove_files(removed)
    txn.add_files(added)
    metrics = DeleteMetrics(
        num_added_files=len(added),
        num_removed_files=len(removed),
        num_deleted_rows=deleted_rows,
        num_copied_rows=copied_rows,
        execution_time_ms=int((time.monotonic() - started) * 1000),
    )
    return _record(txn, predicate, metrics)


def _record(
    txn: OptimisticTransaction, predicate: Expression | None, metrics: DeleteMetrics
) -> DeleteMetrics:
    params = {"predicate": [to_sql(predicate)] if predicate is not None else []}
    txn.record_operation(Operation(OperationName.DELETE, params), metrics.to_operation_metrics())
    return metrics
