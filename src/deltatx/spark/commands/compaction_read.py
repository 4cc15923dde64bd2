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
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Sequence

import pyarrow.fs as pafs
from pyspark.sql import DataFrame, SparkSession

from deltatx.kernel.actions import AddFile
from deltatx.kernel.column_mapping import ColumnMappingMode
from deltatx.kernel.schema import StructType
from deltatx.spark.arrow_files import spark_uri
from deltatx.spark.jvm_steps import SEPARATOR, read_parquet, select_exprs
from deltatx.spark.scan import ROW_INDEX_COLUMN, listed_on_driver
from deltatx.spark.schema import quote_column, to_spark_schema
from deltatx.spark.write import TableLocation, uri_path_key
from deltatx.storage.location import Location

SOURCE_PATH_COLUMN = "__deltatx_source_path"
"""The path Spark reports for a row's file; sorts the bin's files in the order returned."""

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
    ordered = None
    directory = _directory_of_exactly(root, canonical)
    if directory is not None:
        # One listing of the directory, instead of a check and a listing of each file.
        scan = read_parquet(spark, reader, [_GLOB_CHARS.sub(r"\\\1", spark_uri(root, directory))])
        ordered = _in_listed_order(spark, scan, files, keys)
    if ordered is None:
        escaped = [_GLOB_CHARS.sub(r"\\\1", p) for p in spark_paths]
        with listed_on_driver(spark, len(spark_paths)):
            scan = read_parquet(spark, reader, escaped)
        ordered = _in_listed_order(spark, scan, files, keys)
    if ordered is None:
        return None
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
