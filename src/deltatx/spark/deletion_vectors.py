"""Deletion vectors on Spark: collect the rows a DML matched as deletion-vector entries.

Scans drop deleted rows with :mod:`deltatx.spark.dv_filter`; here only the addresses of the
rows a statement changes (two longs per row, never a data row) travel to the driver.
"""

from __future__ import annotations

from collections import defaultdict

from pyspark.sql import DataFrame

from deltatx.spark.scan import FILE_INDEX_COLUMN, ROW_INDEX_COLUMN


def collect_addresses(rows: DataFrame) -> dict[int, list[int]]:
    """File index -> row indexes of the addressed rows in ``rows`` (only two longs per row).

    ``rows`` must carry :data:`FILE_INDEX_COLUMN` and :data:`ROW_INDEX_COLUMN`; it is meant
    for the rows a DELETE, UPDATE or MERGE matched, which become deletion vector entries.
    """
    table = rows.select(FILE_INDEX_COLUMN, ROW_INDEX_COLUMN).toArrow()
    out: dict[int, list[int]] = defaultdict(list)
    files = table.column(FILE_INDEX_COLUMN).to_pylist()
    positions = table.column(ROW_INDEX_COLUMN).to_pylist()
    for f, r in zip(files, positions, strict=True):
        out[int(f)].append(int(r))
    return dict(out)
