"""The physical row indexes a DML statement matched in one file, kept as a NumPy array.

A 1% DELETE of a 10M-row table matches about 100,000 rows; as Python ints, the list, the
bitmap built from it and the read set's frozenset each cost milliseconds. The driver's matching
finds the rows as an ascending ``int64`` array; they stay one until a consumer needs ints:
the deletion vector is built from the array's runs, and the read set converts them only when a
conflict check asks for them (:class:`AsInts`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
import numpy.typing as npt
from pyroaring import BitMap64

RowIndexes = Sequence[int] | npt.NDArray[np.int64]
"""Physical row indexes of one file: Python ints, or an ascending ``int64`` array."""

# Past one run per this many rows, adding the runs one by one costs more than the bitmap's own
# construction from ints.
_ROWS_PER_RUN = 16


def row_bitmap(rows: RowIndexes) -> BitMap64:
    """The rows as a bitmap; an ascending array of few runs is added run by run."""
    if not isinstance(rows, np.ndarray):
        return BitMap64(rows)
    bitmap = BitMap64()
    if not len(rows):
        return bitmap
    breaks = np.flatnonzero(np.diff(rows) != 1) + 1
    # Runs are exact in any order; a negative index is refused by the bitmap itself.
    if len(breaks) * _ROWS_PER_RUN > len(rows) or rows.min() < 0:
        bitmap.update(rows.tolist())
        return bitmap
    starts = rows[np.concatenate(([0], breaks))]
    stops = rows[np.concatenate((breaks, [len(rows)])) - 1] + 1
    for start, stop in zip(starts.tolist(), stops.tolist(), strict=True):
        bitmap.add_range(start, stop)
    return bitmap


class AsInts:
    """An array of row indexes iterated as Python ints, converted only when iterated.

    What the read set records: it makes a frozenset of a file's rows only when a conflict
    check compares rows, which most commits never do.
    """

    __slots__ = ("_rows",)

    def __init__(self, rows: npt.NDArray[np.int64]) -> None:
        """Wraps ``rows`` (not copied: the caller no longer changes them)."""
        self._rows = rows

    def __iter__(self) -> Iterator[int]:
        """The rows as Python ints."""
        return iter(self._rows.tolist())

    def __len__(self) -> int:
        """How many rows."""
        return len(self._rows)


def as_ints(rows: RowIndexes) -> Sequence[int] | AsInts:
    """``rows`` ready for the read set: an array is wrapped, not converted."""
    return AsInts(rows) if isinstance(rows, np.ndarray) else rows
