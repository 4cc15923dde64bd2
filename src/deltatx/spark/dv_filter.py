"""Deletion vectors applied where the rows are: each task reads its own file's vector.

The driver ships one small descriptor per file (where the vector is stored, how large it
is), never the deleted row ids, so what a task carries grows with the number of files it
reads and not with the number of deleted rows. A Python worker loads a vector the first time
it meets the file and keeps it for the next batches and tasks it runs.

Two users: the data source's Python reader masks the Arrow batches it reads, and
:func:`live_rows_filter` gives Spark's native Parquet scan (``DeltaTable.to_df``,
``spark.read.format("delta").load``) a filter with no Python on the rows' path, where
deltatx's reader extension is not loaded (:mod:`deltatx.spark.reader_extension`, which drops
the rows inside the reader) and for reads that need each row's address (DML): each row
finds, by its file and its 64-row word, that word's deleted-row bits. Up to
:data:`LITERAL_WORDS_LIMIT` words they are one literal array in the stage's code, which Spark
ships once per executor with the stage (the tasks themselves carry only a reference to it);
past it, a broadcast joined by file. Past :data:`BROADCAST_LIMIT` deleted rows, a vectorised
Python filter that loads each file's vector in the task takes over.
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
from deltatx.kernel.deletion_vectors import num_records
from deltatx.log.deletion_vectors import DvReader
from deltatx.log.delta_log import DeltaLog
from deltatx.spark.literals import long_array
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
"""Most deleted rows one scan drops through a broadcast of its vectors' words."""

LITERAL_WORDS_LIMIT = 262_144
"""Most 64-row words (2 MB) one scan's vectors travel as a literal array in the stage's code:
no join, no exchange, and each row reads its word in place. Past it the block would weigh on
every task that deserialises the stage, and the broadcast join takes over."""

DENSE_WORDS_LIMIT = 4_000_000
"""Most 64-row words (32 MB) one scan's vectors travel as, every word of each file up to its
last deleted row; past it, only the words that delete something travel, keyed by file and
word."""

_DV_FILE = "__deltatx_dv_file"
_DV_KEY = "__deltatx_dv_key"
_DV_WORD = "__deltatx_dv_word"
_DV_WORDS = "__deltatx_dv_words"
_DV_ROW = "__deltatx_dv_row"
_DV_TABLE = "__deltatx_dv_table"
# A vector travels as 64-row words: bit r % 64 of word r // 64 says whether row r is deleted.
# As one row per file holding the array of its words, the broadcast is as many rows as files
# with a vector, and a row indexes its word in place (measured on 4M rows with 10% deleted:
# a third less driver JVM CPU than a broadcast of one row per word, which Spark serialises row
# by row). Sparse vectors over very large files would make those arrays mostly zeros, so past
# DENSE_WORDS_LIMIT only the words that delete something travel, joined by file and word.
_WORD_BITS = 6
_WORD_MASK = (1 << _WORD_BITS) - 1
# Where the words of a file without a vector start: any of its rows' word indexes stays below
# zero (and within an int, so the cast to an array index is exact), which finds no word.
_NO_WORDS = -(2**31)


def live_rows_filter(log: DeltaLog, files: Sequence[AddFile]) -> RowFilter | None:
    """The scan filter that drops rows deleted by the files' deletion vectors.

    Rows keep coming from Spark's Parquet scan. Up to :data:`BROADCAST_LIMIT` deleted rows,
    the driver reads the vectors and each row finds its file's 64-row word of deleted-row
    bits in a broadcast, which travels once per executor: the task itself carries nothing
    that grows with them. Beyond it, a vectorised Python UDF sees each row's file index and
    row index and loads each file's vector in the worker from the descriptor its closure
    holds.

    Returns:
        None when no file has a deletion vector (the scan then needs no row index).
    """
    descriptors = [f.deletion_vector for f in files]
    if all(dv is None for dv in descriptors):
        return None
    if sum(dv.cardinality for dv in descriptors if dv is not None) <= BROADCAST_LIMIT:
        return _broadcast_filter(log, files)
    return _udf_filter(log, files)


def _file_words(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(word indexes, words)`` of one file's sorted deleted rows: only words with a bit set."""
    word_of_row = rows >> _WORD_BITS
    # Rows are sorted, so each word's rows are consecutive: OR their bits per word.
    starts = np.flatnonzero(np.r_[True, word_of_row[1:] != word_of_row[:-1]])
    bits = np.left_shift(np.int64(1), rows & _WORD_MASK)
    return word_of_row[starts], np.bitwise_or.reduceat(bits, starts)


def deleted_words(
    deleted_by_file: Sequence[tuple[int, np.ndarray]],
) -> tuple[int, np.ndarray, np.ndarray]:
    """The 64-row words of sorted deleted row indexes, keyed by file index and word.

    Args:
        deleted_by_file: ``(file index, sorted deleted row indexes)`` pairs.

    Returns:
        ``(stride, keys, words)``: a row ``r`` of file ``i`` is deleted when the word keyed
        ``i * stride + r // 64`` has bit ``r % 64`` set; ``stride`` exceeds every file's last
        word, so keys of different files never meet. Only words with a bit set are listed.
    """
    stride = 1 + max(
        (int(rows[-1]) >> _WORD_BITS for _, rows in deleted_by_file if len(rows)), default=0
    )
    keys: list[np.ndarray] = []
    words: list[np.ndarray] = []
    for index, rows in deleted_by_file:
        if not len(rows):
            continue
        at, bits = _file_words(rows)
        keys.append(index * stride + at)
        words.append(bits)
    if not keys:
        return stride, np.empty(0, np.int64), np.empty(0, np.int64)
    return stride, np.concatenate(keys), np.concatenate(words)


def word_arrays(rows: np.ndarray) -> np.ndarray:
    """Every 64-row word of a file up to its last deleted row, from sorted row indexes.

    Row ``r`` is deleted when bit ``r % 64`` of word ``r // 64`` is set; a row past the last
    word is live.
    """
    if not len(rows):
        return np.empty(0, np.int64)
    at, bits = _file_words(rows)
    words = np.zeros(int(at[-1]) + 1, dtype=np.int64)
    words[at] = bits
    return words


def _broadcast_filter(log: DeltaLog, files: Sequence[AddFile]) -> RowFilter:
    table_path = log.table_path

    def keep_live(
        rows: DataFrame, file_index: str, row_index: str, *, index_folds: bool
    ) -> DataFrame:
        deleted = [
            (index, deleted_row_indexes(table_path, add.deletion_vector, data_file=add.path))
            for index, add in enumerate(files)
            if add.deletion_vector is not None
        ]
        if index_folds:
            kept = _literal_words(rows, file_index, row_index, deleted, files)
            if kept is not None:
                return kept
        dense = sum((int(r[-1]) >> _WORD_BITS) + 1 for _, r in deleted if len(r))
        keep = _join_arrays if dense <= DENSE_WORDS_LIMIT else _join_words
        return keep(rows, F.expr(file_index), F.expr(row_index), deleted)

    return keep_live


def _literal_words(
    rows: DataFrame,
    file_index: str,
    row_index: str,
    deleted: Sequence[tuple[int, np.ndarray]],
    files: Sequence[AddFile],
) -> DataFrame | None:
    """Keeps the live rows, each reading its word from one literal array of every file's words.

    The literal holds each file's start, then the words: a file with a vector has a word for
    each 64 of its ``numRecords`` rows from its start on; a file without one starts so far
    below zero that its rows find no word and are live. Each row names its file once:
    Spark's optimiser copies a filter's column expressions into it, so a second use would run
    the file search twice. On 4M rows in 16 files with 10% deleted, once the JVM is warm
    (``python -m benchmarks.dv_read_breakdown``), the read takes 1.8x the wall time of the
    same table purged, against 3.1x with the broadcast join.

    Returns:
        None when a file with a vector has no ``numRecords`` (or fewer rows than its vector
        names), when the words pass :data:`LITERAL_WORDS_LIMIT`, or when the session cannot
        build the literal: the caller joins instead.
    """
    counts: list[int] = []
    for index, deleted_rows in deleted:
        n = num_records(files[index].stats)
        if n is None or (len(deleted_rows) and int(deleted_rows[-1]) >= n):
            return None
        counts.append((n + _WORD_MASK) >> _WORD_BITS)
    if sum(counts) > LITERAL_WORDS_LIMIT:
        return None
    # One array, one literal: each file's start first, then the words.
    table = np.zeros(len(files) + sum(counts), np.int64)
    table[: len(files)] = _NO_WORDS
    at = len(files)
    for (index, deleted_rows), count in zip(deleted, counts, strict=True):
        file_words = word_arrays(deleted_rows)
        table[at : at + len(file_words)] = file_words
        table[index] = at
        at += count
    literal = long_array(rows.sparkSession, table)
    if literal is None:
        return None
    # The filter is SQL (one call to the JVM) over a helper column holding the literal, which
    # Spark's optimiser folds into the filter.
    word = f"get({_DV_TABLE}, CAST({file_index} AS INT)) + shiftright({row_index}, {_WORD_BITS})"
    # Below zero for a file without a vector: no word, a live row.
    found = f"get({_DV_TABLE}, CAST({word} AS INT))"
    bit = f"getbit({found}, CAST({row_index} & {_WORD_MASK} AS INT))"
    return rows.select("*", literal.alias(_DV_TABLE)).filter(f"coalesce({bit}, 0) = 0")


def _join_arrays(
    rows: DataFrame,
    file_index: Column,
    row_index: Column,
    deleted: Sequence[tuple[int, np.ndarray]],
) -> DataFrame:
    """Keeps the live rows, joined by file to one broadcast row of the file's words."""
    arrays = [word_arrays(r) for _, r in deleted]
    offsets = np.zeros(len(arrays) + 1, np.int32)
    np.cumsum([len(a) for a in arrays], out=offsets[1:])
    values = pa.array(np.concatenate(arrays) if arrays else np.empty(0, np.int64))
    by_file = pa.table(
        {
            _DV_FILE: pa.array([index for index, _ in deleted], pa.int64()),
            _DV_WORDS: pa.ListArray.from_arrays(pa.array(offsets), values),
        }
    )
    words = F.broadcast(rows.sparkSession.createDataFrame(by_file))
    joined = rows.join(words, on=file_index == words[_DV_FILE], how="left_outer")
    # get() is NULL past the array: a row after the file's last deleted row is live.
    bits = F.get(F.col(_DV_WORDS), F.shiftright(row_index, _WORD_BITS).cast("int"))
    bit = F.getbit(bits, row_index.bitwiseAND(_WORD_MASK).cast("int"))
    return joined.filter(bits.isNull() | (bit == 0))


def _join_words(
    rows: DataFrame,
    file_index: Column,
    row_index: Column,
    deleted: Sequence[tuple[int, np.ndarray]],
) -> DataFrame:
    """Keeps the live rows, joined by file and word to the words that delete something."""
    stride, keys, words = deleted_words(deleted)
    word = F.shiftright(row_index, _WORD_BITS)
    # A row past the last word of every vector is live; it must not reach the next file's.
    key = F.when(word < F.lit(stride), file_index * F.lit(stride) + word)
    table = pa.table({_DV_KEY: pa.array(keys, pa.int64()), _DV_WORD: pa.array(words, pa.int64())})
    tagged = rows.select("*", key.alias(_DV_KEY), row_index.alias(_DV_ROW))
    joined = tagged.join(
        F.broadcast(rows.sparkSession.createDataFrame(table)), on=[_DV_KEY], how="left_outer"
    )
    bit = F.getbit(F.col(_DV_WORD), F.col(_DV_ROW).bitwiseAND(_WORD_MASK).cast("int"))
    return joined.filter(F.col(_DV_WORD).isNull() | (bit == 0)).drop(_DV_KEY, _DV_WORD, _DV_ROW)


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

    def keep_live(
        rows: DataFrame, file_index: str, row_index: str, *, index_folds: bool
    ) -> DataFrame:
        return rows.filter(udf(F.expr(file_index), F.expr(row_index)))

    return keep_live
