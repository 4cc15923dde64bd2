"""Deletion vectors on Spark: drop deleted rows from scans, collect the rows a DML matched.

Deletion vectors are metadata (a few bits per deleted row), so the driver decodes them and
ships the deleted (file index, row index) pairs to the executors as a broadcast table that the
scan anti-joins on each row's address; no data row ever travels to the driver.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from deltatx.kernel.actions import AddFile
from deltatx.log.deletion_vectors import DvReader
from deltatx.log.delta_log import DeltaLog
from deltatx.spark.scan import FILE_INDEX_COLUMN, ROW_INDEX_COLUMN, RowFilter

_DV_FILE = "__deltatx_dv_file"
_DV_ROW = "__deltatx_dv_row"


def deleted_rows_filter(
    spark: SparkSession, log: DeltaLog, files: Sequence[AddFile]
) -> RowFilter | None:
    """The scan filter that drops every row deleted by the files' deletion vectors.

    Returns:
        None when no file has a deletion vector (the scan then needs no row index).

    Raises:
        InvalidTableError: A deletion vector is missing or corrupt.
    """
    if not any(f.deletion_vector is not None for f in files):
        return None
    reader = DvReader(log)
    file_col: list[int] = []
    row_col: list[int] = []
    for index, f in enumerate(files):
        rows = reader.rows(f.deletion_vector, data_file=f.path)
        file_col.extend([index] * len(rows))
        row_col.extend(rows)
    table = pa.table(
        {_DV_FILE: pa.array(file_col, pa.int64()), _DV_ROW: pa.array(row_col, pa.int64())}
    )
    deleted = spark.createDataFrame(table)

    def keep_live(rows: DataFrame, file_index: Column, row_index: Column) -> DataFrame:
        cond = (file_index == F.col(_DV_FILE)) & (row_index == F.col(_DV_ROW))
        return rows.join(F.broadcast(deleted), on=cond, how="left_anti")

    return keep_live


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
