"""Reads compaction bins in the order their outputs keep, without looking each row's file up.

A compaction output holds its bin's live rows ordered by (source file, row index), and its
tags list the sources in that file order (:mod:`.compaction_write`). A bin whose files carry
no deletion vector drops no row, and its partition values come from the log, not from the
rows: the only thing a row needs from its file is a place in that order. The path Spark
reports for the row (``_metadata.file_path``) gives it directly, so the bin is read by Spark's
plain Parquet scan and sorted by (path, row index): no lookup of each row's file index (a
broadcast join and a hash probe per row past a few dozen files, and a Spark job of its own to
broadcast the table).

The files of the bin are then listed in the order Spark sorts their paths. That order is
taken from Spark's own listing of the scan (every file must match the log's path exactly,
under one scheme and authority), never guessed; when it cannot be, the bins are read with
each row's file index (:mod:`.compaction_write`).

A bin written alone (one output, one task, no bin column) needs no sort at all
(:func:`read_in_scan_order`): coalesced into one task, Spark's scan reads whole files in the
order it planned them: packed into the scan's partitions largest first, ties in the order of
its listing, the partitions then read in turn. That order is checked where it can go wrong.
In the scan's own tasks, at the first row of each file (row index 0), the file must be read
whole and be the next file the plan gives its partition, told apart by its size and
modification time as Spark's listing has them; a file out of place fails the write with
:data:`SCAN_ORDER_BROKEN`, and the caller sorts instead. On the driver, Spark's coalescer
must take the partitions in their order. Within a file read whole, Spark's reader gives the
rows in their stored order, one after the other. The plan only makes the order likely.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable, Sequence
from typing import TypeVar

import pyarrow.fs as pafs
from py4j.protocol import Py4JError
from pyspark.sql import DataFrame, SparkSession

from deltatx.kernel.actions import AddFile
from deltatx.kernel.column_mapping import ColumnMappingMode
from deltatx.kernel.schema import StructType
from deltatx.spark.arrow_files import spark_uri
from deltatx.spark.jvm_steps import SEPARATOR, read_parquet, select_exprs
from deltatx.spark.literals import long_array_column
from deltatx.spark.scan import ROW_INDEX_COLUMN, listed_on_driver
from deltatx.spark.schema import quote_column, to_spark_schema
from deltatx.spark.write import TableLocation, uri_path_key
from deltatx.storage.location import Location

SOURCE_PATH_COLUMN = "__deltatx_source_path"
"""The path Spark reports for a row's file; sorts the bin's files in the order returned."""

SCAN_ORDER_BROKEN = "deltatx: a compaction bin was not read in its planned order"
"""The error a bin read by :func:`read_in_scan_order` raises for a file out of place or split."""

# A file's key in the check: its size (a file of 2**40 bytes or more is sorted instead) and the
# low 23 bits of its modification time in ms. The size is the whole of it, so a file whose
# first block matches the key was read from its start to its end. Two files with rows and
# one key cannot be told apart, so their bin is sorted.
_SIZE_BITS = 40
_TIME_BITS = 23
# The check's array of keys, by (partition, file in it), as a column of the scan.
_SLOTS_COLUMN = "__deltatx_planned_keys"
# No file's key: keys are never negative.
_NO_FILE = -1
# Spark's monotonically_increasing_id: the partition index above these bits, a count below.
_PARTITION_SHIFT = 33
# Hadoop's FileStatus.toString (S3A's appends to it): path, length, modification time (ms).
_STATUS = re.compile(
    r"\w+\{path=(.*); isDirectory=false; length=(\d+);.*; modification_time=(\d+);.*", re.DOTALL
)
# Beyond this many files the check's array of keys makes the plan slow to build.
_SCAN_ORDER_FILES = 10_000

_T = TypeVar("_T")

# Hadoop expands these in paths given to a reader; a file name holding one must be escaped.
_GLOB_CHARS = re.compile(r"([\\{}\[\]*?])")
_SCHEME_AND_AUTHORITY = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*:(//[^/]*)?")


def read_in_path_order(
    spark: SparkSession,
    *,
    location: TableLocation,
    files: Sequence[AddFile],
    physical_data_schema: StructType,
    column_mapping: ColumnMappingMode | str,
) -> tuple[DataFrame, list[AddFile]] | None:
    """A bin's rows by Spark's Parquet scan, with the columns that order them, and its files.

    Args:
        spark: The session to read with.
        location: The table's place on storage (Spark reaches it).
        files: The bin's files, none with a deletion vector.
        physical_data_schema: The data columns as stored (physical names), in write order.
        column_mapping: The table's column mapping mode.

    Returns:
        ``(rows, ordered)``: ``rows`` has the data columns, :data:`SOURCE_PATH_COLUMN` and
        :data:`ROW_INDEX_COLUMN`; sorted by those two, its rows come file by file in the
        order of ``ordered``, each file's in row order. None when the order cannot be
        established from Spark's listing, or the table maps columns by field id (the
        reader then needs a setting of its own); the caller reads the bin with file indexes.
    """
    scanned = _bin_scan(
        spark, location, files, physical_data_schema, column_mapping, _in_listed_order
    )
    if scanned is None:
        return None
    scan, ordered = scanned
    rows = select_exprs(
        spark,
        scan,
        [
            *[quote_column(f.name) for f in physical_data_schema.fields],
            f"_metadata.file_path AS {SOURCE_PATH_COLUMN}",
            f"_metadata.row_index AS {ROW_INDEX_COLUMN}",
        ],
    )
    return rows, ordered


def read_in_scan_order(
    spark: SparkSession,
    *,
    location: TableLocation,
    files: Sequence[AddFile],
    physical_data_schema: StructType,
    column_mapping: ColumnMappingMode | str,
    rows_of: Callable[[AddFile], int],
) -> tuple[DataFrame, list[AddFile]] | None:
    """A bin's rows in one task, in the order Spark's scan plans its files, checked file by file.

    Args:
        spark: The session to read with.
        location: The table's place on storage (Spark reaches it).
        files: The bin's files, none with a deletion vector.
        physical_data_schema: The data columns as stored (physical names), in write order.
        column_mapping: The table's column mapping mode.
        rows_of: The number of rows stored in a file.

    Returns:
        ``(rows, ordered)``: ``rows`` is one partition of the data columns, file by file in
        the order of ``ordered``, each file's in row order; evaluating it raises
        :data:`SCAN_ORDER_BROKEN` at the first row of a file read out of that place or in
        pieces. None when two files with rows have the same key, a file would be split or
        holds 2**40 bytes or more, no file holds a row, or the listing cannot be matched to
        the bin (as for :func:`read_in_path_order`).
    """
    if len(files) > _SCAN_ORDER_FILES:
        return None
    scanned = _bin_scan(
        spark, location, files, physical_data_schema, column_mapping, _in_index_order
    )
    if scanned is None:
        return None
    scan, listed = scanned
    planned = _planned_partitions(spark, listed)
    columns = [quote_column(f.name) for f in physical_data_schema.fields]
    if planned is None or not columns or any(size >> _SIZE_BITS for _, size, _ in listed):
        return None
    # A file without rows has no first row: only the others are counted and checked. Each
    # partition's keys take a stride of the longest one's length and one more, a slot no
    # key fills: a partition read with more first rows than planned finds it there.
    counted = [
        [_file_key(size, modified) for add, size, modified in p if rows_of(add)] for p in planned
    ]
    keys = [k for p in counted for k in p]
    if not keys or len(set(keys)) != len(keys):
        return None
    stride = max(len(p) for p in counted) + 1
    slots = [k for p in counted for k in [*p, *[_NO_FILE] * (stride - len(p))]]
    if len(slots) > _SCAN_ORDER_FILES * 2 or not _coalesced_in_turn(spark, scan, len(planned)):
        return None
    # The check runs in the scan's own tasks, before the coalesce, so the write copies each
    # row once, as a plain rewrite does. There the counter is the partition's: its high bits
    # are the partition index, its low bits count the first rows it was evaluated at, so
    # each first row must find its file's key at the slot (partition, files read before in
    # that partition). It only grows, and the keys are distinct: all pass only if each
    # partition reads the plan's files in the plan's order. Counting every row, it would
    # run ahead and fail the write, never pass a wrong order. A file Spark skips leaves the
    # output short of rows, which the write refuses.
    partition = "CAST(spark_partition_id() AS BIGINT)"
    read_slot = (
        f"CAST({partition} * {stride} + least(monotonically_increasing_id() - "
        f"shiftleft({partition}, {_PARTITION_SHIFT}), {stride - 1}) AS INT) + 1"
    )
    # The block's length comes from the task (a function, not the _metadata struct): Spark
    # builds that struct at every row, and each of its fields costs 1% of a rewrite's CPU.
    # A block as long as its planned file is that file read whole.
    key_of_file = (
        f"shiftleft(input_file_block_length(), {_TIME_BITS}) "
        f"| (unix_millis(_metadata.file_modification_time) & {(1 << _TIME_BITS) - 1})"
    )
    planned_key = f"try_element_at({_SLOTS_COLUMN}, {read_slot})"
    # The check rides on the first column, so the write evaluates it for every row.
    checked = (
        f"CASE WHEN _metadata.row_index <> 0 THEN {columns[0]} "
        f"WHEN {planned_key} = {key_of_file} THEN {columns[0]} "
        f"ELSE raise_error('{SCAN_ORDER_BROKEN}') END AS {columns[0]}"
    )
    # One literal block, which the optimizer folds into the check, not a column of each row.
    with_slots = scan.select("*", long_array_column(spark, slots).alias(_SLOTS_COLUMN))
    rows = select_exprs(spark, with_slots, [checked, *columns[1:]])
    return DataFrame(rows._jdf.coalesce(1), spark), [add for p in planned for add, _, _ in p]


def _coalesced_in_turn(spark: SparkSession, scan: DataFrame, partitions: int) -> bool:
    """Whether a coalesce of ``scan`` reads its ``partitions`` partitions in index order.

    Spark's coalescer puts first a partition with a preferred location, then the others in
    order: on a store that locates only some files, the order may differ. Its grouping is a
    function of the scan's partitions and their locations, both fixed by the scan's listing,
    so the write's plan, whose tasks only add the check to the scan's, groups them alike.
    """
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    try:
        leaves = scan._jdf.queryExecution().executedPlan().collectLeaves()
        if leaves.size() != 1:
            return False
        coalesced = leaves.head().inputRDD().coalesce(1, False, jvm.scala.Option.empty(), None)
        (one,) = coalesced.partitions()
        order = str(jvm.java.util.Arrays.toString(one.parentsIndices()))
    except (Py4JError, ValueError):
        return False
    return order == str(list(range(partitions)))


def _file_key(size: int, modified: int) -> int:
    """A file's key in the scan-order check, from its size and modification time (ms).

    The size is kept whole: :func:`read_in_scan_order` sorts a bin with a file too large.
    """
    return size << _TIME_BITS | (modified & ((1 << _TIME_BITS) - 1))


def _bin_scan(
    spark: SparkSession,
    location: TableLocation,
    files: Sequence[AddFile],
    physical_data_schema: StructType,
    column_mapping: ColumnMappingMode | str,
    arrange: Callable[[SparkSession, DataFrame, Sequence[AddFile], Sequence[str]], _T | None],
) -> tuple[DataFrame, _T] | None:
    """Spark's scan of exactly the bin's files, and the files as ``arrange`` orders them.

    The directory is listed whole when it holds exactly the bin, else the files are given one
    by one. None for field-id column mapping, deletion vectors, or when ``arrange`` cannot
    match Spark's listing to the bin.
    """
    if column_mapping == ColumnMappingMode.ID or any(f.deletion_vector for f in files):
        return None
    root = location.location
    # Relative paths must stay inside the root (a crafted log must not read other files).
    canonical = [root.file(f.path, what="data file") for f in files]
    root.refuse_links_out(canonical, what="data file")
    spark_paths = [spark_uri(root, c) for c in canonical]
    reader = (
        spark.read.schema(to_spark_schema(physical_data_schema))
        # A file list needs no directory walk, and no partition discovery either.
        .option("recursiveFileLookup", "true")
    )
    keys = [uri_path_key(p) for p in spark_paths]
    directory = _directory_of_exactly(root, canonical)
    if directory is not None:
        # One listing of the directory, instead of a check and a listing of each file.
        scan = read_parquet(spark, reader, [_GLOB_CHARS.sub(r"\\\1", spark_uri(root, directory))])
        ordered = arrange(spark, scan, files, keys)
        if ordered is not None:
            return scan, ordered
    escaped = [_GLOB_CHARS.sub(r"\\\1", p) for p in spark_paths]
    with listed_on_driver(spark, len(spark_paths)):
        scan = read_parquet(spark, reader, escaped)
    ordered = arrange(spark, scan, files, keys)
    return None if ordered is None else (scan, ordered)


def _spark_lists(name: str) -> bool:
    """Whether Spark's file index lists an entry of this name (``shouldFilterOutPathName``)."""
    hidden = (name.startswith("_") and "=" not in name) or name.startswith(".")
    return not hidden or name.startswith(("_metadata", "_common_metadata"))


def _directory_of_exactly(root: Location, canonical: Sequence[str]) -> str | None:
    """The directory of ``canonical`` when Spark would list in it exactly these files, or None.

    Every entry Spark lists must be one of the files: no other visible file, no visible
    directory (the reader looks recursively). The caller still checks Spark's own listing.
    """
    directory = posixpath.dirname(canonical[0])
    names = {posixpath.basename(c) for c in canonical}
    if len(names) != len(canonical) or any(posixpath.dirname(c) != directory for c in canonical):
        return None
    try:
        entries = root.fs.get_file_info(pafs.FileSelector(root.fs_path(directory)))
    except OSError:
        return None
    listed = [e for e in entries if _spark_lists(e.base_name)]
    if len(listed) != len(names) or any(e.type != pafs.FileType.File for e in listed):
        return None
    return directory if {e.base_name for e in listed} == names else None


def _in_listed_order(
    spark: SparkSession, scan: DataFrame, files: Sequence[AddFile], keys: Sequence[str]
) -> list[AddFile] | None:
    """``files`` in the order Spark sorts the paths it reports for them, or None.

    Spark's listing spells each path as ``_metadata.file_path`` does after the scheme and
    authority (which may be written differently, ``file:/`` or ``file:///``); with one scheme
    and authority for the whole bin, the reported paths sort as their remainders do. Strings
    sort by unsigned UTF-8 bytes in Spark and by code points in Python: the same order.
    """
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    # Joined on the JVM (one call; a Java array in Python is read element by element), by
    # Hadoop's join: Py4J finds no method taking the String[] as an Object[] or a varargs.
    listing = scan._jdf.inputFiles()
    joined = str(jvm.org.apache.hadoop.util.StringUtils.join(SEPARATOR, listing))
    listed = joined.split(SEPARATOR) if joined else []
    prefixes: set[str] = set()
    remainders: list[str] = []
    for path in listed:
        match = _SCHEME_AND_AUTHORITY.match(path)
        if match is None:
            return None
        prefixes.add(match.group(0))
        remainders.append(path[match.end() :])
    by_key = {key: add for key, add in zip(keys, files, strict=True)}
    if len(prefixes) != 1 or len(listed) != len(files) or set(remainders) != set(by_key):
        return None
    return [by_key[key] for key in sorted(remainders)]


def _in_index_order(
    spark: SparkSession, scan: DataFrame, files: Sequence[AddFile], keys: Sequence[str]
) -> list[tuple[AddFile, int, int]] | None:
    """``files`` in the scan's file index order, with the size and modified time it lists.

    The planner starts from that order and those sizes (the time is in milliseconds). The
    public listing (``inputFiles``) goes through a set; the index's own file statuses keep
    the order, and read as one string cost one call instead of an array's element by
    element. A status shows its path decoded (Hadoop's ``Path.toString``), which
    :func:`uri_path_key` encodes as the keys are. None where the plan is not a plain file
    relation, a status cannot be read, or the statuses are not exactly the bin.
    """
    try:
        index = scan._jdf.queryExecution().analyzed().relation().location()
        statuses = str(index.allFiles().mkString(SEPARATOR)).split(SEPARATOR)
    except Py4JError:
        return None
    by_key = {key: add for key, add in zip(keys, files, strict=True)}
    prefixes: set[str] = set()
    out: list[tuple[AddFile, int, int]] = []
    for status in statuses:
        # The path may hold anything; greedy, it ends at the last of Hadoop's fields.
        fields = _STATUS.fullmatch(status)
        scheme = None if fields is None else _SCHEME_AND_AUTHORITY.match(fields.group(1))
        if fields is None or scheme is None:
            return None
        add = by_key.pop(uri_path_key(fields.group(1)), None)
        if add is None:
            return None
        prefixes.add(scheme.group(0))
        out.append((add, int(fields.group(2)), int(fields.group(3))))
    return out if len(prefixes) == 1 and not by_key else None


def _planned_partitions(
    spark: SparkSession, listed: Sequence[tuple[AddFile, int, int]]
) -> list[list[tuple[AddFile, int, int]]] | None:
    """The scan's partitions of ``listed`` (in its index's order), as Spark's planner packs them.

    The planner sorts its splits by length, largest first, keeping the listing's order among
    equals, and fills partitions in that order (next fit, each file counted with the cost of
    opening it). None where a file would be split or a limit on the number of partitions
    may repack them: the read is then sorted. A wrong guess is caught by the check.
    """
    try:
        conf = spark._jsparkSession.sessionState().conf()
        open_cost = int(conf.filesOpenCostInBytes())
        largest = int(conf.filesMaxPartitionBytes())
        least = conf.filesMinPartitionNum()
        partitions = (
            int(least.get()) if least.isDefined() else spark.sparkContext.defaultParallelism
        )
        if conf.filesMaxPartitionNum().isDefined():
            return None
    except Py4JError:
        return None
    total = sum(size + open_cost for _, size, _ in listed)
    split = min(largest, max(open_cost, total // max(partitions, 1)))
    if any(size > split for _, size, _ in listed):
        return None
    packed: list[list[tuple[AddFile, int, int]]] = []
    filled = 0
    for entry in sorted(listed, key=lambda entry: -entry[1]):
        if not packed or filled + entry[1] > split:
            packed.append([])
            filled = 0
        packed[-1].append(entry)
        filled += entry[1] + open_cost
    return packed
