"""Parquet files of table data written by pyarrow, readable by every engine as Spark's own.

pyarrow leaves NaN out of a row group's min/max, while Spark orders NaN above every number and
trusts those bounds when it pushes a filter into the Parquet reader: ``v > 1e300`` would skip a
row group whose only match is a NaN. Spark's own writer (parquet-mr) drops the bounds of a
floating-point column that holds a NaN; a writer that streams batches cannot know that ahead,
so floating-point columns get no footer statistics at all. Files are still skipped by the
log's statistics, which account for NaN.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

COMPRESSION = "snappy"
"""The codec of data files, as Spark writes them by default."""


def statistics_columns(schema: pa.Schema) -> list[str]:
    """The leaf columns of ``schema`` whose footer min/max a reader may trust.

    Floating-point leaves are left out (see the module docstring), and so are leaves inside
    lists and maps, whose bounds no engine uses to skip rows.
    """

    def leaves(prefix: str, field: pa.Field) -> Iterator[str]:
        name = f"{prefix}{field.name}"
        if pa.types.is_struct(field.type):
            for child in field.type:
                yield from leaves(f"{name}.", child)
        elif pa.types.is_floating(field.type) or pa.types.is_nested(field.type):
            return
        else:
            yield name

    return [leaf for field in schema for leaf in leaves("", field)]


def open_parquet_writer(sink: Any, schema: pa.Schema) -> pq.ParquetWriter:
    """A writer of one data file into ``sink``: snappy, statistics only where trustworthy."""
    return pq.ParquetWriter(
        sink, schema, compression=COMPRESSION, write_statistics=statistics_columns(schema)
    )


__all__ = ["COMPRESSION", "open_parquet_writer", "statistics_columns"]
