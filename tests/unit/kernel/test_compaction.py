"""Compaction provenance (which rows of which source a compacted file holds) and the row-level
checker's choices for compactions racing DML (seed 000: OPTIMIZE vs UPDATE, DELETE and MERGE
"no puede entrar en conflicto" unless ZORDER BY is used)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from deltatx.errors import ConcurrentDeleteDeleteException, ConcurrentDeleteReadException
from deltatx.kernel.actions import AddFile, CommitInfo, DeletionVectorDescriptor
from deltatx.kernel.compaction import (
    SOURCES_TAG,
    RowsNotLiveError,
    Segment,
    encode_sources,
    map_rows,
    segments_of,
    sources_by_path,
)
from deltatx.kernel.conflicts import ConflictChecker, PendingCommit, WinningCommit
from deltatx.kernel.conflicts_row_level import RowLevelChecker, checker_for
from deltatx.kernel.expressions import TRUE
from deltatx.kernel.isolation import IsolationLevel
from deltatx.kernel.operations import Operation, OperationName
from deltatx.kernel.transaction import ReadTracker

from ..conflict_harness import add, schema


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


def _dv(tag: str) -> DeletionVectorDescriptor:
    return DeletionVectorDescriptor("u", tag * 20, 10, 1, offset=1)


def _pending(
    actions: tuple[object, ...],
    *,
    rows: dict[str, set[int]] | None = None,
    partitioned: bool = False,
    dv: bool = True,
    name: OperationName = OperationName.DELETE,
) -> PendingCommit:
    tracker = ReadTracker()
    files = [add("a"), add("b")]
    tracker.record_scan(TRUE, files)
    if rows is not None:
        tracker.record_row_level(files, rows)
    return PendingCommit(
        read_version=1,
        read_set=tracker.freeze(),
        actions=actions,  # type: ignore[arg-type]
        operation=Operation(name),
        isolation_level=IsolationLevel.WRITE_SERIALIZABLE,
        is_blind_append=False,
        schema=schema(id="long"),
        partition_columns=("p",) if partitioned else (),
        deletion_vectors=dv,
    )


def _winner(*actions: object) -> WinningCommit:
    return WinningCommit(2, (CommitInfo(operation="X"), *actions))  # type: ignore[arg-type]


def _dml_on_a() -> tuple[object, ...]:
    a = add("a")
    return (a.remove(timestamp=1), replace(a, deletion_vector=_dv("x")))


def test_dml_after_compaction_follows_the_rows() -> None:
    """The DML commits after OPTIMIZE compacted its file: settled by rows, not a conflict."""
    pending = _pending(_dml_on_a(), rows={"a": {2}})
    checker = checker_for(pending)
    assert isinstance(checker, RowLevelChecker)
    out = _output("o", [("a", 10), ("b", 10)])
    win = _winner(add("a").remove(timestamp=1, data_change=False), out)
    work = checker.check_row_level(win)
    assert [c.path for c in work.compacted] == ["a"]
    assert work.compacted[0].output == out


def test_dml_after_zorder_conflicts_at_file_level() -> None:
    """ZORDER BY writes no provenance: the race stays a file-level conflict (nothing lost)."""
    pending = _pending(_dml_on_a(), rows={"a": {2}})
    checker = checker_for(pending)
    assert isinstance(checker, RowLevelChecker)
    win = _winner(add("a").remove(timestamp=1, data_change=False), add("z", dc=False))
    with pytest.raises(ConcurrentDeleteDeleteException):
        checker.check_row_level(win)


def test_partitioned_dml_follows_compactions_but_not_other_dml() -> None:
    """Seed: partitioned tables avoid OPTIMIZE conflicts, yet DML vs DML stays per file."""
    pending = _pending(_dml_on_a(), rows={"a": {2}}, partitioned=True)
    checker = checker_for(pending)
    assert isinstance(checker, RowLevelChecker) and not checker.rows_resolvable
    out = _output("o", [("a", 10)])
    work = checker.check_row_level(_winner(add("a").remove(timestamp=1, data_change=False), out))
    assert len(work.compacted) == 1
    b = add("a")
    other = _winner(b.remove(timestamp=1), replace(b, deletion_vector=_dv("y")))
    with pytest.raises(ConcurrentDeleteDeleteException):
        checker.check_row_level(other)


def test_compaction_after_dml_carries_the_vector() -> None:
    """The OPTIMIZE commits after a DML changed one of its sources: settled by rows."""
    out = _output("o", [("a", 10), ("b", 10)])
    a, b = add("a"), add("b")
    actions = (
        a.remove(timestamp=1, data_change=False),
        b.remove(timestamp=1, data_change=False),
        out,
    )
    pending = _pending(actions, name=OperationName.OPTIMIZE)
    checker = checker_for(pending)
    assert isinstance(checker, RowLevelChecker) and checker.own_sources
    win = _winner(a.remove(timestamp=1), replace(a, deletion_vector=_dv("x")))
    work = checker.check_row_level(win)
    assert [(c.path, c.after is not None) for c in work.source_changes] == [("a", True)]
    # a file the compaction read but did not rewrite may change freely
    assert checker.check_row_level(_winner(add("c").remove(timestamp=1))).is_empty
    # without deletion vectors on the table, compaction keeps the file-level rules
    plain = checker_for(_pending(actions, name=OperationName.OPTIMIZE, dv=False))
    assert type(plain) is ConflictChecker
    with pytest.raises((ConcurrentDeleteDeleteException, ConcurrentDeleteReadException)):
        plain.check(win)
