"""Compaction provenance: which rows of which source a compacted file holds, and where a
source row lands in the output (what lets OPTIMIZE race DML without a conflict, seed 000)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from deltatx.kernel.actions import AddFile, DeletionVectorDescriptor
from deltatx.kernel.row_level.provenance import (
    SOURCES_TAG,
    RowsNotLiveError,
    Segment,
    encode_sources,
    map_rows,
    segments_of,
    sources_by_path,
)

from ...conflict_harness import add


def _dv(tag: str) -> DeletionVectorDescriptor:
    return DeletionVectorDescriptor("u", tag * 20, 10, 1, offset=1)


def _output(path: str, sources: list[tuple[str, int]]) -> AddFile:
    tag = encode_sources([(p, n, None) for p, n in sources])
    return replace(add(path, dc=False), tags={SOURCES_TAG: tag})


def test_segments_accumulate_offsets() -> None:
    out = _output("o", [("a", 3), ("b", 0), ("c", 5)])
    c = Segment("c", 5, 3, vector_recorded=True)
    assert segments_of(out) == (
        Segment("a", 3, 0, vector_recorded=True),
        Segment("b", 0, 3, vector_recorded=True),
        c,
    )
    assert list(c.positions()) == [3, 4, 5, 6, 7]
    assert sources_by_path([out])["c"] == (out, c)


def test_segments_record_the_vector_each_source_was_read_with() -> None:
    """A compaction settled against a DML removes a newer vector than the one it skipped rows
    by, so the tag keeps the one it read; outputs from before that keep working."""
    inline = DeletionVectorDescriptor(
        "i", "wi5b=000010000siXQKl0rr91000f55c8Xg0@@D72lkbi5=-{L", 32, 2
    )
    stored = replace(_dv("x"), max_row_index=9, extra={"futureField": 1})
    tag = encode_sources([("a", 8, inline), ("b", 9, stored), ("c", 4, None)])
    segments = segments_of(replace(add("o"), tags={SOURCES_TAG: tag}))
    assert segments is not None
    assert [(s.vector, s.vector_recorded, s.offset) for s in segments] == [
        (inline, True, 0),
        (stored, True, 8),
        (None, True, 17),
    ]
    assert segments[1].vector is not None and segments[1].vector.extra == {"futureField": 1}
    legacy = segments_of(replace(add("o"), tags={SOURCES_TAG: '[["a",8]]'}))
    assert legacy == (Segment("a", 8, 0),) and not legacy[0].vector_recorded


@pytest.mark.parametrize(
    "raw",
    [
        "",
        "{}",
        "[[1, 2]]",
        '[["a", -1]]',
        '[["a", true]]',
        '[["a"]]',
        "[",
        '"x"',
        '[["a", 1, {"storageType": "z"}]]',
        '[["a", 1, {"storageType": "u"}]]',
        '[["a", 1, 7]]',
        '[["a", 1, null, 2]]',
    ],
)
def test_malformed_provenance_reads_as_none(raw: str) -> None:
    """A bad tag only makes conflicts coarser (file level), never wrong."""
    assert segments_of(replace(add("o"), tags={SOURCES_TAG: raw})) is None
    assert segments_of(add("o")) is None


def test_map_rows_skips_rows_deleted_at_compaction() -> None:
    seg = Segment("a", live_rows=7, offset=10)
    # physical rows 0..9 with 1, 4, 5 deleted: live are 0,2,3,6,7,8,9 -> output 10..16
    deleted = [1, 4, 5]
    assert map_rows([0, 2, 6, 9], deleted_at_compaction=deleted, segment=seg) == [10, 11, 13, 16]
    with pytest.raises(RowsNotLiveError) as info:
        map_rows([4, 6], deleted_at_compaction=deleted, segment=seg)
    assert info.value.rows == [4]
    with pytest.raises(RowsNotLiveError):
        map_rows([10], deleted_at_compaction=deleted, segment=seg)  # beyond the live rows
