"""Writes compaction bins so that each output file's rows trace back to their sources.

Each bin of source files becomes exactly one output file whose rows are the bin's live rows in
order of (file in the bin, physical row index). The output's ``tags`` then name its sources
with their live row counts and the deletion vectors they were read with
(:mod:`deltatx.kernel.row_level.provenance`), which is what lets a deletion vector written
concurrently on a source be carried onto the output, and back (the docs: OPTIMIZE does not
conflict with DML on tables with deletion vectors).

Spark gives no handle on which task writes which rows, so the layout is forced: each bin is
read into one task of its own (coalesced, or hash-partitioned by bin when there are many bins;
a bin never spans two tasks), sorted by (bin, file, row) within each task (the file by the
path Spark reports when there are few bins and no deletion vectors, each bin's files then
listed in that order, see :mod:`.compaction_read`; else by its index), and written with
the bin as the only ``partitionBy`` column, so the writer opens one file per bin and keeps the
sort order (the required ordering is a prefix of ours, so Spark adds no sort of its own). A
single bin, one task already, is written as a plain Parquet rewrite is: no bin column, no
``partitionBy``; without deletion vectors it is not even sorted, but read in the order Spark's
scan plans its files, each file's place checked at its first row as it is written
(:func:`.compaction_read.read_in_scan_order`), and sorted only if that check fails. Files
are then moved from the bin directories (or the staging directory) to the directory of the
bin's first source. An output whose row count does not match the live rows the log counts
for its sources is checked against their footers: if it lacks rows (Spark skipped a file it
could not read), the compaction fails; if the log's counts were wrong, the output gets no
tag, and its races are judged per file, which is coarser but never wrong.
"""

from __future__ import annotations

import functools
import posixpath
import re
import uuid
from collections.abc import Callable, Sequence

import pyarrow.fs as pafs
import pyarrow.parquet as pq
from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from deltatx.errors import InvalidTableError
from deltatx.kernel.actions import AddFile
from deltatx.kernel.column_mapping import physical_schema
from deltatx.kernel.log_paths import STAGING_PREFIX
from deltatx.kernel.row_level.provenance import SOURCES_TAG, encode_sources
from deltatx.kernel.schema import StructType
from deltatx.log.transaction import OptimisticTransaction
from deltatx.spark import arrow_files
from deltatx.spark.arrow_files import spark_reaches
from deltatx.spark.commands.compaction_read import (
    SCAN_ORDER_BROKEN,
    SOURCE_PATH_COLUMN,
    read_in_path_order,
    read_in_scan_order,
)
from deltatx.spark.commands.dv_dml import footer_rows, physical_rows
from deltatx.spark.commands.rewrite import FILE_INDEX_COLUMN, ROW_INDEX_COLUMN, read_addressed
from deltatx.spark.jvm_steps import select_exprs, sort_within_partitions
from deltatx.spark.schema import quote_column, rename_columns
from deltatx.spark.stats import file_stats_json
from deltatx.spark.write import (
    TableLocation,
    decode_uri_path,
    encode_uri_path,
    ensure_micros_timestamps,
)

_BIN = "__deltatx_bin"
_BIN_DIR = re.compile(rf"^{_BIN}=(\d+)$")
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
_TASK_NUMBER = re.compile(r"^part-\d+")
# Bins read one by one and unioned; more would make a plan too large to analyse quickly.
_UNION_LIMIT = 32


def live_rows(
    txn: OptimisticTransaction,
    f: AddFile,
    stored: Callable[[OptimisticTransaction, AddFile], int] = physical_rows,
) -> int:
    """Rows of ``f`` not deleted by its deletion vector, of the ``stored`` rows."""
    deleted = 0 if f.deletion_vector is None else f.deletion_vector.cardinality
    return stored(txn, f) - deleted


def _target_dir(first_source: AddFile) -> str:
    """Where an output goes: beside its bin's first source (its partition directory)."""
    if _SCHEME.match(first_source.path) or first_source.path.startswith("/"):
        return ""
    return posixpath.dirname(decode_uri_path(first_source.path))


def write_bins(
    spark: SparkSession, txn: OptimisticTransaction, bins: Sequence[Sequence[AddFile]]
) -> list[AddFile]:
    """Writes each bin as one output file (none for a bin without live rows).

    Args:
        spark: The session to write with.
        txn: The compaction's transaction (table, schema, partitioning).
        bins: Source files grouped by output; every bin lies within one partition.

    Returns:
        The outputs' ``add`` actions, ``dataChange=false``, tagged with their sources.
    """
    chosen = [f for b in bins for f in b]
    if not chosen:
        return []
    parts = {c.lower() for c in txn.partition_columns}
    data_schema = StructType(tuple(f for f in txn.schema.fields if f.name.lower() not in parts))
    physical = physical_schema(data_schema, txn.configuration.column_mapping_mode)
    location = TableLocation.parse(txn.log.table_path)
    reaches = spark_reaches(spark, location.location)
    ensure_micros_timestamps(spark)
    # One bin is one task already: the write needs no bin column to split it by.
    alone = reaches and len(bins) == 1
    if alone:
        scanned = read_in_scan_order(
            spark,
            location=location,
            files=bins[0],
            physical_data_schema=physical,
            column_mapping=txn.configuration.column_mapping_mode,
            rows_of=functools.partial(physical_rows, txn),
        )
        if scanned is not None:
            rows, ordered = scanned
            try:
                return _write_staged(txn, location, rows, [ordered], physical, by_bin=False)
            except PySparkException as error:
                if SCAN_ORDER_BROKEN not in str(error):
                    raise
    by_bin = [] if alone else [_BIN]
    in_path_order = _bins_in_path_order(spark, txn, location, bins, physical) if reaches else None
    if in_path_order is not None:
        by_path, bins = in_path_order
        ordered_rows = select_exprs(
            spark,
            sort_within_partitions(spark, by_path, [*by_bin, SOURCE_PATH_COLUMN, ROW_INDEX_COLUMN]),
            [*[quote_column(f.name) for f in physical.fields], *by_bin],
        )
    else:
        ordered_rows = (
            _bins_by_task(spark, txn, bins)
            .sortWithinPartitions(*by_bin, FILE_INDEX_COLUMN, ROW_INDEX_COLUMN)
            # Partition values live in the log, not in data files; the bin says where they go.
            .select(*[quote_column(f.name) for f in data_schema.fields], *by_bin)
        )
        if physical is not data_schema:
            ordered_rows = rename_columns(ordered_rows, data_schema, physical)
    if not reaches:
        return _write_bins_with_arrow(txn, location, bins, ordered_rows, data_schema)
    return _write_staged(txn, location, ordered_rows, bins, physical, by_bin=bool(by_bin))


def _write_staged(
    txn: OptimisticTransaction,
    location: TableLocation,
    rows: DataFrame,
    bins: Sequence[Sequence[AddFile]],
    physical: StructType,
    *,
    by_bin: bool,
) -> list[AddFile]:
    """Writes ``rows`` (with :data:`_BIN` if ``by_bin``) to staging, then publishes each bin.

    The staging directory is removed whether the write succeeds or fails.
    """
    staging_rel = f"{STAGING_PREFIX}{uuid.uuid4().hex}"
    staging = location.fs_path(staging_rel)
    try:
        (
            rows.write.mode("error")
            .format("parquet")
            .partitionBy(*([_BIN] if by_bin else []))
            # Never split a bin: a session default for maxRecordsPerFile would.
            .option("maxRecordsPerFile", "0")
            .save(location.spark_path(staging_rel))
        )
        written = _written_by_bin(location.fs, staging, by_bin=by_bin)
        out: list[AddFile] = []
        for index, paths in sorted(written.items()):
            out.extend(_publish_bin(txn, location, index, bins[index], paths, physical))
        return out
    finally:
        if location.fs.get_file_info(staging).type != pafs.FileType.NotFound:
            location.fs.delete_dir(staging)


def _bins_in_path_order(
    spark: SparkSession,
    txn: OptimisticTransaction,
    location: TableLocation,
    bins: Sequence[Sequence[AddFile]],
    physical: StructType,
) -> tuple[DataFrame, list[list[AddFile]]] | None:
    """The bins' rows with their bin, each bin in a task of its own, ordered by source path.

    Returns:
        ``(rows, bins)``: each bin's files in the order its rows come once sorted by
        (:data:`_BIN`, :data:`SOURCE_PATH_COLUMN`, row index); None past
        :data:`_UNION_LIMIT` bins or when a bin cannot be read so
        (:func:`.compaction_read.read_in_path_order`).
    """
    if len(bins) > _UNION_LIMIT:
        return None
    per_bin: list[DataFrame] = []
    reordered: list[list[AddFile]] = []
    for files in bins:
        read = read_in_path_order(
            spark,
            location=location,
            files=files,
            physical_data_schema=physical,
            column_mapping=txn.configuration.column_mapping_mode,
        )
        if read is None:
            return None
        rows, ordered = read
        per_bin.append(rows.coalesce(1))
        reordered.append(ordered)
    if len(per_bin) == 1:
        return per_bin[0], reordered
    per_bin = [rows.withColumn(_BIN, F.lit(i)) for i, rows in enumerate(per_bin)]
    return functools.reduce(DataFrame.union, per_bin), reordered


def _bins_by_task(
    spark: SparkSession, txn: OptimisticTransaction, bins: Sequence[Sequence[AddFile]]
) -> DataFrame:
    """The bins' live rows with their bin, each bin in a task of its own.

    Up to :data:`_UNION_LIMIT` bins, each bin is read on its own and coalesced into one task,
    so the rows never cross a shuffle (the file index then counts within the bin, which
    orders it the same way). Beyond it, one scan of every file is hash-partitioned by bin,
    which keeps the plan small.
    """
    if len(bins) <= _UNION_LIMIT:
        per_bin = [
            read_addressed(spark, txn, b).coalesce(1).withColumn(_BIN, F.lit(i))
            for i, b in enumerate(bins)
        ]
        return functools.reduce(DataFrame.union, per_bin)
    chosen = [f for b in bins for f in b]
    bin_of_file = [i for i, b in enumerate(bins) for _ in b]
    mapping = spark.createDataFrame(
        list(enumerate(bin_of_file)), f"{FILE_INDEX_COLUMN} BIGINT, {_BIN} INT"
    )
    return (
        read_addressed(spark, txn, chosen)
        .join(F.broadcast(mapping), on=FILE_INDEX_COLUMN)
        .repartition(len(bins), F.col(_BIN))
    )


def _written_by_bin(fs: pafs.FileSystem, staging: str, *, by_bin: bool) -> dict[int, list[str]]:
    """The Parquet files written under ``staging``, by bin (all bin 0 unless ``by_bin``)."""
    out: dict[int, list[str]] = {}
    for info in fs.get_file_info(pafs.FileSelector(staging, recursive=by_bin)):
        if info.type != pafs.FileType.File or not info.path.endswith(".parquet"):
            continue
        rel = info.path[len(staging) + 1 :]
        parent, _, name = rel.rpartition("/")
        match = _BIN_DIR.match(parent) if by_bin else None
        if (by_bin and match is None) or name.startswith((".", "_")):
            continue
        out.setdefault(int(match.group(1)) if match else 0, []).append(info.path)
    return out


def _publish_bin(
    txn: OptimisticTransaction,
    location: TableLocation,
    index: int,
    sources: Sequence[AddFile],
    paths: Sequence[str],
    data_schema: StructType,
) -> list[AddFile]:
    fs = location.fs
    target_dir = _target_dir(sources[0])
    if target_dir:
        fs.create_dir(location.fs_path(target_dir), recursive=True)
    published: list[str] = []
    for source in sorted(paths):
        if pq.read_metadata(source, filesystem=fs).num_rows == 0:
            continue
        # Spark numbers files by task, and two bins may share a task (and so a name, once
        # out of their bin directories); number them by bin instead.
        name = _TASK_NUMBER.sub(f"part-{index:05d}", source.rpartition("/")[2], count=1)
        rel = f"{target_dir}/{name}" if target_dir else name
        fs.move(source, location.fs_path(rel))
        published.append(rel)
    return _describe_bin(txn, location, sources, published, data_schema)


def _describe_bin(
    txn: OptimisticTransaction,
    location: TableLocation,
    sources: Sequence[AddFile],
    rels: Sequence[str],
    data_schema: StructType,
) -> list[AddFile]:
    """The ``add`` actions of a bin's published outputs, tagged when they trace back."""
    fs = location.fs
    counts = [(f.path, live_rows(txn, f), f.deletion_vector) for f in sources]
    footers = {rel: pq.read_metadata(location.fs_path(rel), filesystem=fs) for rel in rels}
    written = sum(metadata.num_rows for metadata in footers.values())
    expected = sum(n for _, n, _ in counts)
    if written != expected:
        try:
            _check_rows_kept(txn, sources, written)
        except InvalidTableError:
            for rel in rels:  # no commit will name them
                fs.delete_file(location.fs_path(rel))
            raise
    # A count in the log that was wrong leaves the output untagged: judged per file.
    traced = len(rels) == 1 and written == expected
    out: list[AddFile] = []
    for rel, metadata in footers.items():
        target = location.fs_path(rel)
        info = fs.get_file_info(target)
        out.append(
            AddFile(
                path=encode_uri_path(rel),
                partition_values=dict(sources[0].partition_values),
                size=info.size,
                modification_time=info.mtime_ns // 1_000_000,
                data_change=False,
                stats=file_stats_json(metadata, data_schema),
                tags={SOURCES_TAG: encode_sources(counts)} if traced else None,
            )
        )
    return out


def _check_rows_kept(txn: OptimisticTransaction, sources: Sequence[AddFile], written: int) -> None:
    """Refuses outputs that do not hold every live row of their sources.

    Called when the outputs' rows differ from the sources' count in the log. A count in the
    log may be wrong (another engine's statistics); the sources' own footers are not. Spark
    skips a source it cannot read when ``spark.sql.files.ignoreCorruptFiles`` or
    ``ignoreMissingFiles`` is set, and publishing the outputs would then drop its rows.

    Raises:
        InvalidTableError: A source cannot be read, or the outputs hold another number of
            rows than the sources' footers less their deletion vectors.
    """
    stored = 0
    for f in sources:
        try:
            stored += live_rows(txn, f, footer_rows)
        except (OSError, ValueError) as error:
            raise InvalidTableError(
                f"OPTIMIZE cannot read {f.path} ({error}), so its rows would be left out of the "
                "compacted file; nothing was committed. Spark skips such a file when "
                "spark.sql.files.ignoreCorruptFiles or ignoreMissingFiles is set."
            ) from None
    if stored != written:
        raise InvalidTableError(
            f"OPTIMIZE wrote {written} rows from files that hold {stored} live rows "
            f"({', '.join(f.path for f in sources)}); nothing was committed."
        )


def _write_bins_with_arrow(
    txn: OptimisticTransaction,
    location: TableLocation,
    bins: Sequence[Sequence[AddFile]],
    ordered: DataFrame,
    data_schema: StructType,
) -> list[AddFile]:
    """The bins written by pyarrow in the tasks, where Spark cannot reach the store.

    Each task writes each of its bins as one file, straight into the bin's target directory.
    """
    directories = {i: _target_dir(b[0]) for i, b in enumerate(bins)}
    written = arrow_files.write_files(
        ordered, location.location, group_column=_BIN, group_directories=directories
    )
    by_bin: dict[int, list[str]] = {}
    for rel, group in written:
        by_bin.setdefault(int(group[_BIN] or 0), []).append(rel)
    return [
        add
        for index, rels in sorted(by_bin.items())
        for add in _describe_bin(txn, location, bins[index], rels, data_schema)
    ]
