"""RESTORE: make the table's live files (and metadata) those of an earlier version again.

Restoring commits the difference as one new version: files live then but not now are
re-added, files live now but not then are removed, all with ``dataChange=true``. History is
kept; the restore is itself a commit that time travel can go back across.
"""

from __future__ import annotations

import time
from datetime import datetime
from urllib.parse import unquote

from deltatx.errors import InvalidArgumentError
from deltatx.kernel.actions import AddFile
from deltatx.kernel.metrics import RestoreMetrics
from deltatx.kernel.operations import Operation, OperationName
from deltatx.log.delta_log import DeltaLog
from deltatx.log.transaction import OptimisticTransaction


def _key(f: AddFile) -> tuple[str, str | None]:
    return (f.path, f.dv_id)


def stage_restore(
    txn: OptimisticTransaction,
    *,
    version: int | None = None,
    timestamp: int | str | datetime | None = None,
) -> RestoreMetrics:
    """Stages a RESTORE to ``version`` or ``timestamp`` into ``txn``.

    Raises:
        InvalidArgumentError: Neither or both of version and timestamp, or a file the old
            version needs was already removed by VACUUM.
        VersionNotFoundError: The version or timestamp is not in the log.
    """
    started = time.monotonic()
    if (version is None) == (timestamp is None):
        raise InvalidArgumentError("restore needs exactly one of version or timestamp")
    log: DeltaLog = txn.log
    target = log.snapshot(version, timestamp=timestamp)
    current = {_key(f): f for f in txn.scan(None)}
    wanted = {_key(f): f for f in target.add_files()}
    to_add = [f for k, f in wanted.items() if k not in current]
    to_remove = [f for k, f in current.items() if k not in wanted]
    missing = [
        f.path
        for f in to_add
        if "://" not in f.path and not log.store.exists(f"{log.table_path}/{unquote(f.path)}")
    ]
    if missing:
        raise InvalidArgumentError(
            f"cannot restore to version {target.version}: {len(missing)} of its data files were "
            f"already deleted (e.g. {missing[0]}), probably by VACUUM"
        )
    now = int(time.time() * 1000)
    txn.remove_files(to_remove)
    txn.add_files([_as_restored(f, now) for f in to_add])
    if target.metadata != txn.metadata:
        txn.update_metadata(target.metadata)
    if (
        target.protocol.min_reader_version > txn.protocol.min_reader_version
        or target.protocol.min_writer_version > txn.protocol.min_writer_version
    ):
        txn.update_protocol(target.protocol)
    live_after = list(wanted.values())
    metrics = RestoreMetrics(
        num_added_files=len(to_add),
        num_removed_files=len(to_remove),
        table_size_after_restore=sum(f.size for f in live_after),
        num_of_files_after_restore=len(live_after),
        num_restored_files=len(to_add),
        restored_files_size=sum(f.size for f in to_add),
        removed_files_size=sum(f.size for f in to_remove),
        execution_time_ms=int((time.monotonic() - started) * 1000),
    )
    params = {"version": target.version, "timestamp": None if timestamp is None else str(timestamp)}
    txn.record_operation(Operation(OperationName.RESTORE, params), metrics.to_operation_metrics())
    return metrics


def _as_restored(f: AddFile, now: int) -> AddFile:
    from dataclasses import replace

    return replace(f, data_change=True, modification_time=max(f.modification_time, 0) or now)
