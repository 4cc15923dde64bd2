"""Deletion-vector DML: mark rows deleted in a file's vector instead of rewriting the file.

DELETE, UPDATE and MERGE find the rows they change as (file index, row index) addresses; only
those two longs per changed row reach the driver. Per touched file the new vector is the old
one plus the changed rows, staged as ``remove(P, old DV)`` + ``add(P, new DV)`` with the same
statistics (no longer tight bounds); a file whose rows are all deleted is simply removed. The
vectors of one statement share one DV file.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import pyarrow.parquet as pq
from pyroaring import BitMap64
from pyspark.sql import Column

from deltatx.kernel.actions import AddFile
from deltatx.kernel.deletion_vectors import loose_stats, num_records
from deltatx.kernel.expressions import Expression
from deltatx.kernel.row_level.limitations import row_level_limitation
from deltatx.log.deletion_vectors import DvReader, write_dvs
from deltatx.log.row_level.row_indexes import RowIndexes, as_ints, row_bitmap
from deltatx.log.transaction import OptimisticTransaction
from deltatx.spark.expressions import is_deterministic


@dataclass(frozen=True, slots=True)
class DvChanges:
    """What marking rows deleted staged.

    Attributes:
        removed_files: Files dropped whole (every row deleted).
        updated_files: Files that got a new deletion vector.
        rows: Rows newly marked deleted, over all files.
    """

    removed_files: int
    updated_files: int
    rows: int

    @property
    def dvs_added(self) -> int:
        """Deletion vectors written."""
        return self.updated_files


def physical_rows(txn: OptimisticTransaction, f: AddFile) -> int:
    """The number of rows stored in a data file (``numRecords``, else its Parquet footer)."""
    n = num_records(f.stats)
    return footer_rows(txn, f) if n is None else n


def footer_rows(txn: OptimisticTransaction, f: AddFile) -> int:
    """The number of rows a data file's Parquet footer says it stores.

    Raises:
        OSError: The file cannot be read.
        ValueError: The file is not Parquet.
    """
    location = txn.log.location
    path = location.file(f.path, what="data file")
    return int(pq.read_metadata(path, filesystem=location.fs).num_rows)


def mark_deleted(
    txn: OptimisticTransaction,
    files: Sequence[AddFile],
    deleted: Mapping[int, RowIndexes],
) -> DvChanges:
    """Stages deletion vectors that add ``deleted`` rows to each file's vector.

    Args:
        txn: The transaction to stage into.
        files: The files the statement read, indexed as in ``deleted``.
        deleted: File index -> physical row indexes to delete.
    """
    reader = DvReader(txn.log)
    whole: list[AddFile] = []
    partial: list[tuple[AddFile, BitMap64]] = []
    total = 0
    for index, rows in sorted(deleted.items()):
        if not len(rows):
            continue
        f = files[index]
        # Bitmaps, not Python sets: at 100,000 rows a file, building sets cost more than the
        # rest of the statement.
        new = row_bitmap(rows)
        added = len(new)
        if f.deletion_vector is not None:
            old = BitMap64(reader.rows(f.deletion_vector, data_file=f.path))
            new |= old
            added = len(new) - len(old)
        total += added
        if len(new) >= physical_rows(txn, f):
            whole.append(f)
        else:
            partial.append((f, new))
    descriptors = write_dvs(txn.log, [rows for _, rows in partial])
    txn.remove_files(whole)
    replaced = [f for f, _ in partial]
    txn.remove_files(replaced)
    txn.add_files(
        [
            replace(
                f,
                deletion_vector=dv,
                data_change=True,
                stats=loose_stats(f.stats),
            )
            for (f, _), dv in zip(partial, descriptors, strict=True)
        ]
    )
    return DvChanges(removed_files=len(whole), updated_files=len(partial), rows=total)


def record_row_level(
    txn: OptimisticTransaction,
    files: Sequence[AddFile],
    deleted: Mapping[int, RowIndexes],
    *,
    predicate: Expression | None,
    condition: str | Column | None,
) -> None:
    """Records the statement's reads at row level, or why they fall back to file level."""
    text = condition if isinstance(condition, str) else None
    reason = row_level_limitation(predicate, txn.schema, condition_text=text)
    if reason is None and text is not None and not is_deterministic(text):
        # A MERGE records only its target conjuncts; the whole condition must be deterministic.
        reason = "the condition is non-deterministic"
    if reason is None and condition is not None and not isinstance(condition, str):
        reason = "the condition is a Column object whose determinism cannot be checked"
    if reason is not None:
        txn.record_row_level_fallback(reason)
        return
    txn.record_row_level(list(files), {files[i].path: as_ints(rows) for i, rows in deleted.items()})
