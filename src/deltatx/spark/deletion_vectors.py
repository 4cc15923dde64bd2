"""Deletion vectors on Spark: drop deleted rows from scans, collect the rows a DML matched.

Deletion vectors are metadata (a few bits per deleted row), so the driver decodes them and
ships the deleted (file index, row index) pairs to the executors as a broadcast table of
single long keys that the scan anti-joins on each row's address; no data row ever travels to
the driver.
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

_DV_KEY = "__deltatx_dv_key"
# Row indexes below 2**40 (a trillion rows per file) leave 23 bits for millions of files.
_ROW_BITS = 40


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
    # One long key per deleted row (file index in the high bits): Spark probes a hash of
    # single longs far faster than one of (file, row) pairs.
    keys: list[int] = []
    for index, f in enumerate(files):
        high = index << _ROW_BITS
        keys.extend(high | r for r in reader.rows(f.deletion_vector, data_file=f.path))
    deleted = spark.createDataFrame(pa.table({_DV_KEY: pa.array(keys, pa.int64())}))

    def keep_live(rows: DataFrame, file_index: Column, row_index: Column) -> DataFrame:
        key = F.shiftleft(file_index, _ROW_BITS).bitwiseOR(row_index)
        return (
            rows.withColumn(_DV_KEY, key)
            .join(F.broadcast(deleted), on=_DV_KEY, how="left_anti")
            .drop(_DV_KEY)
        )

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
