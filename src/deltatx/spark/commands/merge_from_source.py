"""MERGE without NOT MATCHED BY SOURCE clauses: the work follows the source.

Only target rows a source row matches can change, so the target is read only where the
source's join keys reach (file statistics against the keys' range) and joined with the source
in one pass that keeps the matched pairs.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, Row, SparkSession
from pyspark.sql import functions as F

from deltatx.errors import InvalidArgumentError, InvalidConditionError
from deltatx.kernel.actions import AddFile
from deltatx.kernel.deletion_vectors import num_records
from deltatx.kernel.expressions import (
    TRUE,
    Comparison,
    ComparisonOp,
    Expression,
    Literal,
    and_,
)
from deltatx.kernel.expressions import Column as KernelColumn
from deltatx.kernel.file_predicate import FilePredicate
from deltatx.kernel.metrics import MergeMetrics
from deltatx.kernel.operations import OperationName
from deltatx.kernel.schema import StructType
from deltatx.log.transaction import OptimisticTransaction
from deltatx.progress import step
from deltatx.spark.commands.common import (
    condition_column,
    file_metrics,
    record,
    to_spark_schema,
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
    first_applying,
    merge_parameters,
    output_columns,
    source_column,
)
from deltatx.spark.commands.rewrite import (
    FILE_INDEX_COLUMN,
    ROW_INDEX_COLUMN,
    read_addressed,
    replaced_vectors,
    without_address,
)
from deltatx.spark.deletion_vectors import collect_addresses
from deltatx.spark.expressions import merge_key_pairs
from deltatx.spark.schema import quote_column

SOURCE_ROW = "__deltatx_source_row"


def stage_source_driven(
    spark: SparkSession,
    txn: OptimisticTransaction,
    *,
    source: DataFrame,
    condition: str | Column,
    clauses: Sequence[MergeClause],
    target_alias: str,
    predicate: Expression,
    started: float,
) -> MergeMetrics:
    """Stages a MERGE without NOT MATCHED BY SOURCE clauses, driven by the source.

    Only target rows a source row matches change, so the work follows the (usually small)
    source rather than the target. The source is materialised once with a row id (both passes
    then see the same rows, and its known size lets Spark broadcast it); one pass over it
    counts it and finds the range of its join keys, which prunes the target files by their
    statistics. The candidate files are inner-joined with the source in one streaming pass
    that keeps only the matched pairs; one aggregation of those gives the touched files, the
    per-clause counts and the ambiguity check; the write then emits the new versions, the
    inserted source rows and, without deletion vectors, the untouched rows of the touched
    files.
    """
    schema = txn.schema
    inserts = {i for i, c in enumerate(clauses) if c.kind is ClauseKind.NOT_MATCHED_INSERT}
    deletes = {i for i, c in enumerate(clauses) if c.kind.value.endswith("delete")}
    updates = {i for i, c in enumerate(clauses) if c.kind.value.endswith("update")}
    matched_clauses = [c for c in clauses if c.kind.group == "matched"]
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
    lone_delete = (
        len(matched_clauses) == 1
        and matched_clauses[0].kind is ClauseKind.MATCHED_DELETE
        and matched_clauses[0].condition is None
    )
    use_dvs = txn.configuration.deletion_vectors_enabled
    src = src.persist(StorageLevel.MEMORY_AND_DISK)
    cached = [src]
    try:
        step("scanning")
        summary = src.agg(
            F.count(F.lit(1)).alias("rows"),
            *[F.min(c).alias(f"lo{i}") for i, (_, c) in enumerate(keys)],
            *[F.max(c).alias(f"hi{i}") for i, (_, c) in enumerate(keys)],
        ).collect()[0]
        num_source_rows = int(summary["rows"])
        # The transaction records the ON condition's target conjuncts as its read, as
        # documented (a MERGE on join keys alone may conflict with writes anywhere); the key
        # range only spares reading files that cannot hold a match.
        reach: list[Expression] = []
        for i, (name, _) in enumerate(keys):
            lo, hi = summary[f"lo{i}"], summary[f"hi{i}"]
            if lo is not None and hi is not None:
                reach.append(Comparison(ComparisonOp.GE, KernelColumn(name), Literal(lo)))
                reach.append(Comparison(ComparisonOp.LE, KernelColumn(name), Literal(hi)))
        candidates = txn.scan(None if predicate == TRUE else predicate)
        if reach:
            in_range = FilePredicate(
                and_(*reach), schema=schema, partition_columns=txn.partition_columns
            )
            candidates = [f for f in candidates if in_range.may_match(f)]
        target = read_addressed(spark, txn, candidates).alias(target_alias)
        matched = target.join(src, on=on, how="inner").withColumn(ACTION, matched_action)
        matched = matched.persist(StorageLevel.MEMORY_AND_DISK)
        cached.append(matched)
        counts = _merge_counts(matched)
        if matched_clauses and not lone_delete and any(r["most"] > 1 for r in counts):
            raise InvalidArgumentError(AMBIGUOUS)
        per_action: dict[int, int] = {}
        touched: set[int] = set()
        for r in counts:
            action = int(r[ACTION])
            per_action[action] = per_action.get(action, 0) + int(r["rows"])
            if action >= 0:
                touched.add(int(r[FILE_INDEX_COLUMN]))
        changed_rows = matched.filter(F.col(ACTION) >= 0).select(
            FILE_INDEX_COLUMN, ROW_INDEX_COLUMN
        )
        changed: dict[int, list[int]] = {}
        if use_dvs and touched:
            changed = collect_addresses(changed_rows.distinct() if lone_delete else changed_rows)
        unmatched = (
            src.join(matched.select(SOURCE_ROW), on=SOURCE_ROW, how="left_anti")
            .withColumn(ACTION, insert_action)
            .filter(F.col(ACTION) != DROP)
            if inserts
            else None
        )
        num_updated = sum(per_action.get(i, 0) for i in updates)
        num_changed = sum(per_action.get(i, 0) for i in updates | deletes)
        copy_from = [] if use_dvs else sorted(touched)
        copied = (
            file_metrics([candidates[i] for i in copy_from])[0] - num_changed if copy_from else 0
        )
        added: list[AddFile] = []
        if touched or unmatched is not None:
            step("writing")
            rewritten = _rewritten_rows(
                spark,
                txn,
                candidates,
                matched.filter(F.col(ACTION).isin(sorted(updates) or [-99])).select(*matched_out),
                unmatched.select(*insert_out) if unmatched is not None else None,
                copy_from=copy_from,
                changed=changed_rows,
            )
            added = write_data(txn, rewritten, recompute_generated=True)
        # What was written beyond the changed and copied rows was inserted; without row counts
        # in the statistics, the unmatched source rows are counted.
        written = [num_records(f.stats) for f in added]
        known = all(n is not None for n in written) and all(
            num_records(candidates[i].stats) is not None for i in copy_from
        )
        if unmatched is None:
            num_inserted = 0
        elif known:
            num_inserted = sum(n or 0 for n in written) - num_updated - copied
        else:
            num_inserted = unmatched.count()
            copied = sum(n or 0 for n in written) - num_updated - num_inserted
    finally:
        for df in cached:
            df.unpersist()
    dvs_added = dvs_removed = 0
    if use_dvs:
        dv_changes = mark_deleted(txn, candidates, changed)
        record_row_level(txn, candidates, changed, predicate=predicate, condition=condition)
        removed = [candidates[i] for i in sorted(touched)][: dv_changes.removed_files]
        dvs_added, dvs_removed = dv_changes.dvs_added, replaced_vectors(candidates, changed)
    else:
        removed = [candidates[i] for i in sorted(touched)]
        txn.remove_files(removed)
    txn.add_files(added)
    metrics = MergeMetrics(
        num_added_files=len(added),
        num_removed_files=len(removed),
        num_source_rows=num_source_rows,
        num_target_rows_inserted=num_inserted,
        num_target_rows_updated=num_updated,
        num_target_rows_deleted=sum(per_action.get(i, 0) for i in deletes),
        num_target_rows_copied=copied,
        num_target_files_added=len(added),
        num_target_files_removed=len(removed),
        num_output_rows=num_updated + num_inserted + copied,
        num_deletion_vectors_added=dvs_added,
        num_deletion_vectors_removed=dvs_removed,
        execution_time_ms=int((time.monotonic() - started) * 1000),
    )
    return record(
        txn, OperationName.MERGE, metrics, merge_parameters(condition, predicate, clauses)
    )


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


def _merge_counts(matched: DataFrame) -> list[Row]:
    """Counts, in one aggregation, what the MERGE changes in the target.

    Per (file, clause): the matched target rows, and the most source rows that matched one of
    them (more than one is ambiguous).
    """
    per_row = matched.groupBy(FILE_INDEX_COLUMN, ROW_INDEX_COLUMN).agg(
        F.count(F.lit(1)).alias("n"), F.max(ACTION).alias(ACTION)
    )
    return (
        per_row.groupBy(FILE_INDEX_COLUMN, ACTION)
        .agg(F.count(F.lit(1)).alias("rows"), F.max("n").alias("most"))
        .collect()
    )


def _rewritten_rows(
    spark: SparkSession,
    txn: OptimisticTransaction,
    candidates: Sequence[AddFile],
    updated: DataFrame,
    inserted: DataFrame | None,
    *,
    copy_from: Sequence[int],
    changed: DataFrame,
) -> DataFrame:
    """Every row the MERGE writes, the one place they are produced.

    New versions of updated rows, inserted rows and (copy-on-write) the rows of the touched
    files ``copy_from`` that the MERGE leaves unchanged.
    """
    out = updated
    if inserted is not None:
        out = out.unionByName(inserted)
    if copy_from:
        files = [candidates[i] for i in copy_from]
        # The touched files are read again by their position in copy_from; the changed rows
        # are addressed by candidate position.
        positions = F.array(*[F.lit(i).cast("long") for i in copy_from])
        rows = read_addressed(spark, txn, files).withColumn(
            FILE_INDEX_COLUMN, F.element_at(positions, (F.col(FILE_INDEX_COLUMN) + 1).cast("int"))
        )
        kept = rows.join(changed, on=[FILE_INDEX_COLUMN, ROW_INDEX_COLUMN], how="left_anti")
        out = out.unionByName(without_address(kept))
    return out
