"""Deletion vector I/O: read a descriptor's row set, write many row sets into one DV file.

The formats are in :mod:`deltatx.kernel.deletion_vectors` and :mod:`deltatx.kernel.roaring`;
this module adds the storage. Bitmaps are serialized and decoded with pyroaring (a C
implementation of the same portable format, byte-identical to the kernel's writer and much
faster on large sets); the kernel's reader takes what pyroaring refuses, names the fault, and
accepts Delta's older native layout.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping, Sequence
from typing import Protocol

from pyroaring import BitMap64

from deltatx.errors import InvalidArgumentError, InvalidTableError
from deltatx.kernel.actions import AddFile, DeletionVectorDescriptor, RemoveFile
from deltatx.kernel.deletion_vectors import (
    FIRST_DV_OFFSET,
    check_rows,
    descriptor_location,
    frame_dv_file,
    inline_rows,
    new_dv_file_id,
    stored_descriptor,
    unframe_dv,
)
from deltatx.kernel.file_paths import is_relative
from deltatx.kernel.roaring import PORTABLE_MAGIC, deserialize
from deltatx.storage.location import Location


class TableFiles(Protocol):
    """Anything that knows where a table lives (a :class:`DeltaLog`)."""

    @property
    def location(self) -> Location:
        """The table's location."""
        ...


_PORTABLE_HEAD = struct.pack("<I", PORTABLE_MAGIC)
# RoaringBitmapArray keys the high 32 bits with a non-negative int.
_MAX_ROW = 1 << 63

__all__ = [
    "FIRST_DV_OFFSET",
    "DvReader",
    "read_dv_rows",
    "serialize_rows",
    "write_dvs",
]


def serialize_rows(rows: Iterable[int]) -> bytes:
    """The portable RoaringBitmapArray of ``rows``, written with pyroaring."""
    return struct.pack("<I", PORTABLE_MAGIC) + BitMap64(rows).serialize()


def dv_file_location(location: Location, dv: DeletionVectorDescriptor, *, owner: str = "") -> str:
    """The canonical location of a stored descriptor's file.

    A ``u`` vector lives below the table root under its (optional) prefix; a ``p`` vector
    names its file by absolute path or URI, as the protocol requires.

    Raises:
        InvalidTableError: A ``u`` prefix climbs out of the root, or a ``p`` path is relative.
    """
    what = f"deletion vector{owner}"
    raw = descriptor_location(dv)
    if dv.storage_type == "p" and is_relative(raw):
        raise InvalidTableError(
            f"{what}: path {raw!r} is relative; a 'p' deletion vector must name its file by "
            "absolute path"
        )
    return location.file(raw, what=what)


class DvReader:
    """Reads deletion vectors of one table, reading each DV file once.

    A DML commit puts many DVs in one file, so a scan over its files would otherwise read the
    same file once per data file.
    """

    def __init__(self, log: TableFiles | Location) -> None:
        """Reads the files of the table at ``log`` (a log or its location)."""
        self.location = log if isinstance(log, Location) else log.location
        self._files: dict[str, bytes] = {}

    def rows(self, dv: DeletionVectorDescriptor | None, *, data_file: str = "") -> list[int]:
        """The deleted row indexes of ``dv`` (none for None), ascending.

        Raises:
            InvalidTableError: The DV file is missing or corrupt; the message names the file,
                the offset and the data file it belongs to.
        """
        if dv is None:
            return []
        owner = f" (of data file {data_file})" if data_file else ""
        if dv.storage_type == "i":
            return inline_rows(dv, where=f"inline deletion vector{owner}")
        path = dv_file_location(self.location, dv, owner=owner)
        data = self._files.get(path)
        if data is None:
            try:
                data = self.location.read(path)
            except FileNotFoundError:
                raise InvalidTableError(
                    f"deletion vector file {path}{owner} does not exist"
                ) from None
            except OSError as exc:
                # A directory, or a file the process may not read: the table is unreadable.
                raise InvalidTableError(
                    f"deletion vector file {path}{owner} cannot be read: {exc.strerror or exc}"
                ) from None
            self._files[path] = data
        offset = FIRST_DV_OFFSET if dv.offset is None else dv.offset
        where = f"deletion vector file {path}{owner}"
        bitmap = unframe_dv(data, offset, dv.size_in_bytes, where=where)
        rows = _decode(bitmap, where=f"{where} at offset {offset}")
        return check_rows(rows, dv, where=f"{where} at offset {offset}")

    def rows_of(self, action: AddFile | RemoveFile) -> frozenset[int]:
        """The deleted rows of a file action, as a set."""
        return frozenset(self.rows(action.deletion_vector, data_file=action.path))


def _decode(bitmap: bytes, *, where: str) -> list[int]:
    """The rows of a serialized bitmap, decoded in C where possible.

    pyroaring takes the portable layout when it accepts the bytes and the keys are ones the
    protocol allows; anything else goes to the kernel's reader, which names the fault.
    """
    if bitmap[:4] == _PORTABLE_HEAD:
        try:
            rows = BitMap64.deserialize(bytes(bitmap[4:]))
        except (ValueError, OverflowError):
            rows = None
        if rows is not None and (not rows or rows.max() < _MAX_ROW):
            return list(rows)
    return deserialize(bitmap, where=where)


def read_dv_rows(log: TableFiles, dv: DeletionVectorDescriptor | None) -> list[int]:
    """The deleted row indexes of one descriptor (see :meth:`DvReader.rows`)."""
    return DvReader(log).rows(dv)


def write_dvs(
    log: TableFiles, row_sets: Sequence[Iterable[int]], *, prefix: str = ""
) -> list[DeletionVectorDescriptor]:
    """Writes every row set into one new DV file and returns their descriptors, in order.

    One file per call keeps a DML commit that touches many data files to one small write (the
    protocol allows any number of DVs per file). Empty row sets are refused: a file with no
    deleted rows simply has no deletion vector.

    Args:
        log: The table to write under.
        row_sets: The deleted rows of each data file.
        prefix: An optional random directory prefix (spreads load on object stores).

    Raises:
        InvalidArgumentError: A row set is empty.
    """
    if not row_sets:
        return []
    sets = [BitMap64(rows) for rows in row_sets]
    if any(len(s) == 0 for s in sets):
        raise InvalidArgumentError("a deletion vector must delete at least one row")
    bitmaps = [struct.pack("<I", PORTABLE_MAGIC) + s.serialize() for s in sets]
    data, offsets = frame_dv_file(bitmaps)
    encoded, relative = new_dv_file_id(prefix)
    log.location.write_new(log.location.child(relative), data)
    return [
        stored_descriptor(encoded, offset, bitmap, len(s), s.max())
        for s, offset, bitmap in zip(sets, offsets, bitmaps, strict=True)
    ]


def union_rows(*sets: Iterable[int]) -> frozenset[int]:
    """The union of several row sets."""
    out: set[int] = set()
    for s in sets:
        out.update(s)
    return frozenset(out)


def added_rows(reader: DvReader, before: RemoveFile, after: AddFile) -> frozenset[int]:
    """The rows a remove/add pair of the same file newly deleted (``after`` minus ``before``)."""
    return reader.rows_of(after) - reader.rows_of(before)


def rows_by_path(
    reader: DvReader, files: Mapping[str, AddFile | RemoveFile]
) -> dict[str, frozenset[int]]:
    """Each file's deleted rows."""
    return {path: reader.rows_of(f) for path, f in files.items()}
