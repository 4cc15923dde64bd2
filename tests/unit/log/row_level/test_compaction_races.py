"""OPTIMIZE vs DML on a table with deletion vectors, in either commit order (no Spark).

Seed 000: with deletion vectors OPTIMIZE "no puede entrar en conflicto" with UPDATE, DELETE
and MERGE unless it uses ZORDER BY. The compaction output's provenance says where each source
row went, so the rows one side deleted are carried to the other side by position, and the
plan holds the resulting vectors without writing them.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from deltatx.errors import ConcurrentDeleteDeleteException
from deltatx.kernel.actions import AddFile, RemoveFile
from deltatx.kernel.commits import PendingCommit, WinningCommit
from deltatx.kernel.operations import Operation, OperationName
from deltatx.kernel.row_level.plan import RebasePlan
from deltatx.kernel.row_level.rules import RowLevelChecker, checker_for
from deltatx.log.deletion_vectors import DvReader, write_dvs
from deltatx.log.delta_log import DeltaLog
from deltatx.log.row_level.resolution import resolve_row_level
from deltatx.log.transaction import OptimisticTransaction

from ...dvtables import dv_table, files_under, live, pending_of, stage_compaction, stage_delete

PATH = "part-0.parquet"
OUTPUT = "compacted.parquet"


def _resolve(log: DeltaLog, pending: PendingCommit, version: int) -> RebasePlan:
    checker = checker_for(pending)
    assert isinstance(checker, RowLevelChecker)
    winner = WinningCommit(version, tuple(log.read_commit(version)))
    return resolve_row_level(log, RebasePlan(pending), checker.check_row_level(winner))


def _files(plan: RebasePlan) -> list[tuple[str, str]]:
    return sorted(
        (type(a).__name__, a.path)
        for a in plan.pending.actions
        if isinstance(a, AddFile | RemoveFile)
    )


def test_a_dml_after_a_compaction_moves_its_rows_onto_the_output(tmp_path: Path) -> None:
    root = tmp_path / "t"
    log, _ = dv_table(root, ids=list(range(10)))
    stage_delete(log, PATH, {1}).commit()  # before both: the output skips row 1
    pending = pending_of(stage_delete(log, PATH, {3}))
    version = stage_compaction(log, root, PATH, OUTPUT, [0, *range(2, 10)]).commit()
    before = files_under(root)
    plan = _resolve(log, pending, version)
    assert files_under(root) == before
    assert _files(plan) == [("AddFile", OUTPUT), ("RemoveFile", OUTPUT)]
    assert dict(plan.vectors) == {OUTPUT: frozenset({2})}  # row 3 is the output's third row
    assert dict(plan.pending.read_set.row_level_rows) == {OUTPUT: frozenset({2})}


def test_a_compaction_after_a_dml_deletes_the_dml_rows_from_its_output(tmp_path: Path) -> None:
    root = tmp_path / "t"
    log, _ = dv_table(root, ids=list(range(10)))
    pending = pending_of(stage_compaction(log, root, PATH, OUTPUT, list(range(10))))
    version = stage_delete(log, PATH, {4, 6}).commit()
    plan = _resolve(log, pending, version)
    assert dict(plan.vectors) == {OUTPUT: frozenset({4, 6})}
    [remove] = [a for a in plan.pending.actions if isinstance(a, RemoveFile)]
    assert remove.dv_id == live(log, PATH).dv_id and not remove.data_change
    assert PATH in plan.pending.compaction_baseline


def test_a_compaction_whose_source_lost_every_row_adds_nothing(tmp_path: Path) -> None:
    root = tmp_path / "t"
    log, f = dv_table(root, ids=list(range(3)))
    pending = pending_of(stage_compaction(log, root, PATH, OUTPUT, list(range(3))))
    txn = OptimisticTransaction(log, log.snapshot())
    txn.scan()
    txn.remove_files([f])
    txn.record_operation(Operation(OperationName.DELETE, {}), {})
    version = txn.commit()
    plan = _resolve(log, pending, version)
    assert _files(plan) == [] and dict(plan.vectors) == {}


def test_a_winner_that_restores_compacted_rows_conflicts(tmp_path: Path) -> None:
    root = tmp_path / "t"
    log, _ = dv_table(root, ids=list(range(10)))
    stage_delete(log, PATH, {1, 2}).commit()
    pending = pending_of(stage_compaction(log, root, PATH, OUTPUT, [0, *range(3, 10)]))
    current = live(log, PATH)
    [fewer] = write_dvs(log, [{1}])
    txn = OptimisticTransaction(log, log.snapshot())
    txn.remove_files([current])
    txn.add_files([replace(current, deletion_vector=fewer)])
    txn.record_operation(Operation(OperationName.RESTORE, {}), {})
    version = txn.commit()
    assert DvReader(log).rows_of(live(log, PATH)) == frozenset({1})
    with pytest.raises(ConcurrentDeleteDeleteException) as caught:
        _resolve(log, pending, version)
    assert caught.value.file == PATH
