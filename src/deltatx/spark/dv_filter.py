"""Deletion vectors applied where the rows are: each task reads its own file's vector.

The driver ships one small descriptor per file (where the vector is stored, how large it
is), never the deleted row ids, so what a task carries grows with the number of files it
reads and not with the number of deleted rows. A Python worker loads a vector the first time
it meets the file and keeps it for the next batches and tasks it runs.

Two users: the ``format("delta")`` reader masks the Arrow batches it reads, and
:func:`live_rows_filter` gives ``DeltaTable.to_df`` a filter that keeps Spark's native Parquet
scan: an anti join of each row's (file index, row index) against the deleted positions, which
travel as one broadcast per executor rather than in every task, with no Python on the rows'
path. Past :data:`BROADCAST_LIMIT` deleted rows, a vectorised Python filter that loads each
file's vector in the task takes over.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence

import numpy as np
import pyarrow as pa
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from deltatx.kernel.actions import AddFile, DeletionVectorDescriptor
from deltatx.log.deletion_vectors import DvReader
from deltatx.log.delta_log import DeltaLog
from deltatx.spark.scan import RowFilter

# Vectors kept per worker process; a vector is a sorted int64 array (8 bytes per deleted row).
_CACHE_ENTRIES = 256
_cache: OrderedDict[tuple[str, DeletionVectorDescriptor], np.ndarray] = OrderedDict()
_readers: dict[str, DvReader] = {}
_lock = threading.Lock()


def deleted_row_indexes(
    table_path: str, dv: DeletionVectorDescriptor, *, data_file: str = ""
) -> np.ndarray:
    """The sorted deleted row indexes of ``dv``, read once per worker process.

    Raises:
        InvalidTableError: The vector is missing or corrupt (the message names the file).
    """
    key = (table_path, dv)
    with _lock:
        hit = _cache.get(key)
        if hit is not None:
            _cache.move_to_end(key)
            return hit
        reader = _readers.get(table_path)
        if reader is None:
            reader = _readers[table_path] = DvReader(DeltaLog.for_table(table_path))
    rows = np.asarray(reader.rows(dv, data_file=data_file), dtype=np.int64)
    with _lock:
        _cache[key] = rows
        while len(_cache) > _CACHE_ENTRIES:
            _cache.popitem(last=False)
    return rows


def live_mask(deleted: np.ndarray, row_indexes: np.ndarray) -> np.ndarray:
    """True where a row index is not in ``deleted`` (sorted)."""
    if not len(deleted):
        return np.ones(len(row_indexes), dtype=bool)
    at = np.searchsorted(deleted, row_indexes)
    at[at == len(deleted)] = 0
    live: np.ndarray = deleted[at] != row_indexes
    return live


BROADCAST_LIMIT = 20_000_000
"""Most deleted rows one scan drops by a broadcast anti join (16 bytes each, per executor)."""

_DV_FILE = "__deltatx_dv_file"
_DV_ROW = "__deltatx_dv_row"
_DV_KEY = "__deltatx_dv_key"
# A row's (file index, row index) packed into one long, so that the broadcast side is Spark's
# long-keyed hash relation (measured: a third less JVM CPU than the two-column key on 2M rows).
# Row indexes below 2**40 and file indexes below 2**23 keep the packing exact; a scan of more
# files joins on both columns.
_ROW_BITS = 40
_MAX_PACKED_FILES = 1 << (63 - _ROW_BITS)


def live_rows_filter(log: DeltaLog, files: Sequence[AddFile]) -> RowFilter | None:
    """The scan filter that drops rows deleted by the files' deletion vectors.

    Rows keep coming from Spark's Parquet scan. Up to :data:`BROADCAST_LIMIT` deleted rows,
    the driver reads the vectors and the rows are anti-joined with a broadcast of the deleted
    (file index, row index) pairs: the task itself carries nothing that grows with them.
    Beyond it, a vectorised Python UDF sees each row's file index and row index and loads
    each file's vector in the worker from the descriptor its closure holds.

    Returns:
        None when no file has a deletion vector (the scan then needs no row index).
    """
    descriptors = [f.deletion_vector for f in files]
    if all(dv is None for dv in descriptors):
        return None
    if sum(dv.cardinality for dv in descriptors if dv is not None) <= BROADCAST_LIMIT:
        return _anti_join_filter(log, files)
    return _udf_filter(log, files)


def _anti_join_filter(log: DeltaLog, files: Sequence[AddFile]) -> RowFilter:
    table_path = log.table_path

    def keep_live(rows: DataFrame, file_index: Column, row_index: Column) -> DataFrame:
        indexes: list[np.ndarray] = []
        positions: list[np.ndarray] = []
        for index, add in enumerate(files):
            if add.deletion_vector is None:
                continue
            deleted = deleted_row_indexes(table_path, add.deletion_vector, data_file=add.path)
            indexes.append(np.full(len(deleted), index, dtype=np.int64))
            positions.append(deleted)
        file_column = np.concatenate(indexes)
        row_column = np.concatenate(positions)
        if len(files) <= _MAX_PACKED_FILES and (
            not len(row_column) or int(row_column.max()) < 1 << _ROW_BITS
        ):
            keys = pa.table({_DV_KEY: pa.array((file_column << _ROW_BITS) | row_column)})
            # No deleted row lies past 2**40, so a row there gets no key (NULL matches nothing)
            # rather than one that could spill into the file index's bits.
            packed = F.when(
                row_index < F.lit(1 << _ROW_BITS),
                F.shiftleft(file_index, _ROW_BITS).bitwiseOR(row_index),
            )
            tagged = rows.select("*", packed.alias(_DV_KEY))
            deleted_keys = rows.sparkSession.createDataFrame(keys)
            live = tagged.join(F.broadcast(deleted_keys), on=[_DV_KEY], how="left_anti")
            return live.drop(_DV_KEY)
        table = pa.table(
            {
                _DV_FILE: pa.array(file_column, pa.int64()),
                _DV_ROW: pa.array(row_column, pa.int64()),
            }
        )
        deleted_rows = rows.sparkSession.createDataFrame(table)
        tagged = rows.select("*", file_index.alias(_DV_FILE), row_index.alias(_DV_ROW))
        live = tagged.join(F.broadcast(deleted_rows), on=[_DV_FILE, _DV_ROW], how="left_anti")
        return live.drop(_DV_FILE, _DV_ROW)

    return keep_live


def _udf_filter(log: DeltaLog, files: Sequence[AddFile]) -> RowFilter:
    descriptors = [f.deletion_vector for f in files]
    table_path = log.table_path
    paths = [f.path if f.deletion_vector is not None else "" for f in files]

    def is_live(file_index: pa.Array, row_index: pa.Array) -> pa.Array:
        files_np = np.asarray(file_index.to_numpy(zero_copy_only=False), dtype=np.int64)
        rows_np = np.asarray(row_index.to_numpy(zero_copy_only=False), dtype=np.int64)
        keep = np.ones(len(rows_np), dtype=bool)
        # Spark's scan hands a batch rows of one file, or of a few consecutive ones.
        for index in np.unique(files_np):
            dv = descriptors[int(index)]
            if dv is None:
                continue
            deleted = deleted_row_indexes(table_path, dv, data_file=paths[int(index)])
            where = files_np == index
            keep[where] = live_mask(deleted, rows_np[where])
        return pa.array(keep, pa.bool_())

    udf = F.arrow_udf(is_live, "boolean")  # type: ignore[attr-defined]

    def keep_live(rows: DataFrame, file_index: Column, row_index: Column) -> DataFrame:
        return rows.filter(udf(file_index, row_index))

    return keep_live
