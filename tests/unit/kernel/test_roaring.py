"""The pure-Python RoaringBitmapArray: round trips across 64-bit keys, and refusals."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from deltatx.errors import InvalidTableError
from deltatx.kernel.roaring import MAX_ROW_INDEX, PORTABLE_MAGIC, deserialize, serialize

ROWS = st.sets(
    st.one_of(st.integers(0, 70_000), st.integers(0, 1 << 40), st.integers(0, MAX_ROW_INDEX)),
    max_size=300,
)


@given(ROWS)
def test_rows_round_trip_in_ascending_order(rows: set[int]) -> None:
    assert deserialize(serialize(rows)) == sorted(rows)


def test_the_portable_layout_starts_with_its_magic_and_bucket_count() -> None:
    data = serialize([1, 2, (5 << 32) + 1])
    magic, buckets = struct.unpack_from("<IQ", data)
    assert (magic, buckets) == (PORTABLE_MAGIC, 2)


def test_dense_runs_round_trip() -> None:
    rows = list(range(0, 100_000)) + list(range(200_000, 200_010))
    assert deserialize(serialize(rows)) == rows


@pytest.mark.parametrize("row", [-1, MAX_ROW_INDEX + 1])
def test_rows_out_of_range_are_refused(row: int) -> None:
    with pytest.raises(InvalidTableError, match="out of range"):
        serialize([row])


def test_a_truncated_or_unknown_bitmap_names_where() -> None:
    data = serialize(range(10))
    with pytest.raises(InvalidTableError, match=r"dv\.bin at 1"):
        deserialize(data[:-3], where="dv.bin at 1")
    with pytest.raises(InvalidTableError, match="magic"):
        deserialize(b"\0\0\0\0" + data[4:])
