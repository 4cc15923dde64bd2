"""Data files written by pyarrow, with footers every reader may trust.

Readers (Spark's Parquet filters, delta-spark, DuckDB, delta-rs) skip row groups by their
footer min/max. pyarrow leaves NaN out of those bounds, yet Spark orders NaN above every
number: a row group bounded by 3.0 is skipped by ``v > 1e300`` and ``v = 'NaN'``, and its NaN
row is lost. Spark's own writer (parquet-mr) writes NaN as the maximum, which parquet-mr's
reader takes for "no bounds"; a writer that streams batches cannot know ahead whether a NaN
will come, so floating point leaves get no footer statistics at all. The log still gets
their statistics: gathered from the data as it is written (:func:`float_leaf_stats`) and kept
in the footer's key-value metadata, where :func:`deltatx.spark.stats.file_stats_json` reads
them.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from deltatx.spark.stats import (
    FloatLeafStats,
    LeafPath,
    float_leaf_paths,
    float_leaf_stats,
    float_stats_metadata,
)

COMPRESSION = "snappy"
"""The codec of data files, as Spark writes them by default."""

# pyarrow keeps dictionary-encoding a column until its dictionary reaches 1 MB, where Spark's
# writer gives up on a column of mostly distinct values much sooner: on 100,000 rows of
# (unique id, 10-value key, double), the default took 10 ms and 1.19 MB, this limit 5.5 ms and
# 0.81 MB (Spark's own file of the same rows: 0.81 MB).
_DICTIONARY_PAGE_LIMIT = 64 << 10
# A flat column whose first rows are mostly distinct is not dictionary-encoded at all: even
# abandoned at the limit above, the attempt hashes every value of its first pages. On the same
# 100,000 rows: 12.3 ms and 0.81 MB with the limit alone, 8.6 ms and 0.78 MB this way.
_DICTIONARY_SAMPLE_ROWS = 4096
_DICTIONARY_MAX_DISTINCT = 0.5


def dictionary_columns(first: pa.Table) -> bool | list[str]:
    """Which columns to dictionary-encode, judged on the first table a file gets.

    Every column (up to the page limit) when the table is empty or a column is nested;
    otherwise the columns with few distinct values among the first rows.
    """
    if not first.num_rows:
        return True
    if any(pa.types.is_nested(f.type) for f in first.schema):
        return True
    sample = first.slice(0, _DICTIONARY_SAMPLE_ROWS)
    limit = _DICTIONARY_MAX_DISTINCT * sample.num_rows
    try:
        return [
            name
            for name, column in zip(sample.column_names, sample.columns, strict=True)
            if len(column.unique()) <= limit
        ]
    except pa.ArrowNotImplementedError:  # a type pyarrow cannot hash: leave it to the limit
        return True


def footer_statistics_columns(schema: pa.Schema) -> list[str]:
    """The leaves of ``schema`` that get footer statistics, as pyarrow's dotted paths.

    Floating point leaves get none, nor do leaves inside lists and maps (no engine skips rows
    by them). A dotted path can name two leaves (column ``a.b``, field ``b`` of struct ``a``):
    when one of them is a floating point leaf, neither gets statistics.
    """
    trusted: set[str] = set()
    floating: set[str] = set()

    def walk(arrow_type: pa.DataType, path: str) -> None:
        if pa.types.is_struct(arrow_type):
            for child in arrow_type:
                walk(child.type, f"{path}.{child.name}")
        elif pa.types.is_floating(arrow_type):
            floating.add(path)
        elif not pa.types.is_nested(arrow_type):
            trusted.add(path)

    for arrow_field in schema:
        walk(arrow_field.type, arrow_field.name)
    return sorted(trusted - floating)


class DataFileWriter:
    """One Parquet data file being written by pyarrow.

    Tables go in with :meth:`write_table`; :meth:`close` adds the statistics of the floating
    point leaves to the footer and closes the file (not the sink).
    """

    __slots__ = ("_floats", "_writer")

    def __init__(self, sink: Any, schema: pa.Schema, *, first: pa.Table) -> None:
        """Opens the file.

        Args:
            sink: Where the file goes (a path or an output stream).
            schema: The schema of every table written.
            first: The first table the file will get, to choose the columns worth
                dictionary-encoding (:func:`dictionary_columns`).
        """
        self._writer = pq.ParquetWriter(
            sink,
            schema,
            compression=COMPRESSION,
            write_statistics=footer_statistics_columns(schema),
            use_dictionary=dictionary_columns(first),
            dictionary_pagesize_limit=_DICTIONARY_PAGE_LIMIT,
        )
        self._floats: dict[LeafPath, FloatLeafStats] = {
            path: FloatLeafStats() for path in float_leaf_paths(schema)
        }

    def write_table(self, table: pa.Table) -> None:
        """Appends ``table`` (of the file's schema)."""
        if self._floats:
            known = {path for path, stats in self._floats.items() if stats.nan}
            for path, stats in float_leaf_stats(table, nan_known=known).items():
                self._floats[path] = self._floats[path].merged(stats)
        self._writer.write_table(table)

    def close(self) -> pq.FileMetaData:
        """Writes the footer, floating point statistics included, and returns it.

        The footer is the one :func:`pyarrow.parquet.read_metadata` would read back from the
        file, with no read (on an object store, a request) to get it.
        """
        if self._floats:
            self._writer.add_key_value_metadata(float_stats_metadata(self._floats))
        self._writer.close()
        footer: pq.FileMetaData = self._writer.writer.metadata
        return footer


__all__ = ["COMPRESSION", "DataFileWriter", "dictionary_columns", "footer_statistics_columns"]
