"""MERGE INTO: the full clause set, evaluated in order, copy-on-write on the touched files.

The ON condition's target-only conjuncts (``t.date = '2024-01-01'``) prune the target files and
are the recorded read predicate, so the docs's advice (put the partition in the condition)
really keeps concurrent merges on different partitions apart.

Plan: the candidate target files (with each row's file and row index) are outer-joined with the
source; every joined row gets the index of the first clause that applies to it. One
aggregation finds ambiguous matches, the touched files and the counts; the write then emits
the rows of the touched files (updated, deleted or copied) plus the inserted rows.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

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
    to_sql,
)
from deltatx.kernel.expressions import Column as KernelColumn
from deltatx.kernel.metrics import MergeMetrics
from deltatx.kernel.operations import OperationName
from deltatx.kernel.schema import StructField, StructType
from deltatx.log.transaction import OptimisticTransaction
from deltatx.progress import step
from deltatx.spark.commands.common import (
    check_allowed,
    condition_column,
    file_metrics,
    record,
    to_delta_schema,
    to_spark_schema,
    write_data,
)
from deltatx.spark.commands.dv_dml import mark_deleted, record_row_level
from deltatx.spark.commands.rewrite import (
    FILE_INDEX_COLUMN,
    ROW_INDEX_COLUMN,
    read_addressed,
    replaced_vectors,
    without_address,
)
from deltatx.spark.deletion_vectors import collect_addresses
from deltatx.spark.expressions import merge_key_pairs, merge_target_predicate
from deltatx.spark.schema import quote_column

_ACTION = "__deltatx_action"
_IN_TARGET = "__deltatx_in_target"
_IN_SOURCE = "__deltatx_in_source"
_SOURCE_ROW = "__deltatx_source_row"
_COPY = -1
_DROP = -2
_AMBIGUOUS = (
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
    if not any(c.kind.group == "by_source" for c in clauses):
        return _stage_source_driven(
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
        *[F.col(quote_column(c)).alias(_src_name(i)) for i, c in enumerate(source.columns)],
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
        classified = joined.withColumn(_ACTION, _action_column(clauses))
        out_columns = _output_columns(schema, clauses, source.columns, t_alias)
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
                raise InvalidArgumentError(_AMBIGUOUS)
        counts = classified.groupBy(FILE_INDEX_COLUMN, _ACTION).count().collect()
        touched: set[int] = set()
        per_action: dict[int, int] = {}
        for r in counts:
            action = int(r[_ACTION])
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
                classified.filter(F.col(_IN_TARGET).isNotNull() & (F.col(_ACTION) >= 0)).select(
                    FILE_INDEX_COLUMN, ROW_INDEX_COLUMN
                )
            )
            keep = F.col(_ACTION).isin(sorted(inserts | updates) or [-99])
        else:
            keep = (
                F.col(FILE_INDEX_COLUMN).isin(sorted(touched)) if touched else F.lit(False)
            ) | F.col(_ACTION).isin(sorted(inserts) or [-99])
        result = classified.filter(keep & ~F.col(_ACTION).isin(sorted(deletes) or [-99]))
        result = result.filter(F.col(_ACTION) != _DROP).select(*out_columns)
        added = []
        if touched or any(per_action.get(i, 0) for i in inserts):
            added = write_data(txn, result)
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
    return record(txn, OperationName.MERGE, metrics, _parameters(condition, predicate, clauses))


def _parameters(
    condition: str | Column, predicate: Expression, clauses: Sequence[MergeClause]
) -> dict[str, Any]:
    return {
        "predicate": str(condition) if isinstance(condition, str) else "<Column>",
        "targetPredicate": to_sql(predicate),
        "matchedPredicates": [_describe(c) for c in clauses if c.kind.group == "matched"],
        "notMatchedPredicates": [_describe(c) for c in clauses if c.kind.group == "not_matched"],
        "notMatchedBySourcePredicates": [
            _describe(c) for c in clauses if c.kind.group == "by_source"
        ],
    }


def _stage_source_driven(
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
        *[F.col(quote_column(c)).alias(_src_name(i)) for i, c in enumerate(source.columns)],
        F.monotonically_increasing_id().alias(_SOURCE_ROW),
    )
    on = condition_column(condition)
    matched_action = _first_applying(clauses, "matched", default=_COPY)
    matched_out = _output_columns(schema, clauses, source.columns, target_alias, only=updates)
    insert_out = _output_columns(schema, clauses, source.columns, None, only=inserts)
    insert_action = _first_applying(clauses, "not_matched", default=_DROP)
    try:
        # Analysed on no files: a bad condition fails before any Spark job runs.
        empty = read_addressed(spark, txn, []).alias(target_alias)
        _ = empty.join(src, on=on).withColumn(_ACTION, matched_action).select(*matched_out).schema
        _ = src.withColumn(_ACTION, insert_action).select(*insert_out).schema
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
        read = predicate
        for i, (name, _) in enumerate(keys):
            lo, hi = summary[f"lo{i}"], summary[f"hi{i}"]
            if lo is not None and hi is not None:
                read = and_(
                    read,
                    Comparison(ComparisonOp.GE, KernelColumn(name), Literal(lo)),
                    Comparison(ComparisonOp.LE, KernelColumn(name), Literal(hi)),
                )
        candidates = txn.scan(None if read == TRUE else read)
        target = read_addressed(spark, txn, candidates).alias(target_alias)
        matched = target.join(src, on=on, how="inner").withColumn(_ACTION, matched_action)
        matched = matched.persist(StorageLevel.MEMORY_AND_DISK)
        cached.append(matched)
        counts = _merge_counts(matched)
        if matched_clauses and not lone_delete and any(r["most"] > 1 for r in counts):
            raise InvalidArgumentError(_AMBIGUOUS)
        per_action: dict[int, int] = {}
        touched: set[int] = set()
        for r in counts:
            action = int(r[_ACTION])
            per_action[action] = per_action.get(action, 0) + int(r["rows"])
            if action >= 0:
                touched.add(int(r[FILE_INDEX_COLUMN]))
        changed_rows = matched.filter(F.col(_ACTION) >= 0).select(
            FILE_INDEX_COLUMN, ROW_INDEX_COLUMN
        )
        changed: dict[int, list[int]] = {}
        if use_dvs and touched:
            changed = collect_addresses(changed_rows.distinct() if lone_delete else changed_rows)
        unmatched = (
            src.join(matched.select(_SOURCE_ROW), on=_SOURCE_ROW, how="left_anti")
            .withColumn(_ACTION, insert_action)
            .filter(F.col(_ACTION) != _DROP)
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
                matched.filter(F.col(_ACTION).isin(sorted(updates) or [-99])).select(*matched_out),
                unmatched.select(*insert_out) if unmatched is not None else None,
                copy_from=copy_from,
                changed=changed_rows,
            )
            added = write_data(txn, rewritten)
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
        record_row_level(txn, candidates, changed, predicate=read, condition=condition)
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
    return record(txn, OperationName.MERGE, metrics, _parameters(condition, predicate, clauses))


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
        F.count(F.lit(1)).alias("n"), F.max(_ACTION).alias(_ACTION)
    )
    return (
        per_row.groupBy(FILE_INDEX_COLUMN, _ACTION)
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


def _first_applying(clauses: Sequence[MergeClause], group: str, *, default: int) -> Column:
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


def _copied_rows(counts: list[Row], touched: set[int]) -> int:
    return sum(
        int(r["count"])
        for r in counts
        if int(r[_ACTION]) == _COPY
        and r[FILE_INDEX_COLUMN] is not None
        and int(r[FILE_INDEX_COLUMN]) in touched
    )


def _src_name(i: int) -> str:
    return f"__deltatx_src_{i}"


def _describe(clause: MergeClause) -> dict[str, str]:
    out = {"actionType": clause.kind.value.rsplit("_", 1)[-1]}
    if clause.condition is not None:
        out["predicate"] = str(clause.condition)
    return out


def _action_column(clauses: Sequence[MergeClause]) -> Column:
    """The index of the first clause that applies to each joined row (or copy / drop)."""
    in_t = F.col(_IN_TARGET).isNotNull()
    in_s = F.col(_IN_SOURCE).isNotNull()
    situations = {
        "matched": in_t & in_s,
        "not_matched": ~in_t & in_s,
        "by_source": in_t & ~in_s,
    }
    expr = F.when(in_t, F.lit(_COPY)).otherwise(F.lit(_DROP))
    for i in reversed(range(len(clauses))):
        c = clauses[i]
        applies = situations[c.kind.group]
        if c.condition is not None:
            applies = applies & F.coalesce(condition_column(c.condition), F.lit(False))
        expr = F.when(applies, F.lit(i)).otherwise(expr)
    return expr


def _output_columns(
    schema: StructType,
    clauses: Sequence[MergeClause],
    source_columns: Sequence[str],
    target_alias: str | None,
    *,
    only: Collection[int] | None = None,
) -> list[Column]:
    """The table's columns as the clauses set them (by ``_ACTION``).

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
            cond = F.col(_ACTION) == i
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
        return F.col(_src_name(pos))
    for name, value in clause.assignments.items():
        if name.lower() == column.lower():
            return value if isinstance(value, Column) else F.expr(value)
    return F.lit(None) if is_insert else None


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
