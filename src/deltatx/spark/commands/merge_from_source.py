"""MERGE without NOT MATCHED BY SOURCE clauses: the work follows the source.

Only target rows a source row matches can change, so the target is read only where the
source's join keys reach (file statistics against the keys' range) and joined with the source
in one pass that keeps the matched pairs. A small source on key equalities is matched on the
driver instead (:mod:`deltatx.spark.commands.merge_driver_source`); rows taken from the
source alone are then also written there (:mod:`deltatx.spark.commands.merge_driver_write`),
and, copy-on-write, so are the unchanged rows of the touched files
(:mod:`deltatx.spark.commands.driver_rewrite`): the source's one ``toArrow`` is then the
statement's only Spark job.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from deltatx.errors import InvalidArgumentError
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
from deltatx.log.row_level import arrow_join
from deltatx.log.row_level.arrow_join import key_matches
from deltatx.log.transaction import OptimisticTransaction
from deltatx.progress import step
from deltatx.spark.commands.common import (
    file_metrics,
    record,
    write_data,
)
from deltatx.spark.commands.driver_rewrite import copies_fit, rewrite_for_merge
from deltatx.spark.commands.dv_dml import mark_deleted, record_row_level
from deltatx.spark.commands.merge_analysis import SOURCE_ROW, Analysis, analyse
from deltatx.spark.commands.merge_clauses import (
    ACTION,
    AMBIGUOUS,
    COPY,
    DROP,
    ClauseKind,
    MergeClause,
    merge_parameters,
    output_columns,
)
from deltatx.spark.commands.merge_driver_source import (
    fits,
    plan_driver_source,
    source_size,
)
from deltatx.spark.commands.merge_driver_write import plan_driver_rows, write_rows
from deltatx.spark.commands.rewrite import (
    FILE_INDEX_COLUMN,
    ROW_INDEX_COLUMN,
    read_addressed,
    replaced_vectors,
)
from deltatx.spark.schema import quote_column


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
    that keeps only the matched pairs, whose addresses (file, row, clause, source row) are
    counted on the driver: the touched files, the per-clause counts, the ambiguity check and
    the deletion vectors. The write joins only the touched files with the source again and
    emits the new versions, the inserted source rows (those no pair names) and, without
    deletion vectors, the unchanged rows of the touched files.
    """
    schema = txn.schema
    inserts = {i for i, c in enumerate(clauses) if c.kind is ClauseKind.NOT_MATCHED_INSERT}
    deletes = {i for i, c in enumerate(clauses) if c.kind.value.endswith("delete")}
    updates = {i for i, c in enumerate(clauses) if c.kind.value.endswith("update")}
    matched_clauses = [c for c in clauses if c.kind.group == "matched"]
    lone_delete = (
        len(matched_clauses) == 1
        and matched_clauses[0].kind is ClauseKind.MATCHED_DELETE
        and matched_clauses[0].condition is None
    )
    use_dvs = txn.configuration.deletion_vectors_enabled
    local = plan_driver_source(
        source,
        condition,
        schema=schema,
        target_alias=target_alias,
        clauses=clauses,
        row_id=SOURCE_ROW,
    )
    written_by = (
        plan_driver_rows(
            txn,
            clauses,
            local.schema,
            source_alias=local.alias,
            target_alias=target_alias,
            spark=spark,
        )
        if local is not None
        else None
    )
    # When the driver both matches and writes, every name the merge uses was checked against
    # the schemas above (key columns, source columns, the source's alias), so Spark's
    # analysis of it waits until a Spark job needs it.
    checked = (
        local is not None
        and written_by is not None
        and all(c.condition is None for c in clauses)
        and local.names(source)
    )
    spark_parts = (
        None
        if checked
        else analyse(spark, txn, source, condition, clauses, target_alias, updates, inserts)
    )

    def parts() -> Analysis:
        nonlocal spark_parts
        if spark_parts is None:
            spark_parts = analyse(
                spark, txn, source, condition, clauses, target_alias, updates, inserts
            )
        return spark_parts

    if (
        local is not None
        and spark_parts is not None
        and not spark_parts.resolves(local.frame(spark))
    ):
        local = None
    # A source Spark cannot size (rows from a Python list) is cached and sized first.
    size = source_size(source) if local is not None else None
    if size is not None and not fits(None, size):
        local = None
    persisted = None if local is not None and size is not None else parts().src
    new_versions: DataFrame | None = None
    src: DataFrame | None = None
    if persisted is not None:
        src = persisted = persisted.persist(StorageLevel.MEMORY_AND_DISK)
    try:
        step("scanning")
        if persisted is None:
            assert local is not None
            # One job brings the source to the driver: its count and key range are free.
            table = local.collect(source)
            num_source_rows = table.num_rows
            ranges = [(name, *_min_max(table.column(c))) for name, c in local.keys]
        else:
            num_source_rows, ranges = _summary(persisted, parts().keys)
            cached_size = source_size(persisted)
            if local is not None and fits(num_source_rows, cached_size):
                table = local.collect(persisted.select(*map(quote_column, source.columns)))
            else:
                local = None
        candidates = _in_key_range(txn, predicate, ranges)
        pairs = (
            key_matches(
                txn.log.location,
                candidates,
                schema,
                [name for name, _ in local.keys],
                [table.column(c) for _, c in local.keys],
                column_mapping=txn.configuration.column_mapping_mode,
            )
            if local is not None
            else None
        )
        driver_rows: pa.Table | None = None
        if local is not None and pairs is not None:
            found = _Matches.of(_addressed(pairs, _matched_index(clauses)))
            rest = table.filter(
                pc.invert(pc.is_in(table.column(SOURCE_ROW), value_set=found.source_rows))
            )
            # Copy-on-write also copies the unchanged rows of the touched files on the driver.
            if written_by is not None and (
                use_dvs or copies_fit([candidates[i] for i in found.touched])
            ):
                driver_rows = written_by.rows(
                    txn, table, pairs.column(arrow_join.SOURCE_ROW), rest.column(SOURCE_ROW)
                )
            # Only the matched source rows meet the touched files again; the rest are inserts.
            if driver_rows is None:
                src = F.broadcast(local.frame(spark, table.take(found.source_rows)))
            unmatched: DataFrame | None = (
                local.frame(spark, rest) if inserts and driver_rows is None else None
            )
            num_driver_inserts = rest.num_rows if inserts and driver_rows is not None else 0
            action = _matched_index(clauses)
            if use_dvs and action in updates and driver_rows is None:
                # With deletion vectors the touched files are not rewritten: when the update
                # takes every column from the source, its rows need no target row either.
                versions = local.frame(spark, table.take(pairs.column(arrow_join.SOURCE_ROW)))
                new_versions = _from_source_alone(versions, schema, clauses, source.columns, action)
        else:
            if local is not None:
                src = F.broadcast(local.frame(spark, table))
            assert src is not None
            target = read_addressed(spark, txn, candidates).alias(target_alias)
            matched = target.join(src, on=parts().on, how="inner").withColumn(
                ACTION, parts().matched_action
            )
            # Three longs per matched pair reach the driver (as many as the deletion vectors
            # need anyway); counting, the ambiguity check and the touched files then cost no
            # shuffle.
            found = _Matches.of(
                matched.select(FILE_INDEX_COLUMN, ROW_INDEX_COLUMN, ACTION, SOURCE_ROW).toArrow()
            )
            unmatched = _unmatched(spark, src, found.source_rows) if inserts else None
            num_driver_inserts = 0
        if matched_clauses and not lone_delete and found.most > 1:
            raise InvalidArgumentError(AMBIGUOUS)
        per_action, touched = found.per_action, found.touched
        changed = found.changed if use_dvs else {}
        if unmatched is not None:
            unmatched = unmatched.withColumn(ACTION, parts().insert_action).filter(
                F.col(ACTION) != DROP
            )
        num_updated = sum(per_action.get(i, 0) for i in updates)
        num_changed = sum(per_action.get(i, 0) for i in updates | deletes)
        copy_from = [] if use_dvs else sorted(touched)
        copied = (
            file_metrics([candidates[i] for i in copy_from])[0] - num_changed if copy_from else 0
        )
        added: list[AddFile] = []
        if driver_rows is not None and not use_dvs:
            touched_rows = {i: found.changed[i] for i in touched}
            added = rewrite_for_merge(txn, candidates, touched_rows, driver_rows)
        elif driver_rows is not None:
            if driver_rows.num_rows:
                step("writing")
                added = write_rows(txn, driver_rows)
        elif touched or unmatched is not None:
            step("writing")
            analysed = parts()
            assert src is not None
            rewritten = (
                new_versions
                if new_versions is not None
                else _rewritten_rows(
                    spark,
                    txn,
                    [candidates[i] for i in sorted(touched)],
                    src,
                    on=analysed.on,
                    target_alias=target_alias,
                    matched_action=analysed.matched_action,
                    matched_out=analysed.matched_out,
                    keep=sorted(updates) if use_dvs else None,
                    dropped=sorted(deletes),
                    inserted=(
                        unmatched.select(*analysed.insert_out) if unmatched is not None else None
                    ),
                )
            )
            if new_versions is not None and unmatched is not None:
                rewritten = rewritten.unionByName(unmatched.select(*analysed.insert_out))
            added = write_data(txn, rewritten, recompute_generated=True)
        # What was written beyond the changed and copied rows was inserted; without row counts
        # in the statistics, the unmatched source rows are counted.
        written = [num_records(f.stats) for f in added]
        known = all(n is not None for n in written) and all(
            num_records(candidates[i].stats) is not None for i in copy_from
        )
        if driver_rows is not None:
            num_inserted = num_driver_inserts
        elif unmatched is None:
            num_inserted = 0
        elif known:
            num_inserted = sum(n or 0 for n in written) - num_updated - copied
        else:
            num_inserted = unmatched.count()
            copied = sum(n or 0 for n in written) - num_updated - num_inserted
    finally:
        if persisted is not None:
            persisted.unpersist()
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


def _from_source_alone(
    versions: DataFrame,
    schema: StructType,
    clauses: Sequence[MergeClause],
    source_columns: Sequence[str],
    action: int,
) -> DataFrame | None:
    """The new versions of the updated rows built from their source rows alone, or None.

    None unless the update clause sets every column from expressions that resolve on the
    source without the target (a target column would not resolve there).
    """
    clause = clauses[action]
    names = {c.lower() for c in source_columns}
    assigned = names if clause.assignments is None else {n.lower() for n in clause.assignments}
    if any(f.name.lower() not in assigned for f in schema.fields):
        return None
    out = output_columns(schema, clauses, source_columns, None, only={action})
    rows = versions.withColumn(ACTION, F.lit(action)).select(*out)
    try:
        _ = rows.schema
    except Exception:
        return None
    return rows


_Range = tuple[str, object, object]


def _summary(src: DataFrame, keys: Sequence[tuple[str, Column]]) -> tuple[int, list[_Range]]:
    """The source's row count and (target column, lowest, highest) of each key's values."""
    # One task over the cached source aggregates it without a shuffle (and its job).
    summary = (
        src.coalesce(1)
        .agg(
            F.count(F.lit(1)).alias("rows"),
            *[F.min(c).alias(f"lo{i}") for i, (_, c) in enumerate(keys)],
            *[F.max(c).alias(f"hi{i}") for i, (_, c) in enumerate(keys)],
        )
        .collect()[0]
    )
    ranges = [(name, summary[f"lo{i}"], summary[f"hi{i}"]) for i, (name, _) in enumerate(keys)]
    return int(summary["rows"]), ranges


def _min_max(values: pa.ChunkedArray) -> tuple[object, object]:
    found = pc.min_max(values).as_py()
    return found["min"], found["max"]


def _in_key_range(
    txn: OptimisticTransaction, predicate: Expression, ranges: Sequence[_Range]
) -> list[AddFile]:
    """The candidate files whose statistics admit a row in every key's source range."""
    # The transaction records the ON condition's target conjuncts as its read, as
    # documented (a MERGE on join keys alone may conflict with writes anywhere); the key
    # range only spares reading files that cannot hold a match.
    reach: list[Expression] = []
    for name, lo, hi in ranges:
        if lo is not None and hi is not None:
            reach.append(Comparison(ComparisonOp.GE, KernelColumn(name), Literal(lo)))
            reach.append(Comparison(ComparisonOp.LE, KernelColumn(name), Literal(hi)))
    candidates = txn.scan(None if predicate == TRUE else predicate)
    if not reach:
        return candidates
    in_range = FilePredicate(
        and_(*reach), schema=txn.schema, partition_columns=txn.partition_columns
    )
    keep = in_range.matches(candidates)
    return [f for f, k in zip(candidates, keep, strict=True) if k]


def _matched_index(clauses: Sequence[MergeClause]) -> int:
    """The clause every matched row takes when no matched clause has a condition."""
    return next((i for i, c in enumerate(clauses) if c.kind.group == "matched"), COPY)


def _addressed(pairs: pa.Table, action: int) -> pa.Table:
    """The driver's matched pairs as the Spark join would have returned them."""
    return pa.table(
        {
            FILE_INDEX_COLUMN: pairs.column(arrow_join.FILE),
            ROW_INDEX_COLUMN: pairs.column(arrow_join.ROW),
            ACTION: pa.array(np.full(pairs.num_rows, action, dtype=np.int32)),
            SOURCE_ROW: pairs.column(arrow_join.SOURCE_ROW),
        }
    )


@dataclass(frozen=True, slots=True)
class _Matches:
    """What the matched (target row, source row) pairs say, counted on the driver.

    Attributes:
        most: The most source rows that matched one target row (more than one is ambiguous).
        per_action: Clause index (or COPY) -> matched target rows it applies to.
        touched: Candidate indexes of the files with a row some clause changes.
        changed: Candidate index -> row indexes of the rows some clause changes.
        source_rows: The ids of the source rows that matched a target row.
    """

    most: int
    per_action: dict[int, int]
    touched: set[int]
    changed: dict[int, list[int]]
    source_rows: pa.Array

    @classmethod
    def of(cls, pairs: pa.Table) -> _Matches:
        """Counts the pairs (file index, row index, clause index, source row id)."""
        # A target row matched several times takes the highest clause, as one row it is.
        per_row = pairs.group_by([FILE_INDEX_COLUMN, ROW_INDEX_COLUMN]).aggregate(
            [(ACTION, "max"), (ACTION, "count")]
        )
        action = per_row.column(f"{ACTION}_max")
        counts = per_row.column(f"{ACTION}_count")
        most = pc.max(counts).as_py() if per_row.num_rows else 0
        per_action: dict[int, int] = {}
        for a, n in zip(
            *pc.value_counts(action).flatten() if per_row.num_rows else ([], []), strict=True
        ):
            per_action[int(a.as_py())] = int(n.as_py())
        hit = per_row.filter(pc.greater_equal(action, 0))
        changed: dict[int, list[int]] = defaultdict(list)
        for f, r in zip(
            hit.column(FILE_INDEX_COLUMN).to_pylist(),
            hit.column(ROW_INDEX_COLUMN).to_pylist(),
            strict=True,
        ):
            changed[int(f)].append(int(r))
        return cls(
            most=int(most or 0),
            per_action=per_action,
            touched=set(changed),
            changed=dict(changed),
            source_rows=pc.unique(pairs.column(SOURCE_ROW)),
        )


def _unmatched(spark: SparkSession, src: DataFrame, matched_rows: pa.Array) -> DataFrame:
    """The source rows whose id is not among ``matched_rows``."""
    if not len(matched_rows):
        return src
    ids = spark.createDataFrame(pa.table({SOURCE_ROW: matched_rows.cast(pa.int64())}))
    return src.join(F.broadcast(ids), on=SOURCE_ROW, how="left_anti")


def _rewritten_rows(
    spark: SparkSession,
    txn: OptimisticTransaction,
    touched: Sequence[AddFile],
    src: DataFrame,
    *,
    on: Column,
    target_alias: str,
    matched_action: Column,
    matched_out: Sequence[Column],
    keep: Sequence[int] | None,
    dropped: Sequence[int],
    inserted: DataFrame | None,
) -> DataFrame:
    """Every row the MERGE writes, the one place they are produced.

    The rows of the touched files are joined with the source once more: with ``keep`` (the
    update clauses, deletion vectors) only the new versions of the rows those clauses change;
    without it (copy-on-write) every row but those a delete clause drops, changed or copied
    unchanged. Then the inserted rows.
    """
    out: DataFrame | None = None
    if touched:
        target = read_addressed(spark, txn, touched).alias(target_alias)
        if keep is None:
            joined = target.join(src, on=on, how="left").withColumn(
                ACTION,
                F.when(F.col(SOURCE_ROW).isNull(), F.lit(COPY)).otherwise(matched_action),
            )
            wanted = ~F.col(ACTION).isin(list(dropped) or [-99])
        else:
            joined = target.join(src, on=on, how="inner").withColumn(ACTION, matched_action)
            wanted = F.col(ACTION).isin(list(keep) or [-99])
        out = joined.filter(wanted).select(*matched_out)
    if inserted is not None:
        out = inserted if out is None else out.unionByName(inserted)
    assert out is not None
    return out
