"""A list of ``add`` actions -> one DataFrame of their rows, under the table schema.

Spark's Parquet reader reads exactly the listed files with the data columns as an explicit
schema: no inference, no partition discovery from directory names, and columns a file lacks
(added to the table later) read as NULL. Partition values come from the log: each row finds
its file's index by a binary search of the size Spark reports (``_metadata.file_size``) over
the log's sizes, and its partition values in literal arrays, cast to the schema's types; past
a few thousand files, a small broadcast table keyed by the path Spark reports takes over. One
scan scales to many thousands of files and partitions, where a union per partition would not.
Rows deleted by deletion vectors are dropped inside the reader where the session has
deltatx's reader extension (:mod:`deltatx.spark.reader_extension`), else by the caller's
:class:`RowFilter`.
"""

from __future__ import annotations

import contextlib
import functools
import json
import re
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Protocol

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from deltatx.errors import InvalidArgumentError, UnsupportedFeatureError
from deltatx.kernel.actions import AddFile
from deltatx.kernel.column_mapping import ColumnMappingMode, physical_columns, physical_schema
from deltatx.kernel.schema import StructType
from deltatx.spark import arrow_files
from deltatx.spark.arrow_files import spark_reaches, spark_uri
from deltatx.spark.jvm_steps import load_paths, read_parquet, select_exprs
from deltatx.spark.literals import long_array_column
from deltatx.spark.reader_extension import (
    FORMAT_CLASS,
    VECTORS_OPTION,
    reader_available,
    vector_lines,
)
from deltatx.spark.schema import quote_column, rename_columns, to_spark_schema
from deltatx.spark.write import resolve_partition_columns, uri_path_key
from deltatx.storage.location import Location


class RowFilter(Protocol):
    """Filters scanned rows by where they come from: ``(rows, file_index, row_index) -> kept rows``.

    ``file_index`` and ``row_index`` are SQL expressions over ``rows`` (one DataFrame step in
    SQL is one call to the JVM, where a column built in Python is several): the position of
    the row's file in the ``files`` given to :func:`files_to_dataframe`, and the row's
    position within that file (counting every physical row). This is the hook deletion
    vectors use: drop the rows whose index is in the file's vector. The kept rows may carry
    helper columns of the filter's own (named ``__deltatx_...``): the scan's final projection
    leaves them out, which spares the driver one more analysis of the plan.

    ``index_folds`` says whether ``file_index`` is one expression Spark's optimiser can copy
    into a filter as it is. It is False where the index comes out of a chain of projections
    (the search over more than a few sizes): pushed through them into a filter, the chain
    is copied at every step and the expression doubles with each, so a filter on the index
    is better kept above a join, which Spark does not push it through.
    """

    def __call__(
        self, rows: DataFrame, file_index: str, row_index: str, *, index_folds: bool
    ) -> DataFrame:
        """The rows of ``rows`` to keep."""
        ...


FILE_INDEX_COLUMN = "__deltatx_file_index"
"""With ``with_address``: the position of the row's file in ``files`` (long)."""

ROW_INDEX_COLUMN = "__deltatx_row_index"
"""With ``with_address``: the row's position within its file, counting every row (long)."""

# Spark resolves Parquet columns by field id only when asked to; column mapping's id mode needs
# it, and it changes nothing for files or read schemas without field ids.
_FIELD_ID_READ = "spark.sql.parquet.fieldId.read.enabled"
_FILE_KEY = "__deltatx_file_key"
_FILE_INDEX = FILE_INDEX_COLUMN
_ROW_INDEX = ROW_INDEX_COLUMN
_FILE_SIZE = "__deltatx_file_size"
# Spark's Parquet reader fills a read-schema column of this name with each row's position in
# its file (ParquetFileFormat.ROW_INDEX_TEMPORARY_COLUMN_NAME), even when a file stores a
# column of that name, so a table column of that name cannot be read through Spark.
_READER_ROW_INDEX = "_tmp_metadata_row_index"
# Each row's position in its file, as the Parquet reader counts it. ``_metadata.row_index`` is
# built per row into a metadata struct (boxed, then taken apart), which cost a deletion-vector
# read more than its filter; the reader fills the column above with the same positions, batch
# by batch. A reader that left it unfilled must fail the read, never let every row through as
# live.
_ROW_INDEX_SQL = (
    f"CASE WHEN {_READER_ROW_INDEX} IS NULL THEN "
    "raise_error('deltatx scan: the Parquet reader gave a row no row index') "
    f"ELSE {_READER_ROW_INDEX} END"
)
_SEARCH_POSITION = "__deltatx_search_position"
_SEARCH_SIZES = "__deltatx_search_sizes"
_SEARCH_INDEXES = "__deltatx_search_indexes"
_LONG_MAX = 2**63 - 1
_TIED_INDEX = "__deltatx_tied_index"
# Scheme and authority of a URI, so that the key is the (encoded) path alone.
_URI_PREFIX = r"^[A-Za-z][A-Za-z0-9+.\-]*:(//[^/]*)?"
# Hadoop expands these in paths given to a reader; a file name holding one must be escaped.
_GLOB_CHARS = re.compile(r"([\\{}\[\]*?])")


_LISTING_THRESHOLD = "spark.sql.sources.parallelPartitionDiscovery.threshold"
_listing_lock = threading.Lock()


@contextlib.contextmanager
def listed_on_driver(spark: SparkSession, paths: int) -> Iterator[None]:
    """Lets Spark check ``paths`` local files on the driver while a reader is built.

    Past 32 paths Spark lists them with a distributed job, which on a local table costs more
    than reading a selective query's files (measured: 5.6 s against 0.8 s for 1,460 files).
    The log has already named every file, so there is nothing to discover. The setting is
    session-wide, hence restored at once and changed by one reader at a time.
    """
    with _listing_lock:
        before = spark.conf.get(_LISTING_THRESHOLD, None)
        spark.conf.set(_LISTING_THRESHOLD, str(max(paths, 32) + 1))
        try:
            yield
        finally:
            if before is None:
                spark.conf.unset(_LISTING_THRESHOLD)
            else:
                spark.conf.set(_LISTING_THRESHOLD, before)


def files_to_dataframe(
    spark: SparkSession,
    *,
    table_path: str,
    files: Sequence[AddFile],
    schema: StructType,
    partition_columns: Sequence[str],
    row_filter: RowFilter | None = None,
    with_address: bool = False,
    column_mapping: ColumnMappingMode | str = ColumnMappingMode.NONE,
    vectors_in_reader: bool = False,
) -> DataFrame:
    """The rows of exactly ``files``, as a DataFrame with the columns of ``schema``.

    Args:
        spark: The session to read with.
        table_path: The table root that relative ``add`` paths are resolved against.
        files: The files to read; their partition values come from these actions.
        schema: The table schema; the output has its columns, in its order and types.
        partition_columns: The table's partition columns.
        row_filter: Applied to the rows before the helper columns are dropped, with each
            row's file index and row index (see :data:`RowFilter`); None keeps every row.
        with_address: Whether the output ends with :data:`FILE_INDEX_COLUMN` and
            :data:`ROW_INDEX_COLUMN`, which say where each row is stored (for rewrites and
            deletion vectors).
        column_mapping: The table's column mapping mode; with one, files are read by the
            physical names ``schema`` declares (by Parquet field id in id mode) and the output
            has the logical names.
        vectors_in_reader: Whether ``row_filter`` drops exactly the rows the files' deletion
            vectors delete. Where the session has deltatx's reader extension (see
            :mod:`deltatx.spark.reader_extension`) and no address is asked for, the reader
            then drops them itself and ``row_filter`` is not used.

    Returns:
        A lazy DataFrame; with no files, an empty one with the schema.

    Raises:
        InvalidArgumentError: A file is listed twice.
        InvalidTableError: A relative file path climbs out of the table root.
        SchemaMismatchError: A partition column is not in the schema.
    """
    physical = physical_schema(schema, column_mapping)
    if physical is not schema:
        if column_mapping == ColumnMappingMode.ID:
            spark.conf.set(_FIELD_ID_READ, "true")
        rows = files_to_dataframe(
            spark,
            table_path=table_path,
            files=files,
            schema=physical,
            partition_columns=physical_columns(schema, partition_columns),
            row_filter=row_filter,
            with_address=with_address,
            vectors_in_reader=vectors_in_reader,
        )
        return rename_columns(rows, physical, schema)
    columns = resolve_partition_columns(schema, partition_columns)
    if not files:
        empty = spark.createDataFrame([], to_spark_schema(schema))
        if with_address:
            empty = empty.select(
                "*",
                F.lit(None).cast("long").alias(FILE_INDEX_COLUMN),
                F.lit(None).cast("long").alias(ROW_INDEX_COLUMN),
            )
        return empty
    location = Location.of(table_path)
    partition_set = set(columns)
    data_schema = StructType(tuple(f for f in schema.fields if f.name not in partition_set))
    # Relative paths must stay inside the root (a crafted log must not read other files).
    locations = [location.file(f.path, what="data file") for f in files]
    location.refuse_links_out(locations, what="data file")
    if not spark_reaches(spark, location):
        rows = arrow_files.read_files(spark, location, locations, to_spark_schema(data_schema))
        return _with_partition_values(
            rows, files, schema, columns, row_filter=row_filter, with_address=with_address
        )
    spark_paths = [spark_uri(location, loc) for loc in locations]
    keys = [uri_path_key(p) for p in spark_paths]
    # Keyed by path alone, a file listed twice (even once relative, once absolute) would have
    # its rows joined twice.
    seen: set[str] = set()
    for key, path in zip(keys, spark_paths, strict=True):
        if key in seen:
            raise InvalidArgumentError(f"File '{path}' is listed twice in one scan.")
        seen.add(key)

    reserved = [f.name for f in data_schema.fields if f.name.lower() == _READER_ROW_INDEX]
    if reserved:
        raise UnsupportedFeatureError(
            f"Column '{reserved[0]}' of table {table_path} cannot be read through Spark: its "
            "Parquet reader fills a column of this name with row positions instead of the "
            "stored values. Enable column mapping ('delta.columnMapping.mode' = 'name') and "
            "rename the column.",
            feature="columnName",
        )
    vectors = None
    if (
        vectors_in_reader
        and row_filter is not None
        and not with_address
        and reader_available(spark)
    ):
        vectors = vector_lines(location, files, spark_paths)
        row_filter = None
    needs_row_index = row_filter is not None or with_address
    read_schema = to_spark_schema(data_schema)
    if needs_row_index:
        row_index_field = T.StructField(_READER_ROW_INDEX, T.LongType())
        read_schema = T.StructType([*read_schema.fields, row_index_field])

    def scan(paths: list[str], schema: T.StructType) -> DataFrame:
        with listed_on_driver(spark, len(paths)):
            # Reading a file list needs no directory walk; this also turns off partition
            # discovery, so partition columns never come from directory names.
            reader = spark.read.option("recursiveFileLookup", "true")
            escaped = [_GLOB_CHARS.sub(r"\\\1", p) for p in paths]
            if vectors is None:
                return read_parquet(spark, reader.schema(schema), escaped)
            named = "\n".join(vectors[p] for p in paths)
            reader = reader.format(FORMAT_CLASS).schema(schema).option(VECTORS_OPTION, named)
            return load_paths(spark, reader, escaped)

    if columns and not needs_row_index:
        by_partition = _group_by_partition(files, spark_paths, columns)
        if len(by_partition) <= _UNION_LIMIT:
            return _union_of_partitions(scan, schema, data_schema, columns, by_partition)
    rows = scan(spark_paths, read_schema)
    if not columns and not needs_row_index:
        return rows.select(*[quote_column(f.name) for f in schema.fields])

    file_key = F.regexp_replace(F.col("_metadata.file_path"), _URI_PREFIX, "")
    row_index = _ROW_INDEX_SQL if needs_row_index else None
    searched = _with_file_index(spark, rows, files, keys, file_key, row_index)
    folds = True
    if searched is not None:
        rows, folds = searched
        if columns:
            rows = rows.select("*", *_partition_columns(files, columns, F.col(_FILE_INDEX)))
        # A search by size names the size: naming the path would cost every row a copy of it.
        unknown = (
            "raise_error(concat('deltatx scan: no log entry matches a data file of ', "
            f"CAST({_FILE_SIZE} AS STRING), ' bytes (the files of the table changed outside "
            "its log)'))"
        )
    else:
        lookup = _lookup_table(spark, files, keys, columns)
        expected = [_reported_path(k) for k in keys]
        if len(files) <= _EXACT_LIMIT and not set(expected) & set(keys):
            # A path spelt as expected is looked up as it is: normalising it with a regular
            # expression on every row cost a third of a compaction's task time.
            lookup = lookup.union(_lookup_table(spark, files, expected, columns))
            spelt = F.col("_metadata.file_path")
            file_key = F.when(spelt.isin(expected), spelt).otherwise(file_key)
        located = [file_key.alias(_FILE_KEY)]
        if row_index is not None:
            located.append(F.expr(row_index).alias(_ROW_INDEX))
        rows = rows.select("*", *located)
        rows = rows.join(F.broadcast(lookup), on=_FILE_KEY, how="left")
        unknown = (
            f"raise_error(concat('deltatx scan: no log entry matches data file ', {_FILE_KEY}))"
        )
    # A file the log lookup does not know would otherwise read with NULL partition values;
    # fail loudly instead, on the executor, at no extra cost. The index is named once: a
    # filter on it gets this expression copied into it by the optimiser, and every mention
    # would run the file search again.
    file_index = f"coalesce({_FILE_INDEX}, CAST({unknown} AS BIGINT))"
    if row_filter is not None:
        rows = row_filter(rows, file_index, _ROW_INDEX, index_folds=folds)

    spark_types = {f.name: f.dataType for f in to_spark_schema(schema).fields}
    output: list[str] = []
    for field in schema.fields:
        name = quote_column(field.name)
        if field.name in partition_set:
            value = f"CAST({_partition_alias(columns.index(field.name))} AS "
            value += f"{spark_types[field.name].simpleString()})"
            output.append(
                f"CASE WHEN {_FILE_INDEX} IS NULL THEN {unknown} ELSE {value} END AS {name}"
            )
        else:
            output.append(name)
    if with_address:
        output += [f"{file_index} AS {FILE_INDEX_COLUMN}", f"{_ROW_INDEX} AS {ROW_INDEX_COLUMN}"]
    return select_exprs(spark, rows, output)


def _with_partition_values(
    rows: DataFrame,
    files: Sequence[AddFile],
    schema: StructType,
    columns: Sequence[str],
    *,
    row_filter: RowFilter | None,
    with_address: bool,
) -> DataFrame:
    """Rows that already carry their file index and row index, given their partition values."""
    file_index = F.col(arrow_files.FILE_INDEX)
    row_index = F.col(arrow_files.ROW_INDEX)
    if row_filter is not None:
        rows = row_filter(rows, arrow_files.FILE_INDEX, arrow_files.ROW_INDEX, index_folds=True)
    spark_types = {f.name: f.dataType for f in to_spark_schema(schema).fields}
    values = dict(zip(columns, _partition_columns(files, columns, file_index), strict=True))
    output: list[Column] = []
    for field in schema.fields:
        if field.name in columns:
            output.append(values[field.name].cast(spark_types[field.name]).alias(field.name))
        else:
            output.append(F.col(quote_column(field.name)))
    if with_address:
        output += [file_index.alias(FILE_INDEX_COLUMN), row_index.alias(ROW_INDEX_COLUMN)]
    return rows.select(*output)


# Up to this many partitions, a plain read is a union of one scan per partition with the values
# as literals, which Spark's optimiser prunes when a query filters on partition columns; past
# it, the plan would grow too large and the broadcast join below takes over.
_UNION_LIMIT = 64


def _group_by_partition(
    files: Sequence[AddFile], spark_paths: Sequence[str], columns: Sequence[str]
) -> dict[tuple[str | None, ...], list[str]]:
    groups: dict[tuple[str | None, ...], list[str]] = {}
    for add, path in zip(files, spark_paths, strict=True):
        groups.setdefault(tuple(_partition_values(add, columns)), []).append(path)
    return groups


def _union_of_partitions(
    scan: Callable[[list[str], T.StructType], DataFrame],
    schema: StructType,
    data_schema: StructType,
    columns: Sequence[str],
    groups: dict[tuple[str | None, ...], list[str]],
) -> DataFrame:
    spark_types = {f.name: f.dataType for f in to_spark_schema(schema).fields}
    parts: list[DataFrame] = []
    for values, paths in groups.items():
        parts.append(
            scan(paths, to_spark_schema(data_schema)).select(
                *[
                    F.lit(values[columns.index(f.name)]).cast(spark_types[f.name]).alias(f.name)
                    if f.name in columns
                    else F.col(quote_column(f.name))
                    for f in schema.fields
                ]
            )
        )
    return functools.reduce(DataFrame.union, parts)


# Up to this many files, each row's file index is found by a binary search over the file sizes
# and its partition values in literal arrays (constant-folded into the plan) rather than by a
# broadcast join on its path, which hashes a string per row: on 1M rows in 100 files with
# deletion vectors, the join made the read cost several times the scan. The arrays travel
# with every task, so past this many files the join takes over.
_SEARCH_LIMIT = 4096
# Up to this many sizes, the search's comparisons are inlined in the generated code, which beats
# reading the sizes from an array; with many more, the nested branches grow too large for the
# JIT to compile. Measured on 4M rows with deletion vectors, JVM CPU per read: 16 files 0.95 s
# inlined against 1.10 s from the array, 64 files 2.82 s against 1.67 s.
_INLINE_SEARCH_LIMIT = 16
# Files sharing a size are told apart by path in a literal map, which Spark searches key by
# key: past this many such files, the join is cheaper.
_TIES_LIMIT = 64
# Up to this many files, the join looks paths spelt as expected up as they are; the set of
# spellings travels with every task, so past it each row's path is normalised instead.
_EXACT_LIMIT = 4096


def _partition_values(add: AddFile, columns: Sequence[str]) -> list[str | None]:
    lowered = {k.lower(): v for k, v in add.partition_values.items()}
    # The protocol spells a NULL partition value as null or as "".
    return [lowered.get(c.lower()) or None for c in columns]


def _with_file_index(
    spark: SparkSession,
    rows: DataFrame,
    files: Sequence[AddFile],
    keys: Sequence[str],
    file_key: Column,
    row_index: str | None,
) -> tuple[DataFrame, bool] | None:
    """``rows`` with :data:`_FILE_SIZE`, each row's :data:`_FILE_INDEX`, and ``row_index``.

    ``row_index``, SQL for each row's position in its file, becomes :data:`_ROW_INDEX`. The
    flag returned says whether the index is one projection's expression (see
    :class:`RowFilter`'s ``index_folds``).

    The index comes from a branch-free binary search of the row's ``_metadata.file_size``
    over the files' sorted sizes in one literal array: one projection per bit, each an array
    read and a comparison in generated code, so the plan grows with the logarithm of the
    file count (a nested ``CASE`` per size made methods too large for the JIT to compile).
    Files that share a size are told apart by path (:data:`_TIED_INDEX`). A file whose size
    is not the log's gets no index, and the scan fails on it as on any file the log does not
    know.

    Returns:
        None past :data:`_SEARCH_LIMIT` files or :data:`_TIES_LIMIT` files sharing a size: the
        caller joins on paths instead.
    """
    groups: dict[int, list[int]] = {}
    for i, add in enumerate(files):
        groups.setdefault(add.size, []).append(i)
    ties = [i for group in groups.values() if len(group) > 1 for i in group]
    if len(files) > _SEARCH_LIMIT or len(ties) > _TIES_LIMIT:
        return None
    sizes = sorted(groups)
    # Only the size: every metadata field named is boxed into a struct for every row.
    located = [f"`_metadata`.`file_size` AS {_FILE_SIZE}"]
    if row_index is not None:
        located.append(f"{row_index} AS {_ROW_INDEX}")
    if len(sizes) <= _INLINE_SEARCH_LIMIT and not ties:
        # One projection: each DataFrame step re-analyses the plan on the driver, which cost
        # more than reading a small table's deletion vectors.
        search = _inline_search(sizes, groups, size="`_metadata`.`file_size`")
        return select_exprs(spark, rows, ["*", *located, f"{search} AS {_FILE_INDEX}"]), True
    out = select_exprs(spark, rows, ["*", *located])
    if ties:
        out = out.withColumn(_TIED_INDEX, _index_by_path(ties, keys, file_key))
    if len(sizes) <= _INLINE_SEARCH_LIMIT:
        return out.withColumn(_FILE_INDEX, F.expr(_inline_search(sizes, groups))), False
    bits = len(sizes).bit_length()
    # Padding above every size keeps the search monotone; a size past them all finds the pad
    # (or nothing, when there is none), which no file matches.
    padded = [*sizes, *[_LONG_MAX] * (2**bits - 1 - len(sizes))]
    by_position = [groups[size][0] if len(groups[size]) == 1 else -1 for size in sizes]
    out = out.select(
        "*",
        long_array_column(spark, padded).alias(_SEARCH_SIZES),
        long_array_column(spark, by_position).alias(_SEARCH_INDEXES),
    )
    position = "0"
    for bit in reversed(range(bits)):
        step = 1 << bit
        # A projection per step: Spark keeps them apart, where one expression would repeat
        # the previous steps at every level.
        below = f"get({_SEARCH_SIZES}, CAST({position} + {step - 1} AS INT)) < {_FILE_SIZE}"
        name = f"{_SEARCH_POSITION}_{bit}"
        step_sql = f"{position} + CASE WHEN {below} THEN {step} ELSE 0 END AS {name}"
        out = select_exprs(spark, out, ["*", step_sql])
        position = name
    found = f"get({_SEARCH_INDEXES}, CAST({position} AS INT))"
    index = f"CASE WHEN {found} >= 0 THEN {found} ELSE {_TIED_INDEX} END" if ties else found
    matched = f"get({_SEARCH_SIZES}, CAST({position} AS INT)) = {_FILE_SIZE}"
    indexed = f"CASE WHEN {matched} THEN {index} END AS {_FILE_INDEX}"
    return select_exprs(spark, out, ["*", indexed]), False


def _inline_search(
    sizes: Sequence[int], groups: dict[int, list[int]], *, size: str = _FILE_SIZE
) -> str:
    """SQL for a row's file index: the binary search of ``size`` with the sizes inlined.

    Each comparison is a nested ``CASE`` branch; files sharing a size take
    :data:`_TIED_INDEX`.
    """

    def search(lo: int, hi: int) -> str:
        if hi - lo == 1:
            same = groups[sizes[lo]]
            found = str(same[0]) if len(same) == 1 else _TIED_INDEX
            return f"CASE WHEN {size} = {sizes[lo]} THEN {found} END"
        mid = (lo + hi) // 2
        return f"CASE WHEN {size} < {sizes[mid]} THEN {search(lo, mid)} ELSE {search(mid, hi)} END"

    return f"CAST({search(0, len(sizes))} AS BIGINT)"


def _partition_columns(
    files: Sequence[AddFile], columns: Sequence[str], file_index: Column
) -> list[Column]:
    """Each partition column's value (a string) for the row's file, from a literal array.

    The array is one JSON literal, constant-folded by Spark: a literal per file cost a call to
    the JVM each.
    """
    by_file = [_partition_values(add, columns) for add in files]
    out = []
    for i in range(len(columns)):
        values = F.from_json(F.lit(json.dumps([v[i] for v in by_file])), "array<string>")
        position = (file_index + 1).cast("int")
        out.append(F.try_element_at(values, position).alias(_partition_alias(i)))
    return out


def _index_by_path(indexes: Sequence[int], keys: Sequence[str], file_key: Column) -> Column:
    """The index of a row's file among ``indexes``, by path.

    The path Spark is expected to report is tried first; only a row whose path is spelt
    otherwise pays for normalising it (``file_key``), which costs as much as decoding the data.
    """

    def lookup(names: Sequence[str], key: Column) -> Column:
        pairs = [x for i, name in zip(indexes, names, strict=True) for x in (F.lit(name), F.lit(i))]
        return F.try_element_at(F.create_map(*pairs).cast("map<string,bigint>"), key)

    reported = [_reported_path(keys[i]) for i in indexes]
    named = [keys[i] for i in indexes]
    return F.coalesce(lookup(reported, F.col("_metadata.file_path")), lookup(named, file_key))


def _reported_path(key: str) -> str:
    """The ``_metadata.file_path`` Spark reports for a local file: ``file:`` + encoded path."""
    return f"file:{key}"


def _partition_alias(position: int) -> str:
    return f"__deltatx_part_{position}"


def _lookup_table(
    spark: SparkSession,
    files: Sequence[AddFile],
    keys: Sequence[str],
    columns: Sequence[str],
) -> DataFrame:
    """The broadcast side: file key, file index and each partition value as a string."""
    fields = [
        T.StructField(_FILE_KEY, T.StringType(), False),
        T.StructField(_FILE_INDEX, T.LongType(), False),
        *(T.StructField(_partition_alias(i), T.StringType(), True) for i in range(len(columns))),
    ]
    data: list[tuple[str | int | None, ...]] = []
    for index, (add, key) in enumerate(zip(files, keys, strict=True)):
        data.append((key, index, *_partition_values(add, columns)))
    return spark.createDataFrame(data, T.StructType(fields))
