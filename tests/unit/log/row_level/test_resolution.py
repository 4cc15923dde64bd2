"""Row-level resolution reads the rows a winner changed and settles it (no Spark, no JVM).

Seed 000 (row-level concurrency): on tables with deletion vectors UPDATE, DELETE and MERGE
"solo pueden entrar en conflicto cuando intentan modificar la misma fila"; UPDATE, DELETE and
MERGE cannot conflict with INSERT under WriteSerializable, while under Serializable a
concurrently added row that the condition matches is a conflict. Each case says which rows.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from deltatx.errors import (
    ConcurrentAppendException,
    ConcurrentDeleteDeleteException,
    ConcurrentDeleteReadException,
    InvalidTableError,
)
from deltatx.kernel.actions import AddFile, RemoveFile
from deltatx.kernel.commits import PendingCommit, WinningCommit
from deltatx.kernel.isolation import IsolationLevel
from deltatx.kernel.operations import Operation, OperationName
from deltatx.kernel.row_level.plan import RebasePlan
from deltatx.kernel.row_level.rules import RowLevelChecker, checker_for
from deltatx.kernel.schema import StructType
from deltatx.log.deletion_vectors import DvReader
from deltatx.log.delta_log import DeltaLog
from deltatx.log.row_level.resolution import matching_rows, resolve_row_level
from deltatx.log.transaction import OptimisticTransaction

from ...dvtables import (
    data_file,
    dv_table,
    files_under,
    ids_in,
    live,
    pending_of,
    stage_delete,
)

PATH = "part-0.parquet"


def _resolve(log: DeltaLog, pending: PendingCommit, version: int) -> RebasePlan:
    checker = checker_for(pending)
    assert isinstance(checker, RowLevelChecker)
    winner = WinningCommit(version, tuple(log.read_commit(version)))
    return resolve_row_level(log, RebasePlan(pending), checker.check_row_level(winner))


def test_same_rows_changed_by_both_conflict_and_name_the_rows(tmp_path: Path) -> None:
    log, _ = dv_table(tmp_path / "t", ids=list(range(10)))
    pending = pending_of(stage_delete(log, PATH, {2, 3}))
    stage_delete(log, PATH, {3, 4}).commit()
    with pytest.raises(ConcurrentDeleteDeleteException) as caught:
        _resolve(log, pending, 1)
    assert caught.value.file == PATH and caught.value.rows == (3,)


def test_rows_only_read_that_a_winner_deleted_conflict_as_delete_read(tmp_path: Path) -> None:
    """This transaction matched row 5 of the file but changed another file."""
    root = tmp_path / "t"
    log, f = dv_table(root, ids=list(range(10)))
    other = data_file(root, "part-1.parquet", [100, 101])
    txn = OptimisticTransaction(log, log.snapshot())
    txn.add_files([other])
    txn.record_operation(Operation(OperationName.WRITE, {}), {})
    txn.commit()
    reader = OptimisticTransaction(log, log.snapshot())
    reader.scan(ids_in({5}))
    reader.record_row_level([f], {f.path: [5]})
    reader.remove_files([live(log, "part-1.parquet")])
    reader.record_operation(Operation(OperationName.DELETE, {}), {})
    pending = pending_of(reader)
    stage_delete(log, PATH, {5}).commit()
    with pytest.raises(ConcurrentDeleteReadException) as caught:
        _resolve(log, pending, 2)
    assert caught.value.file == PATH and caught.value.rows == (5,)


def test_other_rows_rebase_onto_the_winner_without_writing(tmp_path: Path) -> None:
    root = tmp_path / "t"
    log, _ = dv_table(root, ids=list(range(10)))
    pending = pending_of(stage_delete(log, PATH, {2}))
    stage_delete(log, PATH, {7}).commit()
    before = files_under(root)
    plan = _resolve(log, pending, 1)
    assert files_under(root) == before
    assert dict(plan.vectors) == {PATH: frozenset({2, 7})}
    [remove] = [a for a in plan.pending.actions if isinstance(a, RemoveFile)]
    assert remove.dv_id == live(log, PATH).dv_id  # names the entry the winner left in force


def test_a_file_removed_whole_against_a_vector_change_conflicts(tmp_path: Path) -> None:
    log, f = dv_table(tmp_path / "t", ids=list(range(4)))
    txn = OptimisticTransaction(log, log.snapshot())
    txn.scan(ids_in({0, 1, 2, 3}))
    txn.record_row_level([f], {f.path: [0, 1]})
    txn.remove_files([f])
    txn.record_operation(Operation(OperationName.DELETE, {}), {})
    pending = pending_of(txn)
    stage_delete(log, PATH, {3}).commit()
    with pytest.raises(ConcurrentDeleteDeleteException) as caught:
        _resolve(log, pending, 1)
    assert caught.value.file == PATH and caught.value.rows is None


def _append_ids(log: DeltaLog, root: Path, ids: list[int]) -> int:
    txn = OptimisticTransaction(log, log.snapshot())
    txn.add_files([data_file(root, f"part-{ids[0]}.parquet", ids)])
    txn.record_operation(Operation(OperationName.WRITE, {}), {})
    return txn.commit()


def test_serializable_conflicts_on_an_appended_row_the_condition_matches(
    tmp_path: Path,
) -> None:
    root = tmp_path / "t"
    log, _ = dv_table(root, ids=list(range(10)), level=IsolationLevel.SERIALIZABLE)
    pending = pending_of(stage_delete(log, PATH, {2}))
    version = _append_ids(log, root, [1, 2, 3])
    with pytest.raises(ConcurrentAppendException) as caught:
        _resolve(log, pending, version)
    assert caught.value.file == "part-1.parquet" and caught.value.rows == (1,)


def test_serializable_allows_appended_rows_the_condition_does_not_match(
    tmp_path: Path,
) -> None:
    root = tmp_path / "t"
    log, _ = dv_table(root, ids=list(range(10)), level=IsolationLevel.SERIALIZABLE)
    pending = pending_of(stage_delete(log, PATH, {2}, predicate=ids_in({2, 50})))
    version = _append_ids(log, root, [40, 60])  # statistics may match 50; no row does
    plan = _resolve(log, pending, version)
    assert plan.pending == pending and dict(plan.vectors) == {}


def test_write_serializable_never_checks_appended_rows(tmp_path: Path) -> None:
    root = tmp_path / "t"
    log, _ = dv_table(root, ids=list(range(10)))
    pending = pending_of(stage_delete(log, PATH, {2}))
    version = _append_ids(log, root, [1, 2, 3])
    assert _resolve(log, pending, version).pending == pending


def test_matching_rows_skips_deleted_rows_and_stops_at_the_limit(tmp_path: Path) -> None:
    log, _ = dv_table(tmp_path / "t", ids=list(range(10)))
    stage_delete(log, PATH, {1, 2}).commit()
    current, schema = live(log, PATH), log.snapshot().schema
    reader = DvReader(log)
    everything = ids_in(set(range(10)))
    assert matching_rows(log, reader, current, ids_in({0, 1, 2, 3}), schema) == [0, 3]
    assert matching_rows(log, reader, current, everything, schema, limit=2) == [0, 3]


def test_matching_rows_of_a_vacuumed_file_is_a_clear_error(tmp_path: Path) -> None:
    root = tmp_path / "t"
    log, f = dv_table(root, ids=list(range(3)))
    (root / PATH).unlink()
    with pytest.raises(InvalidTableError, match="does not exist"):
        matching_rows(log, DvReader(log), f, ids_in({1}), StructType(()))


def test_an_empty_work_returns_the_same_plan(tmp_path: Path) -> None:
    root = tmp_path / "t"
    log, _ = dv_table(root, ids=list(range(10)))
    pending = pending_of(stage_delete(log, PATH, {2}))
    # a winner touching another file only
    _append_ids(log, root, [40])
    plan = RebasePlan(pending)
    checker = checker_for(pending)
    assert isinstance(checker, RowLevelChecker)
    work = checker.check_row_level(WinningCommit(1, tuple(log.read_commit(1))))
    assert work.is_empty and resolve_row_level(log, plan, work) is plan
    assert all(isinstance(a, AddFile | RemoveFile) for a in plan.pending.actions)
