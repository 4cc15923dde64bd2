"""Helpers for row-level tests: a deletion-vector table of real Parquet files, no Spark."""

from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from deltatx.kernel.actions import AddFile, Metadata
from deltatx.kernel.expressions import Column, Comparison, ComparisonOp, Expression, In, Literal
from deltatx.kernel.features import DEFAULT_PROTOCOL, protocol_for_configuration
from deltatx.kernel.operations import Operation, OperationName
from deltatx.log.deletion_vectors import DvReader, write_dvs
from deltatx.log.delta_log import DeltaLog
from deltatx.log.transaction import OptimisticTransaction
from deltatx.storage import LocalLogStore

SCHEMA = json.dumps(
    {
        "type": "struct",
        "fields": [
            {"name": "id", "type": "long", "nullable": True, "metadata": {}},
            {"name": "v", "type": "long", "nullable": True, "metadata": {}},
        ],
    }
)


def id_in(*ids: int) -> Expression:
    return In(Column("id"), tuple(Literal(i) for i in ids))


def id_eq(value: int) -> Expression:
    return Comparison(ComparisonOp.EQ, Column("id"), Literal(value))


def data_file(root: Path, name: str, ids: list[int]) -> AddFile:
    """Writes ``ids`` (and ``v = id * 10``) to ``root/name`` and returns its ``add``."""
    pq.write_table(
        pa.table({"id": pa.array(ids, pa.int64()), "v": pa.array([i * 10 for i in ids])}),
        root / name,
    )
    stats = {
        "numRecords": len(ids),
        "minValues": {"id": min(ids), "v": min(ids) * 10},
        "maxValues": {"id": max(ids), "v": max(ids) * 10},
        "nullCount": {"id": 0, "v": 0},
    }
    return AddFile(
        path=name,
        partition_values={},
        size=(root / name).stat().st_size,
        modification_time=int(time.time() * 1000),
        data_change=True,
        stats=json.dumps(stats),
    )


def dv_table(tmp_path: Path, rows: int = 10) -> tuple[DeltaLog, AddFile]:
    """A table with deletion vectors on and one file of ``rows`` rows (ids 0..rows-1)."""
    root = tmp_path / "t"
    root.mkdir()
    conf = {"delta.enableDeletionVectors": "true"}
    log = DeltaLog.for_table(str(root), store=LocalLogStore(fsync=False))
    txn = OptimisticTransaction(log, None)
    txn.update_protocol(protocol_for_configuration(conf, DEFAULT_PROTOCOL))
    txn.update_metadata(Metadata(id="t", schema_string=SCHEMA, configuration=conf))
    f = data_file(root, "part-0.parquet", list(range(rows)))
    txn.add_files([f])
    txn.record_operation(Operation(OperationName.WRITE, {}), {})
    txn.commit()
    return log, f


def stage_delete(txn: OptimisticTransaction, path: str, rows: set[int]) -> None:
    """Stages a row-level DELETE of ``rows`` of file ``path``, as DV DML does."""
    [current] = [a for a in txn.scan(None) if a.path == path]
    reader = DvReader(txn.log)
    [dv] = write_dvs(txn.log, [reader.rows_of(current) | rows])
    txn.record_row_level([current], {path: rows})
    txn.remove_files([current])
    txn.add_files([replace(current, deletion_vector=dv)])
    txn.record_operation(Operation(OperationName.DELETE, {}), {})


def deleted_rows(log: DeltaLog) -> dict[str, frozenset[int]]:
    """Each live file's deleted rows in the latest version."""
    reader = DvReader(log)
    return {f.path: reader.rows_of(f) for f in log.snapshot().add_files()}
