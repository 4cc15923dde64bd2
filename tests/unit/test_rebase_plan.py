"""A row-level rebase writes its deletion vectors once, when it publishes (no Spark, no JVM).

Seed 000 (row-level concurrency): on a table with deletion vectors, UPDATE, DELETE and MERGE
"solo pueden entrar en conflicto cuando intentan modificar la misma fila". A DML that loses the
race to writers changing other rows of the same file is rebased: its vector becomes the union
of theirs and its own. Settling against each winner only plans that union; the commit loop
writes it, in one DV file, just before it publishes, so no winner leaves an orphan vector.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from deltatx.kernel.actions import AddFile, Metadata, RemoveFile
from deltatx.kernel.conflicts import PendingCommit, WinningCommit
from deltatx.kernel.conflicts_row_level import RebasePlan, checker_for
from deltatx.kernel.deletion_vectors import descriptor_location
from deltatx.kernel.features import DEFAULT_PROTOCOL, protocol_for_configuration
from deltatx.kernel.isolation import IsolationLevel
from deltatx.kernel.operations import Operation, OperationName
from deltatx.log.commit import settle
from deltatx.log.deletion_vectors import DvReader, write_dvs
from deltatx.log.delta_log import DeltaLog
from deltatx.log.row_level import write_planned_vectors
from deltatx.log.transaction import OptimisticTransaction
from deltatx.storage import LocalLogStore

ROWS = 40
SCHEMA = json.dumps(
    {
        "type": "struct",
        "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}}],
    }
)


def _table(root: Path, store: LocalLogStore) -> tuple[DeltaLog, AddFile]:
    root.mkdir()
    conf = {"delta.enableDeletionVectors": "true"}
    log = DeltaLog.for_table(str(root), store=store)
    txn = OptimisticTransaction(log, None)
    txn.update_protocol(protocol_for_configuration(conf, DEFAULT_PROTOCOL))
    txn.update_metadata(
        Metadata(
            id="11111111-2222-3333-4444-555555555555",
            schema_string=SCHEMA,
            partition_columns=(),
            configuration=conf,
            created_time=int(time.time() * 1000),
        )
    )
    pq.write_table(pa.table({"id": pa.array(range(ROWS), pa.int64())}), root / "part-0.parquet")
    f = AddFile(
        path="part-0.parquet",
        partition_values={},
        size=(root / "part-0.parquet").stat().st_size,
        modification_time=int(time.time() * 1000),
        data_change=True,
        stats=json.dumps({"numRecords": ROWS}),
    )
    txn.add_files([f])
    txn.record_operation(Operation(OperationName.WRITE, {}), {})
    txn.commit()
    return log, f


def _dml(log: DeltaLog, rows: set[int]) -> OptimisticTransaction:
    """A deletion-vector DELETE of ``rows``, staged (its vector written) but not committed."""
    current = log.snapshot().add_files()[0]
    txn = OptimisticTransaction(log, log.snapshot())
    [dv] = write_dvs(log, [DvReader(log).rows_of(current) | rows])
    txn.remove_files([current])
    txn.add_files([replace(current, deletion_vector=dv, data_change=True)])
    txn.record_row_level([current], {current.path: sorted(rows)})
    txn.record_operation(Operation(OperationName.DELETE, {}), {})
    return txn


def _referenced(log: DeltaLog) -> set[str]:
    """Every file the log names: data files and DV files of every add and remove, ever."""
    out: set[str] = set()
    for version in range(log.latest_version() + 1):
        for a in log.read_commit(version):
            if isinstance(a, AddFile | RemoveFile):
                out.add(a.path)
                dv = a.deletion_vector
                if dv is not None and dv.storage_type == "u":
                    out.add(descriptor_location(dv))
    return out


def _unreferenced(root: Path, log: DeltaLog) -> set[str]:
    present = {
        str(p.relative_to(root))
        for p in root.rglob("*")
        if p.is_file() and "_delta_log" not in p.parts
    }
    return present - _referenced(log)


def _deleted_rows(log: DeltaLog) -> set[int]:
    [live] = log.snapshot().add_files()
    return set(DvReader(log).rows_of(live))


def test_rebase_over_20_winners_leaves_no_orphan_vector(tmp_path: Path) -> None:
    """Seed 000: DML on different rows of one file do not conflict. Twenty winners delete
    other rows while a DELETE waits; it lands with every row deleted, and under the table
    root no file is left that the log does not reference, except the staged vector of a
    transaction still in flight."""
    root = tmp_path / "t"
    log, _ = _table(root, LocalLogStore(fsync=False))
    loser = _dml(log, {0})
    in_flight = _dml(log, {39})  # never commits: its vector is not ours to delete
    for row in range(1, 21):
        _dml(log, {row}).commit()
    version = loser.commit()
    assert version == 21 and loser.result is not None and loser.result.attempts == 2
    assert _deleted_rows(log) == set(range(21))
    [live] = log.snapshot().add_files()
    assert live.deletion_vector is not None
    staged = in_flight.staged_actions()
    pending_dv = next(a for a in staged if isinstance(a, AddFile)).deletion_vector
    assert pending_dv is not None
    assert _unreferenced(root, log) == {descriptor_location(pending_dv)}


class _RacingStore(LocalLogStore):
    """Lets a callback commit a winner just before the loser's next commit attempt."""

    def __init__(self) -> None:
        super().__init__(fsync=False)
        self.before_commit: list[Callable[[], object]] = []

    def write(self, path: str, data: bytes, *, overwrite: bool = False) -> None:
        if path.endswith(".json") and "_delta_log" in path and self.before_commit:
            hook = self.before_commit.pop(0)
            hook()
        super().write(path, data, overwrite=overwrite)


def test_an_attempt_lost_after_rebasing_deletes_its_unpublished_vector(tmp_path: Path) -> None:
    """A rebased attempt that loses again settles again; the vector it wrote for the lost
    attempt was never published, so it is deleted and only the published one remains."""
    store = _RacingStore()
    root = tmp_path / "t"
    log, _ = _table(root, store)
    loser = _dml(log, {0})
    _dml(log, {1}).commit()
    other = DeltaLog.for_table(str(root), store=LocalLogStore(fsync=False))
    # Attempt 1 loses to version 1; attempt 2 (rebased, its vector written) to version 2.
    store.before_commit = [lambda: None, lambda: _dml(other, {2}).commit()]
    assert loser.commit() == 3
    assert loser.result is not None and loser.result.attempts == 3
    assert _deleted_rows(log) == {0, 1, 2}
    assert _unreferenced(root, log) == set()


def test_settling_writes_nothing(tmp_path: Path) -> None:
    """Settling against winners only plans the vectors: no file appears until they are
    written for the commit, and then in one DV file."""
    root = tmp_path / "t"
    log, _ = _table(root, LocalLogStore(fsync=False))
    loser = _dml(log, {0})
    for row in range(1, 6):
        _dml(log, {row}).commit()
    before = sorted(p for p in root.rglob("*") if p.is_file())
    [staged_add] = [a for a in loser.staged_actions() if isinstance(a, AddFile)]
    pending = PendingCommit(
        read_version=0,
        read_set=loser.tracker.freeze(),
        actions=tuple(loser.staged_actions()),
        operation=Operation(OperationName.DELETE, {}),
        isolation_level=IsolationLevel.WRITE_SERIALIZABLE,
        is_blind_append=False,
        schema=log.snapshot(0).schema,
        partition_columns=(),
        deletion_vectors=True,
    )
    plan = RebasePlan(pending)
    checker = checker_for(pending)
    for version in range(1, 6):
        winner = WinningCommit(version, tuple(log.read_commit(version)))
        settled = settle(log, checker, plan, winner)
        plan, checker = settled.plan, settled.checker
    assert sorted(p for p in root.rglob("*") if p.is_file()) == before
    assert dict(plan.vectors) == {staged_add.path: frozenset(range(6))}
    written = write_planned_vectors(log, plan)
    assert written.location is not None
    after = sorted(p for p in root.rglob("*") if p.is_file())
    assert [p for p in after if p not in before] == [root / written.location]
    [add] = [a for a in written.actions(plan) if isinstance(a, AddFile)]
    assert set(DvReader(log).rows_of(add)) == set(range(6))
