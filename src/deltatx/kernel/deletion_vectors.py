"""Deletion vectors: Z85 encoding and where a descriptor's bitmap lives."""

from __future__ import annotations

import uuid

from deltatx.errors import InvalidTableError
from deltatx.kernel.actions import DeletionVectorDescriptor

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


def check_descriptor(dv: DeletionVectorDescriptor, where: str) -> None:
    """Refuses a descriptor no writer can have produced (bad type, negative counts).

    Such a descriptor would make a reader return deleted rows or look for the bitmap in the
    wrong place, so a table state is never built on one. Whether a ``u`` id decodes is checked
    where the bitmap file is resolved (:func:`dv_relative_path`).

    Raises:
        InvalidTableError: The descriptor is invalid; the message says where and why.
    """
    if dv.storage_type not in ("u", "i", "p"):
        raise InvalidTableError(f"{where}: unknown deletion vector storageType {dv.storage_type!r}")
    for name, value in (
        ("cardinality", dv.cardinality),
        ("sizeInBytes", dv.size_in_bytes),
        ("offset", dv.offset),
        ("maxRowIndex", dv.max_row_index),
    ):
        if value is not None and value < 0:
            raise InvalidTableError(f"{where}: deletion vector {name} is negative ({value})")
