"""A row-level rebase writes its deletion vectors once, when it publishes (no Spark, no JVM).

Seed 000 (row-level concurrency): on a table with deletion vectors, UPDATE, DELETE and MERGE
"solo pueden entrar en conflicto cuando intentan modificar la misma fila". A DML that loses the
race to writers changing other rows of the same file is rebased: its vector becomes the union
of theirs and its own. Settling against each winner only plans that union; the commit loop
writes it, in one DV file, just before it publishes, so no winner leaves an orphan vector.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from deltatx.kernel.actions import AddFile
from deltatx.kernel.commits import PendingCommit, WinningCommit
from deltatx.kernel.deletion_vectors import descriptor_location
from deltatx.kernel.operations import Operation, OperationName
from deltatx.kernel.row_level.plan import RebasePlan
from deltatx.kernel.row_level.rules import checker_for
from deltatx.log.commit import settle
from deltatx.log.deletion_vectors import DvReader, write_dvs
from deltatx.log.delta_log import DeltaLog
from deltatx.log.row_level.vectors import (
    NOTHING_WRITTEN,
    discard_unpublished,
    own_rows,
    write_planned_vectors,
)
from deltatx.log.transaction import OptimisticTransaction
from deltatx.storage import LocalLogStore

from ...dvtables import (
    data_file,
    dv_table,
    files_under,
    ids_in,
    live,
    pending_of,
    stage_compaction,
    stage_delete,
    unreferenced,
)

PATH = "part-0.parquet"


def _deleted_rows(log: DeltaLog) -> set[int]:
    return set(DvReader(log).rows_of(live(log, PATH)))


def _race(log: DeltaLog, rows: set[int], winners: int) -> PendingCommit:
    """A DELETE of ``rows`` that read version 0, after ``winners`` DELETEs of one other row
    each (1, 2, ...) committed."""
    loser = stage_delete(log, PATH, rows)
    for row in range(1, winners + 1):
        stage_delete(log, PATH, {row}).commit()
    return pending_of(loser)


def _settle(log: DeltaLog, pending: PendingCommit) -> RebasePlan:
    plan, checker = RebasePlan(pending), checker_for(pending)
    for version in range(pending.read_version + 1, log.latest_version() + 1):
        winner = WinningCommit(version, tuple(log.read_commit(version)))
        settled = settle(log, checker, plan, winner)
        plan, checker = settled.plan, settled.checker
    return plan


def _planned(log: DeltaLog, rows: set[int], winners: int) -> RebasePlan:
    return _settle(log, _race(log, rows, winners))


def test_rebase_over_20_winners_leaves_no_orphan_vector(tmp_path: Path) -> None:
    """Seed 000: DML on different rows of one file do not conflict. Twenty winners delete
    other rows while a DELETE waits; it lands with every row deleted, and under the table
    root no file is left that the log does not reference, except the staged vector of a
    transaction still in flight."""
    root = tmp_path / "t"
    log, _ = dv_table(root, ids=list(range(40)))
    loser = stage_delete(log, PATH, {0})
    in_flight = stage_delete(log, PATH, {39})  # never commits: its vector is not ours
    for row in range(1, 21):
        stage_delete(log, PATH, {row}).commit()
    assert loser.commit() == 21
    assert loser.result is not None and loser.result.attempts == 2
    assert _deleted_rows(log) == set(range(21))
    pending_dv = next(a for a in in_flight.staged_actions() if isinstance(a, AddFile))
    assert pending_dv.deletion_vector is not None
    assert unreferenced(root, log) == {descriptor_location(pending_dv.deletion_vector)}


def test_a_dml_moved_onto_a_compaction_output_leaves_no_orphan_vector(tmp_path: Path) -> None:
    """Seed 000: OPTIMIZE does not conflict with DML on a table with deletion vectors. The
    DELETE lands on the compaction's output; its staged vector on the source is superseded
    and removed."""
    root = tmp_path / "t"
    log, _ = dv_table(root, ids=list(range(10)))
    loser = stage_delete(log, PATH, {3})
    stage_compaction(log, root, PATH, "compacted.parquet", list(range(10))).commit()
    assert loser.commit() == 2
    assert [a.path for a in log.snapshot().add_files()] == ["compacted.parquet"]
    assert set(DvReader(log).rows_of(live(log, "compacted.parquet"))) == {3}
    assert unreferenced(root, log) == set()


def test_a_staged_vector_file_still_referenced_is_kept(tmp_path: Path) -> None:
    """One DELETE's vectors share one DV file; when only one of its files is rebased, the
    file stays, since the other file's vector in the published commit lives in it."""
    root = tmp_path / "t"
    log, a = dv_table(root, ids=list(range(10)))
    b = data_file(root, "part-1.parquet", list(range(10, 20)))
    txn = OptimisticTransaction(log, log.snapshot())
    txn.add_files([b])
    txn.record_operation(Operation(OperationName.WRITE, {}), {})
    txn.commit()
    loser = OptimisticTransaction(log, log.snapshot())
    loser.scan(ids_in({1, 11}))
    dv_a, dv_b = write_dvs(log, [{1}, {1}])
    loser.remove_files([a, b])
    loser.add_files([replace(a, deletion_vector=dv_a), replace(b, deletion_vector=dv_b)])
    loser.record_row_level([a, b], {a.path: [1], b.path: [1]})
    loser.record_operation(Operation(OperationName.DELETE, {}), {})
    stage_delete(log, PATH, {5}).commit()
    loser.commit()
    reader = DvReader(log)
    assert reader.rows_of(live(log, PATH)) == frozenset({1, 5})
    assert reader.rows_of(live(log, b.path)) == frozenset({1})
    assert (root / descriptor_location(dv_b)).exists()
    assert unreferenced(root, log) == set()


class _RacingStore(LocalLogStore):
    """Runs a callback just before each of the next commit-file writes."""

    def __init__(self) -> None:
        super().__init__(fsync=False)
        self.before_commit: list[Callable[[], object]] = []

    def write(self, path: str, data: bytes, *, overwrite: bool = False) -> None:
        if path.endswith(".json") and "/_delta_log/" in path and self.before_commit:
            self.before_commit.pop(0)()
        super().write(path, data, overwrite=overwrite)


def test_an_attempt_lost_after_rebasing_deletes_its_unpublished_vector(tmp_path: Path) -> None:
    """A rebased attempt that loses again settles again; the vector it wrote for the lost
    attempt was never published, so it is deleted and only the published one remains."""
    store = _RacingStore()
    root = tmp_path / "t"
    log, _ = dv_table(root, ids=list(range(10)), store=store)
    loser = stage_delete(log, PATH, {0})
    stage_delete(log, PATH, {1}).commit()
    other = DeltaLog.for_table(str(root), store=LocalLogStore(fsync=False))
    # Attempt 1 loses to version 1; attempt 2 (rebased, its vector written) to version 2.
    store.before_commit = [lambda: None, lambda: stage_delete(other, PATH, {2}).commit()]
    assert loser.commit() == 3
    assert loser.result is not None and loser.result.attempts == 3
    assert _deleted_rows(log) == {0, 1, 2}
    assert unreferenced(root, log) == set()


def test_settling_writes_nothing_and_the_plan_holds_the_union(tmp_path: Path) -> None:
    """Settling against winners only plans the vectors: no file appears until they are
    written for the commit, and then exactly one DV file."""
    root = tmp_path / "t"
    log, _ = dv_table(root, ids=list(range(10)))
    pending = _race(log, {0}, winners=5)
    before = files_under(root)
    plan = _settle(log, pending)
    assert files_under(root) == before
    assert dict(plan.vectors) == {PATH: frozenset(range(6))}
    written = write_planned_vectors(log, plan)
    assert written.location is not None
    new = {name for name, _ in files_under(root)} - {name for name, _ in before}
    assert new == {written.location}
    [add] = [a for a in written.actions(plan) if isinstance(a, AddFile)]
    assert set(DvReader(log).rows_of(add)) == set(range(6))


def test_the_same_plan_is_written_once(tmp_path: Path) -> None:
    """A retry whose plan did not change publishes the vector written for the last attempt."""
    log, _ = dv_table(tmp_path / "t", ids=list(range(10)))
    plan = _planned(log, {0}, winners=1)
    first = write_planned_vectors(log, plan)
    assert write_planned_vectors(log, plan, first) is first


def test_a_new_plan_replaces_the_unpublished_vector(tmp_path: Path) -> None:
    root = tmp_path / "t"
    log, _ = dv_table(root, ids=list(range(10)))
    plan = _planned(log, {0}, winners=1)
    first = write_planned_vectors(log, plan)
    assert first.location is not None and (root / first.location).exists()
    bigger = RebasePlan(plan.pending, {PATH: frozenset({0, 1, 7})})
    second = write_planned_vectors(log, bigger, first)
    assert not (root / first.location).exists()
    assert second.location is not None and (root / second.location).exists()
    discard_unpublished(log, second)
    assert not (root / second.location).exists()


def test_no_planned_vector_writes_nothing(tmp_path: Path) -> None:
    root = tmp_path / "t"
    log, _ = dv_table(root, ids=list(range(10)))
    pending = pending_of(stage_delete(log, PATH, {3}))
    before = files_under(root)
    written = write_planned_vectors(log, RebasePlan(pending))
    assert written is NOTHING_WRITTEN and files_under(root) == before
    assert written.actions(RebasePlan(pending)) == pending.actions


def test_vectors_written_for_another_plan_are_refused(tmp_path: Path) -> None:
    log, _ = dv_table(tmp_path / "t", ids=list(range(10)))
    plan = _planned(log, {0}, winners=1)
    with pytest.raises(ValueError, match="another plan"):
        NOTHING_WRITTEN.actions(plan)


def test_own_rows_reads_the_plan_first(tmp_path: Path) -> None:
    log, _ = dv_table(tmp_path / "t", ids=list(range(10)))
    plan = _planned(log, {0}, winners=2)
    [own_add] = [a for a in plan.pending.actions if isinstance(a, AddFile)]
    reader = DvReader(log)
    assert own_rows(reader, plan, own_add) == frozenset({0, 1, 2})
    assert reader.rows_of(own_add) == frozenset({0})  # the staged, now stale, descriptor
