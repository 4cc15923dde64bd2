"""UPDATE: rewrite the rows matching a condition, touching only the files that hold them."""

from __future__ import annotations

import time
from collections.abc import Mapping

from pyspark import StorageLevel
from pyspark.sql import Column, SparkSession
from pyspark.sql import functions as F

from deltatx.kernel.actions import AddFile
from deltatx.kernel.deletion_vectors import num_records
from deltatx.kernel.metrics import UpdateMetrics
from deltatx.kernel.operations import OperationName
from deltatx.log.row_level.row_indexes import RowIndexes
from deltatx.log.transaction import OptimisticTransaction
from deltatx.progress import step
from deltatx.spark.commands.change_data import (
    records_changes,
    stage_change_data,
    update_changes,
)
from deltatx.spark.commands.common import (
    check_allowed,
    check_assignment_targets,
    condition_column,
    condition_to_predicate,
    empty_table_frame,
    predicate_parameters,
    record,
    validate_assignments,
    validate_condition,
    write_data,
)
from deltatx.spark.commands.driver_match import (
    FileRows,
    as_file_matches,
    find_on_driver,
    matched_addresses,
)
from deltatx.spark.commands.driver_rewrite import rewrite_on_driver
from deltatx.spark.commands.driver_update import (
    DRIVER_UPDATE_ROWS,
    translate_assignments,
    update_on_driver,
)
from deltatx.spark.commands.dv_dml import mark_deleted, record_row_level
from deltatx.spark.commands.rewrite import (
    Rewritten,
    read_addressed,
    replaced_vectors,
    stage_copy_on_write,
    without_address,
)
from deltatx.spark.deletion_vectors import collect_addresses
from deltatx.spark.schema import quote_column

_KEEP = StorageLevel.MEMORY_AND_DISK


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
        AppendOnlyViolationError: The table is append-only.
        UnsupportedFeatureError: The table needs a writer feature deltatx does not support.
    """
    started = time.monotonic()
    check_allowed(txn, OperationName.UPDATE, deletes_rows=True)
    check_assignment_targets(txn, set)
    predicate = condition_to_predicate(condition, schema=txn.schema)
    step("scanning")
    candidates = txn.scan(predicate)
    use_dvs = txn.configuration.deletion_vectors_enabled
    # The change data feed needs the updated rows themselves, which only Spark reads. With
    # deletion vectors the driver may read the matched rows again to write their new versions:
    # the condition's columns read to find them are kept, so they are read once.
    found = (
        None
        if records_changes(txn)
        else find_on_driver(
            txn,
            candidates,
            predicate,
            condition,
            keep_values=DRIVER_UPDATE_ROWS if use_dvs else 0,
        )
    )
    on_driver = _update_on_driver(spark, txn, candidates, found, set) if use_dvs else None
    if on_driver is not None:
        # The driver translated the condition and every SET value whole, so Spark would
        # resolve them too: its analysis (tens of ms in the JVM) is skipped.
        matched, added = on_driver
        metrics = _stage_dv_changes(txn, candidates, matched, added, started)
        record_row_level(txn, candidates, matched, predicate=predicate, condition=condition)
        return record(txn, OperationName.UPDATE, metrics, predicate_parameters(predicate))
    rewritten = None if use_dvs else _rewrite_on_driver(spark, txn, candidates, found, set)
    if rewritten is not None:
        metrics = _copy_on_write_metrics(rewritten, started)
        return record(txn, OperationName.UPDATE, metrics, predicate_parameters(predicate))
    # One empty frame for both analyses: creating it is a round trip to the JVM.
    frame = empty_table_frame(spark, txn.schema)
    assignments = validate_assignments(spark, txn, set, frame=frame)
    if condition is not None and found is None:
        validate_condition(spark, txn, condition, frame=frame)
    cond = (
        F.lit(True) if condition is None else F.coalesce(condition_column(condition), F.lit(False))
    )
    if use_dvs:
        metrics, matched = _stage_dv_update(
            spark, txn, candidates, cond, assignments, started, found
        )
        record_row_level(txn, candidates, matched, predicate=predicate, condition=condition)
    else:
        rewritten = stage_copy_on_write(
            spark,
            txn,
            candidates,
            cond,
            rewrite=lambda rows: rows.select(*_updated_columns(txn, cond, assignments)),
            drop_fully_matched=False,
            counted=None if found is None else as_file_matches(candidates, found),
        )
        if rewritten.matched_rows and records_changes(txn):
            touched = without_address(read_addressed(spark, txn, rewritten.removed))
            changes = update_changes(
                touched.filter(cond), _updated_columns(txn, F.lit(True), assignments)
            )
            stage_change_data(txn, changes, covering=[*rewritten.removed, *rewritten.added])
        metrics = _copy_on_write_metrics(rewritten, started)
    return record(txn, OperationName.UPDATE, metrics, predicate_parameters(predicate))


def _updated_columns(
    txn: OptimisticTransaction, cond: Column, assignments: Mapping[str, Column]
) -> list[Column]:
    return [
        F.when(cond, assignments[f.name]).otherwise(F.col(quote_column(f.name))).alias(f.name)
        if f.name in assignments
        else F.col(quote_column(f.name))
        for f in txn.schema.fields
    ]


def _copy_on_write_metrics(rewritten: Rewritten, started: float) -> UpdateMetrics:
    return UpdateMetrics(
        num_added_files=len(rewritten.added),
        num_removed_files=len(rewritten.removed),
        num_updated_rows=rewritten.matched_rows,
        num_copied_rows=rewritten.copied_rows,
        execution_time_ms=int((time.monotonic() - started) * 1000),
    )


def _rewrite_on_driver(
    spark: SparkSession,
    txn: OptimisticTransaction,
    candidates: list[AddFile],
    found: dict[int, FileRows] | None,
    texts: Mapping[str, str | Column],
) -> Rewritten | None:
    """A copy-on-write UPDATE rewritten and staged on the driver, or None to use Spark.

    See :mod:`~deltatx.spark.commands.driver_rewrite` for when it applies.
    """
    if found is None:
        return None
    values = translate_assignments(txn.schema, texts)
    if values is None:
        return None
    return rewrite_on_driver(txn, candidates, found, values=values, spark=spark)


def _update_on_driver(
    spark: SparkSession,
    txn: OptimisticTransaction,
    candidates: list[AddFile],
    found: dict[int, FileRows] | None,
    texts: Mapping[str, str | Column],
) -> tuple[Mapping[int, RowIndexes], list[AddFile]] | None:
    """The matched rows and their new versions written on the driver, or None to use Spark.

    See :func:`~deltatx.spark.commands.driver_update.update_on_driver` for when it applies.
    """
    if found is None:
        return None
    matched = matched_addresses(found)
    known = {i: r.values for i, r in found.items() if r.values is not None}
    added = update_on_driver(txn, candidates, matched, texts, spark=spark, known=known)
    return None if added is None else (matched, added)


def _stage_dv_update(
    spark: SparkSession,
    txn: OptimisticTransaction,
    candidates: list[AddFile],
    cond: Column,
    assignments: Mapping[str, Column],
    started: float,
    found: dict[int, FileRows] | None,
) -> tuple[UpdateMetrics, Mapping[int, RowIndexes]]:
    """UPDATE with deletion vectors by Spark: old versions marked deleted, new ones appended.

    Only the matched rows are written (to new files); no unchanged row is copied. Rows the
    driver found are written by one Spark job over their files, else one job finds and
    writes them.
    """
    updated = _updated_columns(txn, F.lit(True), assignments)
    known = None if found is None else _write_found(spark, txn, candidates, cond, updated, found)
    if known is not None:
        matched, added = known
    else:
        matched, added = _find_and_write(spark, txn, candidates, cond, updated)
    return _stage_dv_changes(txn, candidates, matched, added, started), matched


def _stage_dv_changes(
    txn: OptimisticTransaction,
    candidates: list[AddFile],
    matched: Mapping[int, RowIndexes],
    added: list[AddFile],
    started: float,
) -> UpdateMetrics:
    """Marks the old versions deleted, adds the new files and counts what changed."""
    changes = mark_deleted(txn, candidates, matched)
    txn.add_files(added)
    return UpdateMetrics(
        num_added_files=len(added),
        num_removed_files=changes.removed_files,
        num_updated_rows=changes.rows,
        num_copied_rows=0,
        num_deletion_vectors_added=changes.dvs_added,
        num_deletion_vectors_removed=replaced_vectors(candidates, matched),
        execution_time_ms=int((time.monotonic() - started) * 1000),
    )


def _write_found(
    spark: SparkSession,
    txn: OptimisticTransaction,
    candidates: list[AddFile],
    cond: Column,
    updated: list[Column],
    found: dict[int, FileRows],
) -> tuple[Mapping[int, RowIndexes], list[AddFile]] | None:
    """Writes the new versions of the rows the driver found: one job over the touched files.

    None when the rows Spark wrote are not as many as the driver found (the files written
    stay unreferenced and the statement runs its Spark job instead).
    """
    matched = matched_addresses(found)
    if not matched:
        return matched, []
    touched = [candidates[i] for i in sorted(matched)]
    rows = without_address(read_addressed(spark, txn, touched)).filter(cond)
    added = write_data(txn, rows.select(*updated), recompute_generated=True)
    written = [num_records(f.stats) for f in added]
    expected = sum(len(r) for r in matched.values())
    if all(n is not None for n in written) and sum(n or 0 for n in written) != expected:
        return None
    return matched, added


def _find_and_write(
    spark: SparkSession,
    txn: OptimisticTransaction,
    candidates: list[AddFile],
    cond: Column,
    updated: list[Column],
) -> tuple[Mapping[int, RowIndexes], list[AddFile]]:
    """Finds the matched rows with Spark and writes their new versions (and their changes)."""
    # The matched rows are kept once found: their addresses and their new versions then come
    # from one scan of the candidates, not two.
    hit_rows = read_addressed(spark, txn, candidates).filter(cond).persist(_KEEP)
    try:
        matched = collect_addresses(hit_rows)
        added: list[AddFile] = []
        if matched:
            added = write_data(
                txn, without_address(hit_rows).select(*updated), recompute_generated=True
            )
            if records_changes(txn):
                change_rows = update_changes(without_address(hit_rows), updated)
                stage_change_data(txn, change_rows, covering=[*candidates, *added])
    finally:
        hit_rows.unpersist()
    return matched, added
