"""MERGE INTO: the full clause set, evaluated in order, copy-on-write on the touched files.

The ON condition's target-only conjuncts (``t.date = '2024-01-01'``) prune the target files and
are the recorded read predicate, so the docs's advice (put the partition in the condition)
really keeps concurrent merges on different partitions apart.

A MERGE without NOT MATCHED BY SOURCE clauses follows the source
(:mod:`deltatx.spark.commands.merge_from_source`). Otherwise every candidate target row may
change: the candidate files (with each row's file and row index) are outer-joined with the
source; every joined row gets the index of the first clause that applies to it. One
aggregation finds ambiguous matches, the touched files and the counts; the write then emits
the rows of the touched files (updated, deleted or copied) plus the inserted rows.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, Row, SparkSession
from pyspark.sql import functions as F

from deltatx.errors import InvalidArgumentError, InvalidConditionError
from deltatx.kernel.expressions import (
    TRUE,
)
from deltatx.kernel.metrics import MergeMetrics
from deltatx.kernel.operations import OperationName
from deltatx.kernel.schema import StructField, StructType
from deltatx.log.transaction import OptimisticTransaction
from deltatx.progress import step
from deltatx.spark.commands.change_data import merge_changes, stage_change_data
from deltatx.spark.commands.common import (
    check_allowed,
    condition_column,
    record,
    to_delta_schema,
    write_data,
)
from deltatx.spark.commands.dv_dml import mark_deleted, record_row_level
from deltatx.spark.commands.merge_clauses import (
    ACTION,
    AMBIGUOUS,
    COPY,
    DROP,
    ClauseKind,
    MergeClause,
    merge_parameters,
    output_columns,
    source_column,
)
from deltatx.spark.commands.merge_from_source import stage_source_driven
from deltatx.spark.commands.rewrite import (
    FILE_INDEX_COLUMN,
    ROW_INDEX_COLUMN,
    read_addressed,
    replaced_vectors,
)
from deltatx.spark.deletion_vectors import collect_addresses
from deltatx.spark.expressions import is_deterministic, merge_target_predicate
from deltatx.spark.schema import quote_column

__all__ = ["ClauseKind", "MergeClause", "stage_merge"]

_IN_TARGET = "__deltatx_in_target"
_IN_SOURCE = "__deltatx_in_source"


def stage_merge(
    spark: SparkSession,
    txn: OptimisticTransaction,
    *,
    source: DataFrame,
    condition: str | Column,
    clauses: Sequence[MergeClause],
    target_alias: str | None,
    source_alias: str | None = None,
    merge_schema: bool = False,
) -> MergeMetrics:
    """Stages a MERGE into ``txn`` and returns its metrics.

    Raises:
        InvalidArgumentError: No clause, a clause out of place, a set of a missing column, or a
            target row matched by several source rows (nothing is written).
        InvalidConditionError: A condition or expression does not resolve.
    """
    started = time.monotonic()
    if not clauses:
        raise InvalidArgumentError("a merge needs at least one when_... clause")
    check_allowed(
        txn,
        OperationName.MERGE,
        deletes_rows=any(c.kind is not ClauseKind.NOT_MATCHED_INSERT for c in clauses),
    )
    _evolve_schema(txn, source, clauses, merge_schema)
    schema = txn.schema
    t_alias = target_alias or "target"
    predicate = (
        merge_target_predicate(
            condition, schema=schema, target_alias=t_alias, source_alias=source_alias or ""
        )
        if isinstance(condition, str)
        else TRUE
    )
    # The source-driven path writes no change data yet: a table recording its changes takes
    # the general path, which does. It also evaluates the conditions twice (finding the
    # touched rows, then writing them), so non-deterministic ones take the single-pass path.
    by_source = any(c.kind.group == "by_source" for c in clauses)
    repeatable = is_deterministic(condition) and all(
        c.condition is None or is_deterministic(c.condition) for c in clauses
    )
    if not by_source and not txn.configuration.change_data_feed and repeatable:
        return stage_source_driven(
            spark,
            txn,
            source=source,
            condition=condition,
            clauses=clauses,
            target_alias=t_alias,
            predicate=predicate,
            started=started,
        )
    step("scanning")
    candidates = txn.scan(None if predicate == TRUE else predicate)
    target = (
        read_addressed(spark, txn, candidates).withColumn(_IN_TARGET, F.lit(True)).alias(t_alias)
    )
    source_tagged = source.select(
        "*",
        *[F.col(quote_column(c)).alias(source_column(i)) for i, c in enumerate(source.columns)],
        F.lit(True).alias(_IN_SOURCE),
    )
    groups = {c.kind.group for c in clauses}
    # Rewriting a touched file needs all of its rows, matched or not; inserting needs the
    # unmatched source rows. An insert-only merge touches no target file.
    keep_target = bool(groups & {"matched", "by_source"})
    keep_source = "not_matched" in groups
    how = "full" if keep_target and keep_source else ("left" if keep_target else "right")
    try:
        joined = target.join(source_tagged, on=condition_column(condition), how=how)
        classified = joined.withColumn(ACTION, _action_column(clauses))
        out_columns = output_columns(schema, clauses, source.columns, t_alias)
        _ = classified.select(*out_columns).schema  # analyse now: fail before writing
    except InvalidArgumentError:
        raise
    except Exception as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise InvalidConditionError(f"merge does not resolve: {first}") from None

    matched = [c for c in clauses if c.kind.group == "matched"]
    # Deleting a matched row is the same whichever source row matched it, so, as in delta-spark,
    # a lone unconditional WHEN MATCHED DELETE allows duplicate matches: each target row is
    # kept once so that it is deleted and counted once.
    lone_delete = (
        len(matched) == 1
        and matched[0].kind is ClauseKind.MATCHED_DELETE
        and matched[0].condition is None
    )
    if lone_delete:
        both = F.col(_IN_TARGET).isNotNull() & F.col(_IN_SOURCE).isNotNull()
        classified = (
            classified.filter(both)
            .dropDuplicates([FILE_INDEX_COLUMN, ROW_INDEX_COLUMN])
            .union(classified.filter(~both))
        )
    classified = classified.persist(StorageLevel.MEMORY_AND_DISK)
    try:
        if matched and not lone_delete:
            dup = (
                classified.filter(F.col(_IN_TARGET).isNotNull() & F.col(_IN_SOURCE).isNotNull())
                .groupBy(FILE_INDEX_COLUMN, ROW_INDEX_COLUMN)
                .count()
                .filter("count > 1")
                .limit(1)
                .collect()
            )
            if dup:
                raise InvalidArgumentError(AMBIGUOUS)
        counts = classified.groupBy(FILE_INDEX_COLUMN, ACTION).count().collect()
        touched: set[int] = set()
        per_action: dict[int, int] = {}
        for r in counts:
            action = int(r[ACTION])
            per_action[action] = per_action.get(action, 0) + int(r["count"])
            if r[FILE_INDEX_COLUMN] is not None and action >= 0:
                touched.add(int(r[FILE_INDEX_COLUMN]))
        num_source_rows = source.count()
        inserts = {i for i, c in enumerate(clauses) if c.kind is ClauseKind.NOT_MATCHED_INSERT}
        deletes = {i for i, c in enumerate(clauses) if c.kind.value.endswith("delete")}
        updates = {i for i, c in enumerate(clauses) if c.kind.value.endswith("update")}
        use_dvs = txn.configuration.deletion_vectors_enabled
        changed: dict[int, list[int]] = {}
        if use_dvs and touched:
            # Deletion vectors: the changed target rows are marked deleted and only the new
            # versions (updates) and inserts are written; no unchanged row is copied.
            changed = collect_addresses(
                classified.filter(F.col(_IN_TARGET).isNotNull() & (F.col(ACTION) >= 0)).select(
                    FILE_INDEX_COLUMN, ROW_INDEX_COLUMN
                )
            )
            keep = F.col(ACTION).isin(sorted(inserts | updates) or [-99])
        else:
            keep = (
                F.col(FILE_INDEX_COLUMN).isin(sorted(touched)) if touched else F.lit(False)
            ) | F.col(ACTION).isin(sorted(inserts) or [-99])
        result = classified.filter(keep & ~F.col(ACTION).isin(sorted(deletes) or [-99]))
        result = result.filter(F.col(ACTION) != DROP).select(*out_columns)
        added = []
        if touched or any(per_action.get(i, 0) for i in inserts):
            added = write_data(txn, result, recompute_generated=True)
        if touched and txn.configuration.change_data_feed:
            # An insert-only merge needs no change file: its adds are its changes.
            changes = merge_changes(
                classified,
                clause=F.col(ACTION),
                in_target=F.col(_IN_TARGET).isNotNull(),
                before=[F.col(f"`{t_alias}`.`{f.name}`").alias(f.name) for f in schema.fields],
                after=out_columns,
                inserts=inserts,
                updates=updates,
                deletes=deletes,
            )
            stage_change_data(
                txn, changes, covering=[*(candidates[i] for i in sorted(touched)), *added]
            )
    finally:
        classified.unpersist()
    dvs_added = dvs_removed = 0
    if use_dvs:
        dv_changes = mark_deleted(txn, candidates, changed)
        record_row_level(txn, candidates, changed, predicate=predicate, condition=condition)
        removed = [candidates[i] for i in sorted(touched)][: dv_changes.removed_files]
        copied_in_touched = 0
        dvs_added, dvs_removed = dv_changes.dvs_added, replaced_vectors(candidates, changed)
    else:
        removed = [candidates[i] for i in sorted(touched)]
        txn.remove_files(removed)
        copied_in_touched = _copied_rows(counts, touched)
    txn.add_files(added)
    metrics = MergeMetrics(
        num_added_files=len(added),
        num_removed_files=len(removed),
        num_source_rows=num_source_rows,
        num_target_rows_inserted=sum(per_action.get(i, 0) for i in inserts),
        num_target_rows_updated=sum(per_action.get(i, 0) for i in updates),
        num_target_rows_deleted=sum(per_action.get(i, 0) for i in deletes),
        num_target_rows_copied=copied_in_touched,
        num_target_files_added=len(added),
        num_target_files_removed=len(removed),
        num_output_rows=sum(per_action.get(i, 0) for i in inserts | updates) + copied_in_touched,
        num_deletion_vectors_added=dvs_added,
        num_deletion_vectors_removed=dvs_removed,
        execution_time_ms=int((time.monotonic() - started) * 1000),
    )
    return record(
        txn, OperationName.MERGE, metrics, merge_parameters(condition, predicate, clauses)
    )


def _copied_rows(counts: list[Row], touched: set[int]) -> int:
    return sum(
        int(r["count"])
        for r in counts
        if int(r[ACTION]) == COPY
        and r[FILE_INDEX_COLUMN] is not None
        and int(r[FILE_INDEX_COLUMN]) in touched
    )


def _action_column(clauses: Sequence[MergeClause]) -> Column:
    """The index of the first clause that applies to each joined row (or copy / drop)."""
    in_t = F.col(_IN_TARGET).isNotNull()
    in_s = F.col(_IN_SOURCE).isNotNull()
    situations = {
        "matched": in_t & in_s,
        "not_matched": ~in_t & in_s,
        "by_source": in_t & ~in_s,
    }
    expr = F.when(in_t, F.lit(COPY)).otherwise(F.lit(DROP))
    for i in reversed(range(len(clauses))):
        c = clauses[i]
        applies = situations[c.kind.group]
        if c.condition is not None:
            applies = applies & F.coalesce(condition_column(c.condition), F.lit(False))
        expr = F.when(applies, F.lit(i)).otherwise(expr)
    return expr


def _evolve_schema(
    txn: OptimisticTransaction,
    source: DataFrame,
    clauses: Sequence[MergeClause],
    merge_schema: bool,
) -> None:
    """Checks assignment targets exist; with ``merge_schema`` adds the source's new columns."""
    schema = txn.schema
    names = {f.name.lower() for f in schema.fields}
    for c in clauses:
        for name in c.assignments or {}:
            if name.lower() not in names:
                raise InvalidArgumentError(
                    f"merge clause {c.kind.value} sets column '{name}', which the table does not "
                    f"have (columns: {', '.join(schema.field_names())})"
                )
    star = any(c.assignments is None and not c.kind.value.endswith("delete") for c in clauses)
    if not star:
        return
    source_schema = to_delta_schema(source.schema)
    extra = [f for f in source_schema.fields if f.name.lower() not in names]
    if not extra:
        return
    if not merge_schema:
        missing = ", ".join(f.name for f in extra)
        raise InvalidArgumentError(
            f"the merge source has columns the table lacks ({missing}); pass merge_schema=True "
            f"(with_schema_evolution()) to add them, or select only the table's columns"
        )
    from dataclasses import replace

    evolved = StructType(
        (*schema.fields, *(StructField(f.name, f.type, True, f.metadata) for f in extra))
    )
    txn.update_metadata(replace(txn.metadata, schema_string=evolved.to_json()))
