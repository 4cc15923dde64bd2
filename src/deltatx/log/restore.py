"""RESTORE: make the table's live files (and metadata) those of an earlier version again.

Restoring commits the difference as one new version: files live then but not now are
re-added, files live now but not then are removed, all with ``dataChange=true``. History is
kept; the restore is itself a commit that time travel can go back across.
"""

from __future__ import annotations

import time
from dataclasses import replace
from datetime import datetime

from deltatx.errors import InvalidArgumentError, VersionNotReadableError
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
    allow_missing_files: bool = False,
) -> RestoreMetrics:
    """Stages a RESTORE to ``version`` or ``timestamp`` into ``txn``.

    Every data and deletion vector file the restored version needs back must still exist, as
    delta-spark checks: a restore that re-adds vacuumed files would leave the table unreadable.

    Args:
        txn: The transaction to stage into.
        version: The version to restore.
        timestamp: Or the timestamp whose version to restore.
        allow_missing_files: Restore even when some of those files are gone (the table is
            then unreadable until they are put back or removed).

    Raises:
        InvalidArgumentError: Neither or both of version and timestamp.
        VersionNotReadableError: Files the old version needs were removed (by VACUUM); the
            message names them.
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
    missing = [] if allow_missing_files else log.missing_files(to_add)
    if missing:
        shown = ", ".join(missing[:5]) + (
            f", ... ({len(missing)} in all)" if len(missing) > 5 else ""
        )
        raise VersionNotReadableError(
            f"cannot restore to version {target.version}: files it needs were removed, "
            f"probably by VACUUM: {shown}. Pass allow_missing_files=True to restore anyway.",
            version=target.version,
            missing_files=tuple(missing),
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
    return replace(f, data_change=True, modification_time=max(f.modification_time, 0) or now)
