"""Row indexes kept as arrays: their bitmaps and the read set's lazy sets hold the same rows."""

from __future__ import annotations

import random

import numpy as np
import pytest
from pyroaring import BitMap64

from deltatx.kernel.actions import AddFile
from deltatx.kernel.transaction import ReadTracker
from deltatx.log.row_level.row_indexes import as_ints, row_bitmap


def _rows(seed: int) -> list[int]:
    rng = random.Random(seed)
    out: set[int] = set()
    for _ in range(rng.randint(0, 6)):
        start = rng.randint(0, 5_000)
        out.update(range(start, start + rng.randint(1, 3_000)))
    out.update(rng.randint(0, 10_000) for _ in range(rng.choice([0, 3, 500])))
    return sorted(out)


@pytest.mark.parametrize("seed", range(40))
def test_bitmap_of_an_array_holds_its_rows(seed: int) -> None:
    rows = _rows(seed)
    array = np.asarray(rows, dtype=np.int64)
    assert row_bitmap(array) == BitMap64(rows)
    assert row_bitmap(array[::-1].copy()) == BitMap64(rows)
    assert row_bitmap(rows) == BitMap64(rows)


def test_a_negative_row_is_refused_as_the_bitmap_refuses_it() -> None:
    with pytest.raises((OverflowError, ValueError)):
        row_bitmap(np.asarray([-1, 0, 1, 2], dtype=np.int64))


def test_read_set_rows_are_python_ints_made_when_asked() -> None:
    tracker = ReadTracker()
    files = [AddFile(p, {}, 1, 1, True) for p in ("a", "b", "c")]
    tracker.record_row_level(files, {"a": as_ints(np.arange(3, 6, dtype=np.int64))})
    tracker.record_row_level(files[:1], {"a": [1, 3]})
    rows = tracker.freeze().row_level_rows
    assert rows == {"a": frozenset({1, 3, 4, 5}), "b": frozenset(), "c": frozenset()}
    assert all(type(r) is int for r in rows["a"])
    assert "b" in rows and "d" not in rows and len(rows) == 3
    assert rows.get("d", frozenset({7})) == frozenset({7})
