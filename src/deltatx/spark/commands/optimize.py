"""OPTIMIZE: bin-packing compaction and Z-order clustering, all actions ``dataChange=false``.

Compaction writes each bin as one output file that keeps the order of the source rows (by
file, then row index) and names its sources in its tags (:mod:`.compaction_write`), so a
position in an output file can be traced back to its source file and row: that is what lets a
deletion vector written concurrently on a compacted file be carried over, in either commit
order. Z-order clustering reorders rows and records no such trace.
"""

from __future__ import annotations

import math
import time
from collections import defaultdict
from collections.abc import Sequence

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from deltatx.errors import InvalidArgumentError
from deltatx.kernel.actions import AddFile
from deltatx.kernel.expressions import Expression, columns_of, to_sql
from deltatx.kernel.metrics import OptimizeMetrics
from deltatx.kernel.operations import OperationName
from deltatx.log.transaction import OptimisticTransaction
from deltatx.progress import step
from deltatx.spark.commands.common import (
    check_allowed,
    condition_to_predicate,
    file_metrics,
    read_files,
    record,
)
from deltatx.spark.commands.compaction_write import write_bins
from deltatx.spark.schema import quote_column
from deltatx.spark.write import write_files

_ZVALUE = "__deltatx_z"
# Each Z-order column is bucketed into 2**_Z_BITS ranges before interleaving.
_Z_BITS = 8


def partition_filter(txn: OptimisticTransaction, condition: str | None) -> Expression | None:
    """Parses OPTIMIZE's ``where``, which may only name partition columns.

    Raises:
        InvalidArgumentError: The condition references a data column.
    """
    predicate = condition_to_predicate(condition, schema=txn.schema)
    if predicate is None:
        return None
    parts = {c.lower() for c in txn.partition_columns}
    extra = sorted(columns_of(predicate) - parts)
    if extra:
        raise InvalidArgumentError(
            "OPTIMIZE ... WHERE may only use partition columns "
            f"({', '.join(txn.partition_columns) or 'none'}); '{condition}' uses {', '.join(extra)}"
        )
    return predicate


def _bins(files: Sequence[AddFile], target_size: int, min_files: int) -> list[list[AddFile]]:
    """Groups small files per partition into bins of about ``target_size`` bytes."""
    by_partition: dict[tuple[tuple[str, str | None], ...], list[AddFile]] = defaultdict(list)
    for f in files:
        if f.size < target_size:
            by_partition[tuple(sorted(f.partition_values.items()))].append(f)
    bins: list[list[AddFile]] = []
    for group in by_partition.values():
        group.sort(key=lambda f: f.path)
        current: list[AddFile] = []
        size = 0
        for f in group:
            if current and size + f.size > target_size:
                bins.append(current)
                current, size = [], 0
            current.append(f)
            size += f.size
        if current:
            bins.append(current)
    return [b for b in bins if len(b) >= min_files]


def stage_compaction(
    spark: SparkSession,
    txn: OptimisticTransaction,
    *,
    condition: str | None = None,
    target_size: int | None = None,
    min_files: int = 2,
    operation: OperationName = OperationName.OPTIMIZE,
    files: Sequence[AddFile] | None = None,
) -> OptimizeMetrics:
    """Stages a bin-packing compaction into ``txn`` and returns its metrics.

    ``files`` (used by REORG) replaces the selection of small files with an explicit list,
    each rewritten on its own.
    """
    started = time.monotonic()
    check_allowed(txn, operation, deletes_rows=False)
    predicate = partition_filter(txn, condition)
    step("scanning")
    candidates = txn.scan(predicate)
    target = target_size or txn.properties.target_file_size
    bins = [[f] for f in files] if files is not None else _bins(candidates, target, min_files)
    chosen = [f for b in bins for f in b]
    added: list[AddFile] = []
    if chosen:
        added = write_bins(spark, txn, bins)
    txn.remove_files(chosen, data_change=False)
    txn.add_files(added)
    rows_total, removed_bytes = file_metrics(chosen)
    metrics = OptimizeMetrics(
        num_added_files=len(added),
        num_removed_files=len(chosen),
        num_partitions_optimized=len({tuple(sorted(b[0].partition_values.items())) for b in bins}),
        num_batches=1 if bins else 0,
        total_considered_files=len(candidates),
        total_files_skipped=len(candidates) - len(chosen),
        num_removed_bytes=removed_bytes,
        num_added_bytes=sum(f.size for f in added),
        num_rows=rows_total,
        execution_time_ms=int((time.monotonic() - started) * 1000),
    )
    params = {
        "predicate": [to_sql(predicate)] if predicate is not None else [],
        "zOrderBy": [],
    }
    return record(txn, operation, metrics, params)


def _order_key(df: DataFrame, name: str) -> Column:
    """A double that sorts like the column (strings by their first six characters)."""
    col = F.col(quote_column(name))
    kind = df.schema[name].dataType.typeName()
    if kind == "date":
        return F.datediff(col, F.lit("1970-01-01")).cast("double")
    if kind.startswith("timestamp"):
        return F.unix_micros(col.cast("timestamp")).cast("double")
    if kind in ("string", "binary"):
        prefix = F.rpad(F.substring(col.cast("string"), 1, 6), 6, "\u0000")
        return F.conv(F.hex(prefix), 16, 10).cast("double")
    if kind == "boolean":
        return col.cast("int").cast("double")
    return col.cast("double")


def _with_buckets(
    df: DataFrame, keys: Sequence[str], bounds: Sequence[Sequence[float]], names: Sequence[str]
) -> DataFrame:
    """``df`` with each of ``names``: how many of its sorted ``bounds`` lie below its ``key``.

    A branch-free binary search over the bounds held in one literal array, one projection per
    bit, so a row makes :data:`_Z_BITS` array reads and comparisons per key in generated code.
    A nested ``when`` per bound, its alternative without a UDF, made generated methods too
    large for the JIT to compile: the shuffle stage of a 1M-row ZORDER BY took 3x the CPU.

    NaN pads each array to ``2**_Z_BITS - 1`` bounds: Spark orders NaN above every value, so a
    pad never lies below a key and the search stays monotone. A NULL key compares as NULL,
    which ``when`` takes as false: it falls into bucket 0.
    """
    arrays = []
    for sorted_bounds in bounds:
        padded = [*sorted_bounds, *[math.nan] * (2**_Z_BITS - 1 - len(sorted_bounds))]
        # One literal string, split and cast (constant-folded by Spark): a literal per bound
        # cost a JVM call each. repr() gives back the exact double; Spark reads 'nan' too.
        text = F.lit(",".join(repr(float(b)) for b in padded))
        arrays.append(F.split(text, ",").cast("array<double>"))
    out = df.withColumns({name: F.lit(0) for name in names})
    for bit in reversed(range(_Z_BITS)):
        step = 1 << bit
        # Each step is a projection of its own: Spark keeps them apart (a bucket is read
        # twice), where one expression would repeat the previous steps at every level.
        out = out.withColumns(
            {
                name: F.col(name)
                + F.when(F.get(array, F.col(name) + (step - 1)) < F.col(key), step).otherwise(0)
                for key, array, name in zip(keys, arrays, names, strict=True)
            }
        )
    return out


def _with_z_value(df: DataFrame, columns: Sequence[str]) -> DataFrame:
    """``df`` with :data:`_ZVALUE`: each column's quantile bucket, bits interleaved.

    Buckets come from approximate quantiles computed on Spark, so skewed columns still spread
    over the whole range; a bucket is the count of quantile bounds below the value. Each
    bucket is a column of its own before the interleaving, which reads it once per bit.
    """
    keys = [f"{_ZVALUE}k{i}" for i in range(len(columns))]
    keyed = df.select(
        "*", *[_order_key(df, c).alias(k) for c, k in zip(columns, keys, strict=True)]
    )
    probes = [i / (2**_Z_BITS) for i in range(1, 2**_Z_BITS)]
    quantiles = keyed.select(*keys).approxQuantile(keys, probes, 0.001)
    names = [f"{_ZVALUE}{i}" for i in range(len(columns))]
    distinct = [sorted({b for b in q if b is not None and not math.isnan(b)}) for q in quantiles]
    with_buckets = _with_buckets(keyed, keys, distinct, names)
    z = F.lit(0).cast("long")
    for bit in range(_Z_BITS):
        for position, name in enumerate(names):
            shifted = F.shiftright(F.col(name).cast("long"), bit).bitwiseAND(F.lit(1))
            z = z.bitwiseOR(F.shiftleft(shifted, bit * len(names) + position))
    return with_buckets.select(*[F.col(quote_column(c)) for c in df.columns], z.alias(_ZVALUE))


def stage_z_order(
    spark: SparkSession,
    txn: OptimisticTransaction,
    columns: Sequence[str],
    *,
    condition: str | None = None,
    target_size: int | None = None,
) -> OptimizeMetrics:
    """Stages OPTIMIZE ZORDER BY: rewrites the selected partitions clustered on ``columns``.

    Raises:
        InvalidArgumentError: No column, an unknown column, or a partition column.
    """
    started = time.monotonic()
    check_allowed(txn, OperationName.OPTIMIZE, deletes_rows=False)
    if not columns:
        raise InvalidArgumentError("execute_z_order_by needs at least one column")
    parts = {c.lower() for c in txn.partition_columns}
    resolved = []
    for name in columns:
        field = txn.schema.get(name)
        if field is None:
            raise InvalidArgumentError(
                f"cannot Z-order by '{name}': no such column "
                f"({', '.join(txn.schema.field_names())})"
            )
        if name.lower() in parts:
            raise InvalidArgumentError(f"cannot Z-order by partition column '{name}'")
        resolved.append(field.name)
    if len(resolved) * _Z_BITS > 62:
        raise InvalidArgumentError(f"Z-order by at most {62 // _Z_BITS} columns")
    predicate = partition_filter(txn, condition)
    step("scanning")
    candidates = txn.scan(predicate)
    added: list[AddFile] = []
    if candidates:
        target = target_size or txn.properties.target_file_size
        total_bytes = sum(f.size for f in candidates)
        num_files = max(1, -(-total_bytes // target))
        # Z-order keeps no trace of where rows came from, so the scan needs no row addresses.
        rows = read_files(spark, txn, candidates)
        clustered = (
            _with_z_value(rows, resolved)
            .repartitionByRange(int(num_files), F.col(_ZVALUE))
            .sortWithinPartitions(_ZVALUE)
            .select(*[quote_column(f.name) for f in txn.schema.fields])
        )
        added = write_files(
            clustered,
            table_path=txn.log.table_path,
            partition_columns=txn.partition_columns,
            schema=txn.schema,
            data_change=False,
            column_mapping=txn.configuration.column_mapping_mode,
        )
    txn.remove_files(candidates, data_change=False)
    txn.add_files(added)
    rows_total, removed_bytes = file_metrics(candidates)
    metrics = OptimizeMetrics(
        num_added_files=len(added),
        num_removed_files=len(candidates),
        num_partitions_optimized=len(
            {tuple(sorted(f.partition_values.items())) for f in candidates}
        ),
        num_batches=1 if candidates else 0,
        total_considered_files=len(candidates),
        num_removed_bytes=removed_bytes,
        num_added_bytes=sum(f.size for f in added),
        num_rows=rows_total,
        execution_time_ms=int((time.monotonic() - started) * 1000),
    )
    params = {
        "predicate": [to_sql(predicate)] if predicate is not None else [],
        "zOrderBy": list(resolved),
    }
    return record(txn, OperationName.OPTIMIZE, metrics, params)
