"""Deletion vectors: Z85, DV file framing, and descriptors (where a row set lives).

The bitmap codec is :mod:`deltatx.kernel.roaring`; this module frames bitmaps into DV files
(version byte, then per DV a big-endian size, the bitmap and a big-endian CRC-32) and builds
and resolves the three kinds of descriptor: ``i`` inline (Z85 of the bitmap), ``u`` a file
named by a UUID relative to the table root, ``p`` an absolute path. No I/O happens here.
"""

from __future__ import annotations

import json
import struct
import uuid
import zlib
from collections.abc import Iterable, Sequence

from deltatx.errors import DeltaError, InvalidArgumentError, InvalidTableError
from deltatx.kernel.actions import DeletionVectorDescriptor
from deltatx.kernel.roaring import deserialize, serialize

_Z85_CHARS = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"
_Z85_INDEX = {c: i for i, c in enumerate(_Z85_CHARS)}


def z85_encode(data: bytes) -> str:
    """ZeroMQ Base85; the input is padded with zero bytes to a multiple of 4."""
    padded = data + b"\x00" * (-len(data) % 4)
    out: list[str] = []
    for i in range(0, len(padded), 4):
        value = int.from_bytes(padded[i : i + 4], "big")
        chunk = []
        for _ in range(5):
            value, rem = divmod(value, 85)
            chunk.append(_Z85_CHARS[rem])
        out.extend(reversed(chunk))
    return "".join(out)


def z85_decode(text: str) -> bytes:
    """Inverse of :func:`z85_encode` (the padding is not removed).

    Raises:
        InvalidTableError: The text is not Z85.
    """
    if len(text) % 5:
        raise InvalidTableError(f"Z85 text must be a multiple of 5 characters, got {len(text)}")
    out = bytearray()
    for i in range(0, len(text), 5):
        value = 0
        for c in text[i : i + 5]:
            digit = _Z85_INDEX.get(c)
            if digit is None:
                raise InvalidTableError(f"'{c}' is not a Z85 character")
            value = value * 85 + digit
        if value >= 2**32:
            raise InvalidTableError("Z85 group out of range")
        out += value.to_bytes(4, "big")
    return bytes(out)


def dv_relative_path(path_or_inline_dv: str) -> str:
    """The table-relative file of a ``u`` descriptor: ``<prefix>/deletion_vector_<uuid>.bin``.

    Raises:
        InvalidTableError: The descriptor does not end in a 20-character Z85 UUID.
    """
    if len(path_or_inline_dv) < 20:
        raise InvalidTableError(
            f"deletion vector id '{path_or_inline_dv}' is too short for a Z85 UUID"
        )
    prefix, encoded = path_or_inline_dv[:-20], path_or_inline_dv[-20:]
    name = f"deletion_vector_{uuid.UUID(bytes=z85_decode(encoded))}.bin"
    return f"{prefix}/{name}" if prefix else name


def check_descriptor(
    dv: DeletionVectorDescriptor,
    where: str,
    *,
    error: type[DeltaError] = InvalidTableError,
) -> None:
    """Refuses a descriptor no writer can have produced (bad type, negative counts).

    Such a descriptor would make a reader return deleted rows or look for the bitmap in the
    wrong place, so a table state is never built on one and a commit never publishes one.
    Whether a ``u`` id decodes is checked where the bitmap file is resolved
    (:func:`dv_relative_path`).

    Args:
        dv: The descriptor.
        where: Names the action in the message.
        error: The error to raise: InvalidTableError for a log being read, InvalidArgumentError
            for actions being committed.

    Raises:
        DeltaError: ``error``, saying where and why.
    """
    if dv.storage_type not in ("u", "i", "p"):
        raise error(f"{where}: deletion vector has unknown storageType {dv.storage_type!r}")
    for name, value in (
        ("cardinality", dv.cardinality),
        ("sizeInBytes", dv.size_in_bytes),
        ("offset", dv.offset),
        ("maxRowIndex", dv.max_row_index),
    ):
        if value is not None and value < 0:
            raise error(f"{where}: deletion vector {name} is negative ({value})")


# -- DV files ------------------------------------------------------------------------------------

DV_FILE_VERSION = 1
# The first DV of a file starts after the version byte.
FIRST_DV_OFFSET = 1


def frame_dv_file(bitmaps: Sequence[bytes]) -> tuple[bytes, list[int]]:
    """A DV file holding ``bitmaps``: version byte, then per bitmap size, bytes and CRC-32.

    Sizes and checksums are big-endian (PROTOCOL.md, "Deletion Vector File Storage Format").

    Returns:
        The file's bytes and, per bitmap, the offset a descriptor records (of its size field).
    """
    out = bytearray([DV_FILE_VERSION])
    offsets: list[int] = []
    for bitmap in bitmaps:
        offsets.append(len(out))
        out += struct.pack(">I", len(bitmap))
        out += bitmap
        out += struct.pack(">I", zlib.crc32(bitmap) & 0xFFFFFFFF)
    return bytes(out), offsets


def unframe_dv(data: bytes, offset: int, size: int, *, where: str) -> bytes:
    """The bitmap stored at ``offset`` of a DV file, its size and checksum verified.

    Args:
        data: The whole DV file (or at least up to the end of this DV).
        offset: The descriptor's offset (of the size field); absent means 1 here.
        size: The descriptor's ``sizeInBytes``.
        where: Names the file in error messages.

    Raises:
        InvalidTableError: Unknown version, truncated data, a size that disagrees with the
            descriptor, or a bad checksum; the message names the file and offset.
    """
    at = f"{where} at offset {offset}"
    if not data:
        raise InvalidTableError(f"{at}: the deletion vector file is empty")
    if data[0] != DV_FILE_VERSION:
        raise InvalidTableError(f"{at}: unknown deletion vector file version {data[0]}")
    if offset < 1 or offset + 4 > len(data):
        raise InvalidTableError(f"{at}: offset is outside the file ({len(data)} bytes)")
    (stored,) = struct.unpack(">I", data[offset : offset + 4])
    if stored != size:
        raise InvalidTableError(
            f"{at}: the file stores a {stored}-byte deletion vector, the log says {size}"
        )
    end = offset + 4 + size
    if end + 4 > len(data):
        raise InvalidTableError(f"{at}: the deletion vector is truncated")
    bitmap = data[offset + 4 : end]
    (crc,) = struct.unpack(">I", data[end : end + 4])
    if zlib.crc32(bitmap) & 0xFFFFFFFF != crc:
        raise InvalidTableError(f"{at}: deletion vector checksum mismatch (corrupt file)")
    return bitmap


# -- descriptors ---------------------------------------------------------------------------------


def new_dv_file_id(prefix: str = "") -> tuple[str, str]:
    """A fresh DV file: its ``pathOrInlineDv`` (``prefix`` + Z85 UUID) and relative path."""
    if prefix and (len(prefix) > 20 or not prefix.isalnum()):
        raise InvalidArgumentError(f"deletion vector prefix {prefix!r} must be short alphanumeric")
    encoded = prefix + z85_encode(uuid.uuid4().bytes)
    return encoded, dv_relative_path(encoded)


def stored_descriptor(
    path_or_inline_dv: str,
    offset: int,
    bitmap: bytes,
    cardinality: int,
    max_row_index: int,
    *,
    storage: str = "u",
) -> DeletionVectorDescriptor:
    """The descriptor of a bitmap stored in a file: ``u`` (Z85 id) or ``p`` (absolute path).

    The type is given, never guessed: Z85 text may itself start with ``/``.
    """
    return DeletionVectorDescriptor(
        storage_type=storage,
        path_or_inline_dv=path_or_inline_dv,
        size_in_bytes=len(bitmap),
        cardinality=cardinality,
        offset=offset,
        max_row_index=max_row_index,
    )


def inline_descriptor(rows: Iterable[int]) -> DeletionVectorDescriptor:
    """An ``i`` descriptor: the bitmap itself, Z85-encoded, in the log (for tiny vectors)."""
    values = sorted(set(rows))
    bitmap = serialize(values)
    return DeletionVectorDescriptor(
        storage_type="i",
        path_or_inline_dv=z85_encode(bitmap),
        size_in_bytes=len(bitmap),
        cardinality=len(values),
        max_row_index=values[-1] if values else None,
    )


def inline_bitmap(dv: DeletionVectorDescriptor, *, where: str) -> bytes:
    """The serialized bitmap of an ``i`` descriptor (the Z85 padding cut at ``sizeInBytes``)."""
    raw = z85_decode(dv.path_or_inline_dv)
    if dv.size_in_bytes > len(raw):
        raise InvalidTableError(
            f"{where}: inline deletion vector is {len(raw)} bytes, sizeInBytes says "
            f"{dv.size_in_bytes}"
        )
    return raw[: dv.size_in_bytes]


def inline_rows(dv: DeletionVectorDescriptor, *, where: str) -> list[int]:
    """The rows of an ``i`` descriptor."""
    bitmap = inline_bitmap(dv, where=where)
    return check_rows(deserialize(bitmap, where=where), dv, where=where)


def check_rows(rows: list[int], dv: DeletionVectorDescriptor, *, where: str) -> list[int]:
    """Refuses a decoded row set that disagrees with its descriptor (a corrupt table).

    Raises:
        InvalidTableError: The cardinality differs, or a row is above ``maxRowIndex``.
    """
    if len(rows) != dv.cardinality:
        raise InvalidTableError(
            f"{where}: deletion vector holds {len(rows)} rows, its descriptor says {dv.cardinality}"
        )
    if rows and dv.max_row_index is not None and rows[-1] > dv.max_row_index:
        raise InvalidTableError(
            f"{where}: deletion vector row {rows[-1]} is above maxRowIndex {dv.max_row_index}"
        )
    return rows


def descriptor_location(dv: DeletionVectorDescriptor) -> str:
    """Where a stored descriptor's file is: table-relative for ``u``, the URI for ``p``."""
    if dv.storage_type == "u":
        return dv_relative_path(dv.path_or_inline_dv)
    if dv.storage_type == "p":
        return dv.path_or_inline_dv
    raise InvalidArgumentError(f"an inline deletion vector has no file (type {dv.storage_type!r})")


def loose_stats(stats: str | None) -> str | None:
    """The statistics of a file that got a deletion vector: same values, ``tightBounds`` false.

    Min/max still bound the live rows, just not tightly; ``numRecords`` stays the physical count
    as the protocol requires.
    """
    if not stats:
        return stats
    try:
        parsed = json.loads(stats)
    except ValueError:
        return stats
    if not isinstance(parsed, dict):
        return stats
    parsed["tightBounds"] = False
    return json.dumps(parsed, separators=(",", ":"))


def num_records(stats: str | None) -> int | None:
    """``numRecords`` from a file's statistics (the physical row count), if present."""
    if not stats:
        return None
    try:
        n = json.loads(stats).get("numRecords")
    except (ValueError, AttributeError):
        return None
    return n if isinstance(n, int) and not isinstance(n, bool) else None
