"""Helpers for row-level tests without Spark: a table with deletion vectors on, real Parquet
data files (pyarrow), and deletion-vector DML staged the way ``mark_deleted`` stages it."""

from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from deltatx.kernel.actions import AddFile, Metadata, RemoveFile
from deltatx.kernel.commits import PendingCommit
from deltatx.kernel.deletion_vectors import descriptor_location
from deltatx.kernel.expressions import Column, Expression, In, Literal
from deltatx.kernel.features import DEFAULT_PROTOCOL, protocol_for_configuration
from deltatx.kernel.isolation import IsolationLevel
from deltatx.kernel.operations import Operation, OperationName
from deltatx.kernel.row_level.provenance import SOURCES_TAG, encode_sources
from deltatx.log.deletion_vectors import DvReader, write_dvs
from deltatx.log.delta_log import DeltaLog
from deltatx.log.transaction import OptimisticTransaction
from deltatx.storage import LocalLogStore, LogStore

SCHEMA = json.dumps(
    {
        "type": "struct",
        "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}}],
    }
)


def data_file(root: Path, name: str, ids: list[int]) -> AddFile:
    """Writes ``ids`` as one Parquet file under ``root``; its add, with exact statistics."""
    pq.write_table(pa.table({"id": pa.array(ids, pa.int64())}), root / name)
    stats = {
        "numRecords": len(ids),
        "minValues": {"id": min(ids)},
        "maxValues": {"id": max(ids)},
        "nullCount": {"id": 0},
    }
    return AddFile(
        path=name,
        partition_values={},
        size=(root / name).stat().st_size,
        modification_time=int(time.time() * 1000),
        data_change=True,
        stats=json.dumps(stats),
    )


def dv_table(
    root: Path,
    *,
    ids: list[int],
    level: IsolationLevel = IsolationLevel.WRITE_SERIALIZABLE,
    store: LogStore | None = None,
) -> tuple[DeltaLog, AddFile]:
    """A new unpartitioned table with deletion vectors on and one data file holding ``ids``."""
    root.mkdir()
    conf = {"delta.enableDeletionVectors": "true", "delta.isolationLevel": level.value}
    log = DeltaLog.for_table(str(root), store=store or LocalLogStore(fsync=False))
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
    f = data_file(root, "part-0.parquet", ids)
    txn.add_files([f])
    txn.record_operation(Operation(OperationName.WRITE, {}), {})
    txn.commit()
    return log, f


def live(log: DeltaLog, path: str) -> AddFile:
    """The file entry in force for ``path`` at the latest version."""
    return next(a for a in log.snapshot().add_files() if a.path == path)


def ids_in(rows: set[int]) -> Expression:
    """``id IN (rows)``: in these tables row ``i`` of the first file holds ``id = i``."""
    return In(Column("id"), tuple(Literal(r) for r in sorted(rows)))


def stage_delete(
    log: DeltaLog, path: str, rows: set[int], *, predicate: Expression | None = None
) -> OptimisticTransaction:
    """A deletion-vector DELETE of ``rows`` of ``path``: its vector written, not committed.

    It scans with ``predicate`` (default ``id IN (rows)``) and records ``rows`` as matched.
    """
    current = live(log, path)
    txn = OptimisticTransaction(log, log.snapshot())
    txn.scan(ids_in(rows) if predicate is None else predicate)
    [dv] = write_dvs(log, [DvReader(log).rows_of(current) | rows])
    txn.remove_files([current])
    txn.add_files([replace(current, deletion_vector=dv, data_change=True)])
    txn.record_row_level([current], {current.path: sorted(rows)})
    txn.record_operation(Operation(OperationName.DELETE, {}), {})
    return txn


def stage_compaction(
    log: DeltaLog, root: Path, path: str, output_path: str, ids: list[int]
) -> OptimisticTransaction:
    """An OPTIMIZE of ``path`` into ``output_path`` (holding ``ids``, its live rows), staged
    with the provenance tag a real compaction writes."""
    source = live(log, path)
    live_rows = len(ids)
    output = replace(
        data_file(root, output_path, ids),
        data_change=False,
        tags={SOURCES_TAG: encode_sources([(path, live_rows, source.deletion_vector)])},
    )
    txn = OptimisticTransaction(log, log.snapshot())
    txn.scan()
    txn.remove_files([source], data_change=False)
    txn.add_files([output])
    txn.record_operation(Operation(OperationName.OPTIMIZE, {}), {})
    return txn


def pending_of(txn: OptimisticTransaction, *, deletion_vectors: bool = True) -> PendingCommit:
    """The pending commit ``txn`` would try to publish (as the commit loop builds it)."""
    assert txn.snapshot is not None
    return PendingCommit(
        read_version=txn.snapshot.version,
        read_set=txn.tracker.freeze(),
        actions=tuple(txn.staged_actions()),
        operation=txn.operation(),
        isolation_level=txn.snapshot.properties.isolation_level,
        is_blind_append=False,
        schema=txn.snapshot.schema,
        partition_columns=txn.snapshot.partition_columns,
        deletion_vectors=deletion_vectors,
    )


def referenced(log: DeltaLog) -> set[str]:
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


def unreferenced(root: Path, log: DeltaLog) -> set[str]:
    """Files under the table root, outside ``_delta_log``, that no commit names."""
    present = {
        str(p.relative_to(root))
        for p in root.rglob("*")
        if p.is_file() and "_delta_log" not in p.parts
    }
    return present - referenced(log)


def files_under(root: Path) -> list[tuple[str, int]]:
    """Every file under ``root`` with its size, to show that nothing was written."""
    return sorted(
        (str(p.relative_to(root)), p.stat().st_size) for p in root.rglob("*") if p.is_file()
    )
