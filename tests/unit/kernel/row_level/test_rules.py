"""The row-level checker's rules: which winner/loser pairs are left to rows, which stay
file-level conflicts (seed 000: OPTIMIZE vs UPDATE, DELETE and MERGE "no puede entrar en
conflicto" unless ZORDER BY is used; DML vs DML on partitioned tables stays per file)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from deltatx.errors import ConcurrentDeleteDeleteException, ConcurrentDeleteReadException
from deltatx.kernel.actions import AddFile, CommitInfo, DeletionVectorDescriptor
from deltatx.kernel.commits import PendingCommit, WinningCommit
from deltatx.kernel.conflicts import ConflictChecker
from deltatx.kernel.expressions import TRUE
from deltatx.kernel.isolation import IsolationLevel
from deltatx.kernel.operations import Operation, OperationName
from deltatx.kernel.row_level.provenance import SOURCES_TAG, encode_sources
from deltatx.kernel.row_level.rules import RowLevelChecker, checker_for
from deltatx.kernel.transaction import ReadTracker

from ...conflict_harness import add, schema


def _output(path: str, sources: list[tuple[str, int]]) -> AddFile:
    tag = encode_sources([(p, n, None) for p, n in sources])
    return replace(add(path, dc=False), tags={SOURCES_TAG: tag})


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
