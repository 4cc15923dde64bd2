"""What a winner did at row level: vector-only changes, and when nothing is left to settle."""

from __future__ import annotations

from dataclasses import replace

from deltatx.kernel.actions import AddFile, CommitInfo, DeletionVectorDescriptor
from deltatx.kernel.commits import WinningCommit
from deltatx.kernel.row_level.rules import RowLevelWork, dv_updates_of


def _dv(tag: str) -> DeletionVectorDescriptor:
    return DeletionVectorDescriptor("u", f"{tag:>22}", size_in_bytes=34, cardinality=1)


def _file(path: str, dv: DeletionVectorDescriptor | None = None) -> AddFile:
    return AddFile(path, {}, 10, 1, True, deletion_vector=dv)


def _winner(*actions: object) -> WinningCommit:
    return WinningCommit(version=3, actions=(CommitInfo(timestamp=1), *actions))  # type: ignore[arg-type]


def test_a_remove_and_add_of_one_path_with_a_new_vector_is_a_vector_update() -> None:
    before = _file("a", _dv("one"))
    after = _file("a", _dv("two"))
    updates = dv_updates_of(_winner(before.remove(timestamp=5), after))
    assert set(updates) == {"a"}
    assert updates["a"].before.dv_id == before.dv_id and updates["a"].after is after


def test_other_changes_are_not_vector_updates() -> None:
    a = _file("a", _dv("one"))
    rewritten = _winner(a.remove(timestamp=5), _file("b", _dv("two")))
    unchanged = _winner(a.remove(timestamp=5), a)
    no_data_change = _winner(
        a.remove(timestamp=5, data_change=False), replace(_file("a", _dv("two")), data_change=False)
    )
    for winner in (rewritten, unchanged, no_data_change):
        assert dv_updates_of(winner) == {}


def test_work_without_anything_to_read_is_empty() -> None:
    winner = _winner()
    assert RowLevelWork(winner).is_empty
    assert not RowLevelWork(winner, appended=(_file("x"),)).is_empty
