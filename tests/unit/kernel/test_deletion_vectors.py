"""The deletion vector codec: RoaringBitmapArray, DV file framing, descriptors.

Round trips are checked against pyroaring (an independent implementation of the Roaring
portable format) and against the inline example vectors used across the Delta ecosystem.
"""

from __future__ import annotations

import struct
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyroaring import BitMap, BitMap64

from deltatx.errors import InvalidTableError
from deltatx.kernel.actions import DeletionVectorDescriptor
from deltatx.kernel.deletion_vectors import (
    dv_relative_path,
    frame_dv_file,
    inline_descriptor,
    inline_rows,
    new_dv_file_id,
    unframe_dv,
    z85_decode,
)
from deltatx.kernel.roaring import PORTABLE_MAGIC, deserialize, serialize

# Rows spread so that array (<= 4096 per 65536 block) and bitmap containers and several 32-bit
# buckets all occur.
_ROWS = st.one_of(
    st.sets(st.integers(0, 200_000), max_size=300),
    st.sets(st.integers(0, 2**40), max_size=50),
    st.builds(
        lambda start, n: set(range(start, start + n)), st.integers(0, 10**6), st.integers(0, 9000)
    ),
)


def _pyroaring_bytes(rows: set[int]) -> bytes:
    return struct.pack("<I", PORTABLE_MAGIC) + BitMap64(rows).serialize()


@settings(max_examples=150, deadline=None)
@given(_ROWS)
def test_serialize_is_byte_identical_to_pyroaring(rows: set[int]) -> None:
    assert serialize(rows) == _pyroaring_bytes(rows)


@settings(max_examples=150, deadline=None)
@given(_ROWS, st.booleans())
def test_deserialize_reads_pyroaring_output_with_run_containers(rows: set[int], runs: bool) -> None:
    bm = BitMap64(rows)
    if runs:
        bm.run_optimize()
    data = struct.pack("<I", PORTABLE_MAGIC) + bm.serialize()
    assert deserialize(data) == sorted(rows)


def test_run_containers_of_32_bit_bitmap() -> None:
    rows = set(range(10, 70_000)) | {100_000, 100_002}
    bm = BitMap(rows)
    bm.run_optimize()
    data = struct.pack("<IQI", PORTABLE_MAGIC, 1, 0) + bm.serialize()
    assert deserialize(data) == sorted(rows)


def test_inline_examples_portable_and_native() -> None:
    # The inline descriptors of the Delta ecosystem's test tables: portable (44 bytes) and the
    # older native layout (40 bytes, big-endian header), both deleting rows 3,4,7,11,18,29.
    portable = DeletionVectorDescriptor(
        "i", "^Bg9^0rr910000000000iXQKl0rr91000f55c8Xg0@@D72lkbi5=-{L", 44, 6
    )
    native = DeletionVectorDescriptor(
        "i", "wi5b=000010000siXQKl0rr91000f55c8Xg0@@D72lkbi5=-{L", 40, 6
    )
    expected = [3, 4, 7, 11, 18, 29]
    assert inline_rows(portable, where="t") == expected
    assert inline_rows(native, where="t") == expected
    assert serialize(expected) == z85_decode(portable.path_or_inline_dv)[:44]


def test_protocol_example_relative_path() -> None:
    # PROTOCOL.md example 1: prefix "ab" + Z85 UUID.
    assert (
        dv_relative_path("ab^-aqEH.-t@S}K{vb[*k^")
        == "ab/deletion_vector_d2c639aa-8816-431a-aaf6-d3fe2512ff61.bin"
    )


def test_inline_descriptor_round_trip() -> None:
    dv = inline_descriptor([5, 1, 9])
    assert (dv.storage_type, dv.cardinality, dv.max_row_index) == ("i", 3, 9)
    assert inline_rows(dv, where="t") == [1, 5, 9]


def test_new_dv_file_id_resolves() -> None:
    encoded, relative = new_dv_file_id("xy")
    assert encoded.startswith("xy") and len(encoded) == 22
    assert relative.startswith("xy/deletion_vector_") and dv_relative_path(encoded) == relative


def test_dv_file_framing_round_trip() -> None:
    bitmaps = [serialize([1, 2]), serialize(range(1000)), serialize([])]
    data, offsets = frame_dv_file(bitmaps)
    assert data[0] == 1 and offsets[0] == 1
    for bitmap, offset in zip(bitmaps, offsets, strict=True):
        assert unframe_dv(data, offset, len(bitmap), where="f.bin") == bitmap
        (size,) = struct.unpack(">I", data[offset : offset + 4])
        crc = struct.unpack(">I", data[offset + 4 + size : offset + 8 + size])[0]
        assert size == len(bitmap) and crc == zlib.crc32(bitmap)


def test_bad_checksum_names_file_and_offset() -> None:
    bitmap = serialize([1, 2, 3])
    data, offsets = frame_dv_file([bitmap])
    corrupt = bytearray(data)
    corrupt[offsets[0] + 6] ^= 0xFF
    with pytest.raises(InvalidTableError, match=r"f\.bin at offset 1: .*checksum"):
        unframe_dv(bytes(corrupt), offsets[0], len(bitmap), where="f.bin")


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d[:-6], "truncated"),
        (lambda d: b"\x02" + d[1:], "version"),
    ],
)
def test_bad_dv_files(mutate: object, message: str) -> None:
    bitmap = serialize([1, 2, 3])
    data, offsets = frame_dv_file([bitmap])
    assert callable(mutate)
    with pytest.raises(InvalidTableError, match=message):
        unframe_dv(mutate(data), offsets[0], len(bitmap), where="f.bin")


def test_size_mismatch_and_offset_outside() -> None:
    bitmap = serialize([1])
    data, _ = frame_dv_file([bitmap])
    with pytest.raises(InvalidTableError, match="log says"):
        unframe_dv(data, 1, len(bitmap) + 1, where="f.bin")
    with pytest.raises(InvalidTableError, match="outside"):
        unframe_dv(data, 500, len(bitmap), where="f.bin")


def test_bad_magic_and_truncated_bitmap() -> None:
    with pytest.raises(InvalidTableError, match="magic"):
        deserialize(b"\x00\x00\x00\x00" + b"\x00" * 8, where="x")
    good = serialize(range(100))
    with pytest.raises(InvalidTableError, match="truncated"):
        deserialize(good[:-3], where="x")
    with pytest.raises(InvalidTableError, match="unexpected bytes"):
        deserialize(good + b"\x00", where="x")


def test_out_of_range_rows() -> None:
    with pytest.raises(InvalidTableError, match="out of range"):
        serialize([-1])
    seven = inline_descriptor([7])
    with pytest.raises(InvalidTableError, match="maxRowIndex"):
        inline_rows(
            DeletionVectorDescriptor("i", seven.path_or_inline_dv, seven.size_in_bytes, 1, None, 3),
            where="t",
        )
    wrong_card = inline_descriptor([1, 2])
    with pytest.raises(InvalidTableError, match="holds 2 rows"):
        inline_rows(
            DeletionVectorDescriptor(
                "i", wrong_card.path_or_inline_dv, wrong_card.size_in_bytes, 3
            ),
            where="t",
        )
