"""DELETE: remove the rows matching a condition, rewriting only the files that hold them."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from pyspark.sql import Column, SparkSession
from pyspark.sql import functions as F

from deltatx.kernel.actions import AddFile
from deltatx.kernel.expressions import Expression
from deltatx.kernel.metrics import DeleteMetrics
from deltatx.kernel.operations import OperationName
from deltatx.log.change_feed import ChangeType
from deltatx.log.row_level.row_indexes import RowIndexes
from deltatx.log.transaction import OptimisticTransaction
from deltatx.progress import step
from deltatx.spark.commands.change_data import records_changes, stage_change_data, tagged
from deltatx.spark.commands.common import (
    check_allowed,
    condition_column,
    condition_to_predicate,
    covers_whole_files,
    file_metrics,
    predicate_parameters,
    record,
    validate_condition,
)
from deltatx.spark.commands.driver_match import (
    FileRows,
    as_file_matches,
    find_on_driver,
    matched_addresses,
)
from deltatx.spark.commands.driver_rewrite import rewrite_on_driver
from deltatx.spark.commands.dv_dml import mark_deleted, record_row_level
from deltatx.spark.commands.rewrite import (
    Rewritten,
    read_addressed,
    replaced_vectors,
    stage_copy_on_write,
    without_address,
)
from deltatx.spark.deletion_vectors import collect_addresses


def stage_delete(
    spark: SparkSession, txn: OptimisticTransaction, condition: str | Column | None = None
) -> DeleteMetrics:
    """Stages a DELETE into ``txn`` and returns its metrics.

    Raises:
        InvalidConditionError: The condition does not parse or names a missing column.
        AppendOnlyViolationError: The table is append-only.
        UnsupportedFeatureError: The table needs a writer feature deltatx does not support.
    """
    started = time.monotonic()
    use_dvs = txn.configuration.deletion_vectors_enabled
    check_allowed(txn, OperationName.DELETE, deletes_rows=True)
    predicate = condition_to_predicate(condition, schema=txn.schema)
    step("scanning")
    candidates = txn.scan(predicate)
    parameters = predicate_parameters(predicate)
    whole_files = predicate is None or covers_whole_files(predicate, txn.partition_columns)
    # The change data feed needs the deleted rows themselves, which only Spark reads.
    found = (
        None
        if whole_files or records_changes(txn)
        else find_on_driver(txn, candidates, predicate, condition)
    )
    if condition is not None and found is None:
        # A condition the driver evaluated is one it translated whole, so Spark would resolve
        # it too; Spark's analysis (tens of ms in the JVM) is for the others, before any write.
        validate_condition(spark, txn, condition)

    def elapsed() -> int:
        return int((time.monotonic() - started) * 1000)

    if whole_files:
        txn.remove_files(candidates)
        deleted_rows, _ = file_metrics(candidates)
        metrics = DeleteMetrics(
            num_removed_files=len(candidates),
            num_deleted_rows=deleted_rows,
            execution_time_ms=elapsed(),
        )
        return record(txn, OperationName.DELETE, metrics, parameters)
    assert condition is not None
    if use_dvs and found is not None:
        # No Column for the driver's path: building one is 15 round trips to the JVM.
        found_rows = matched_addresses(found)
        return _stage_dv_delete(
            txn, candidates, found_rows, predicate, condition, parameters, started
        )
    if use_dvs:
        hit = F.coalesce(condition_column(condition), F.lit(False))
        hit_rows = read_addressed(spark, txn, candidates).filter(hit)
        matched = collect_addresses(hit_rows)
        if matched and records_changes(txn):
            deleted = tagged(without_address(hit_rows), ChangeType.DELETE)
            stage_change_data(txn, deleted, covering=candidates)
        return _stage_dv_delete(txn, candidates, matched, predicate, condition, parameters, started)
    rewritten = (
        None
        if found is None
        else rewrite_on_driver(txn, candidates, found, values=None, spark=spark)
    )
    if rewritten is None:
        rewritten = _stage_spark_copy_on_write(spark, txn, candidates, condition, found)
    metrics = DeleteMetrics(
        num_added_files=len(rewritten.added),
        num_removed_files=len(rewritten.removed),
        num_deleted_rows=rewritten.matched_rows,
        num_copied_rows=rewritten.copied_rows,
        execution_time_ms=elapsed(),
    )
    return record(txn, OperationName.DELETE, metrics, parameters)


def _stage_spark_copy_on_write(
    spark: SparkSession,
    txn: OptimisticTransaction,
    candidates: list[AddFile],
    condition: str | Column,
    found: dict[int, FileRows] | None,
) -> Rewritten:
    """The Spark job's copy-on-write DELETE, and the change data it records."""
    hit = F.coalesce(condition_column(condition), F.lit(False))
    rewritten = stage_copy_on_write(
        spark,
        txn,
        candidates,
        hit,
        rewrite=lambda rows: rows.filter(~hit),
        drop_fully_matched=True,
        counted=None if found is None else as_file_matches(candidates, found),
    )
    if rewritten.added and records_changes(txn):
        # Files dropped whole need no change file, but once a commit has one, readers take
        # every change of the commit from change files alone.
        touched = without_address(read_addressed(spark, txn, rewritten.removed))
        deleted = tagged(touched.filter(hit), ChangeType.DELETE)
        stage_change_data(txn, deleted, covering=[*rewritten.removed, *rewritten.added])
    return rewritten


def _stage_dv_delete(
    txn: OptimisticTransaction,
    candidates: list[AddFile],
    matched: Mapping[int, RowIndexes],
    predicate: Expression | None,
    condition: str | Column,
    parameters: Mapping[str, Any],
    started: float,
) -> DeleteMetrics:
    """Marks the matched rows deleted in their files' vectors and records the statement."""
    changes = mark_deleted(txn, candidates, matched)
    record_row_level(txn, candidates, matched, predicate=predicate, condition=condition)
    metrics = DeleteMetrics(
        num_removed_files=changes.removed_files,
        num_deleted_rows=changes.rows,
        num_deletion_vectors_added=changes.dvs_added,
        num_deletion_vectors_removed=replaced_vectors(candidates, matched),
        execution_time_ms=int((time.monotonic() - started) * 1000),
    )
    return record(txn, OperationName.DELETE, metrics, parameters)
