"""OPTIMIZE vs DML on a deletion-vector table: rows are followed, in either order (seed 000)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from deltatx.kernel.actions import AddFile
from deltatx.kernel.compaction import SOURCES_TAG, encode_sources
from deltatx.kernel.operations import Operation, OperationName
from deltatx.log.delta_log import DeltaLog
from deltatx.log.transaction import OptimisticTransaction

from ..dvtables import data_file, deleted_rows, dv_table, stage_delete


def _stage_compaction(log: DeltaLog, txn: OptimisticTransaction, source: AddFile) -> AddFile:
    """Compacts ``source`` (10 rows, none deleted) into one output that records provenance."""
    out = data_file(Path(log.table_path), "part-9.parquet", list(range(10)))
    out = replace(
        out, data_change=False, tags={SOURCES_TAG: encode_sources([(source.path, 10, None)])}
    )
    txn.remove_files([source], data_change=False)
    txn.add_files([out])
    txn.record_operation(Operation(OperationName.OPTIMIZE, {}), {})
    return out


def test_a_delete_that_read_before_a_compaction_follows_its_rows(tmp_path: Path) -> None:
    log, f = dv_table(tmp_path)
    read = log.snapshot()
    dml = OptimisticTransaction(log, read)
    stage_delete(dml, f.path, {4})
    compaction = OptimisticTransaction(log, read)
    out = _stage_compaction(log, compaction, f)
    compaction.commit()
    dml.commit()
    assert deleted_rows(log) == {out.path: frozenset({4})}


def test_a_compaction_that_read_before_a_delete_carries_the_deleted_rows(tmp_path: Path) -> None:
    log, f = dv_table(tmp_path)
    read = log.snapshot()
    compaction = OptimisticTransaction(log, read)
    out = _stage_compaction(log, compaction, f)
    dml = OptimisticTransaction(log, read)
    stage_delete(dml, f.path, {1, 8})
    dml.commit()
    compaction.commit()
    assert deleted_rows(log) == {out.path: frozenset({1, 8})}
