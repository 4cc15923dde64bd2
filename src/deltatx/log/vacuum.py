"""VACUUM: delete files the table no longer references, once no reader can need them.

A file is deleted only if it lies under the table root (never through ``..`` or a symlink out),
is not in ``_delta_log`` or another underscore/dot directory except our staging area and
``_change_data`` (change data files, which no snapshot references, age out), is not
referenced by the latest snapshot, is not a tombstone younger than the retention, and was last
modified before the retention window, so data files of transactions still in flight (which are
younger) survive.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable

from deltatx.errors import InvalidArgumentError
from deltatx.kernel.actions import AddFile, RemoveFile
from deltatx.kernel.log_paths import LOG_DIR, STAGING_PREFIX
from deltatx.kernel.metrics import VacuumMetrics
from deltatx.kernel.operations import Operation, OperationName
from deltatx.log.change_feed import CHANGE_DATA_DIR
from deltatx.log.deletion_vectors import dv_file_location
from deltatx.log.delta_log import DeltaLog
from deltatx.log.transaction import OptimisticTransaction
from deltatx.storage.location import Location

_HOUR_MS = 3_600_000
_log = logging.getLogger(__name__)


def _keep(location: Location, files: Iterable[AddFile | RemoveFile], keep: set[str]) -> None:
    """Adds the key of every file and every stored deletion vector that ``files`` reference.

    Keys are the same for every spelling of a path (relative, absolute, ``file:`` URI) and
    for deletion vectors stored by id (``u``) or by absolute path (``p``), so a referenced
    file is always recognised in the walk. A path outside the root cannot match a walked
    file, which is the point: such a path is never a reason to delete.
    """
    for f in files:
        keep.add(location.key(f.path))
        dv = f.deletion_vector
        if dv is not None and dv.storage_type != "i":
            keep.add(location.key(dv_file_location(location, dv, owner=f" of {f.path}")))


def _hidden(relative: str) -> bool:
    first = relative.split("/", 1)[0]
    # Change data files are never in a snapshot (cdc actions live only in their commit), so
    # like delta-spark VACUUM ages them out with the retention instead of keeping them forever.
    if first.startswith(STAGING_PREFIX) or (first == CHANGE_DATA_DIR and "/" in relative):
        return False
    return any(part.startswith(("_", ".")) for part in relative.split("/")[:-1]) or (
        "/" not in relative and relative.startswith(("_", "."))
    )


def vacuum(
    log: DeltaLog,
    *,
    retention_hours: float | None = None,
    dry_run: bool = False,
    enforce_retention: bool = True,
    now_ms: int | None = None,
) -> VacuumMetrics:
    """Deletes unreferenced files older than the retention (or lists them, for a dry run).

    Args:
        log: The table's log.
        retention_hours: How old an unreferenced file must be; default the table's
            ``delta.deletedFileRetentionDuration``.
        dry_run: List what would be deleted, delete nothing.
        enforce_retention: Refuse a retention shorter than the table's setting; pass False to
            allow it. UNSAFE while other writers are active, exactly as delta-spark documents
            for its retention check: a transaction still in flight has written data files the
            log does not reference yet, VACUUM deletes them, and its commit then publishes
            files that no longer exist. Readers of old versions lose them too. A warning is
            logged for every such VACUUM.
        now_ms: The current time, for tests.

    Raises:
        InvalidArgumentError: The retention is negative, or shorter than the table's without
            ``enforce_retention=False``.
        UnsupportedFeatureError: The table needs a writer feature deltatx does not support;
            nothing is deleted.
    """
    started = time.monotonic()
    snapshot = log.snapshot()
    snapshot.table_configuration.check_writable()
    table_retention = snapshot.properties.deleted_file_retention_ms
    retention_ms = table_retention if retention_hours is None else int(retention_hours * _HOUR_MS)
    if retention_ms < 0:
        raise InvalidArgumentError(f"retention_hours must be >= 0, got {retention_hours}")
    if enforce_retention and retention_ms < table_retention:
        raise InvalidArgumentError(
            f"VACUUM retention of {retention_ms / _HOUR_MS:g} hours is shorter than the table's "
            f"delta.deletedFileRetentionDuration ({table_retention / _HOUR_MS:g} hours): "
            f"readers of old versions and in-flight writers could lose files. Pass "
            f"enforce_retention=False (on the command line: deltatx vacuum "
            f"--no-enforce-retention) if you are sure."
        )
    if retention_ms < table_retention and not dry_run:
        # As in delta-spark, turning the check off is the operator's decision and is unsafe:
        # data files of a transaction still in flight are unreferenced until it commits, so a
        # short retention deletes them and that commit then publishes files that do not exist.
        _log.warning(
            "VACUUM of %s with a retention of %g hours, shorter than the table's %g hours: "
            "UNSAFE while other writers are active; their uncommitted data files may be "
            "deleted and their commits then reference missing files",
            log.table_path,
            retention_ms / _HOUR_MS,
            table_retention / _HOUR_MS,
        )
    now = int(time.time() * 1000) if now_ms is None else now_ms
    cutoff = now - retention_ms
    location = log.location
    keep: set[str] = set()
    _keep(location, snapshot.add_files(), keep)
    # Tombstones younger than *this* retention are kept. The snapshot's own view expires them
    # after the table's retention, which is shorter when a longer retention is asked for, so
    # it is shifted to the vacuum cutoff: files removed within the retention stay for readers.
    shifted_now = cutoff + table_retention
    _keep(location, snapshot.tombstones(now_ms=shifted_now), keep)
    doomed: list[tuple[str, int]] = []
    for status in location.walk():
        rel = location.relative(status.path)
        if rel is None or rel.startswith(f"{LOG_DIR}/") or _hidden(rel):
            continue
        if rel in keep or status.modification_time > cutoff:
            continue
        doomed.append((status.path, status.size))
    if not dry_run:
        for path, _ in doomed:
            location.delete(path)
    metrics = VacuumMetrics(
        num_deleted_files=0 if dry_run else len(doomed),
        num_deleted_bytes=0 if dry_run else sum(s for _, s in doomed),
        num_files_to_delete=len(doomed),
        dry_run=dry_run,
        deleted_paths=tuple(sorted(p for p, _ in doomed)),
        execution_time_ms=int((time.monotonic() - started) * 1000),
    )
    if not dry_run:
        txn = OptimisticTransaction(log, snapshot)
        txn.record_operation(
            Operation(
                OperationName.VACUUM_END,
                {"status": "COMPLETED", "retentionHours": retention_ms / _HOUR_MS},
            ),
            metrics.to_operation_metrics(),
        )
        txn.commit()
    return metrics
