"""VACUUM: delete files the table no longer references, once no reader can need them.

A file is deleted only if it lies under the table root (never through ``..`` or a symlink out),
is not in ``_delta_log`` or another underscore/dot directory except our staging area, is not
referenced by the latest snapshot, is not a tombstone younger than the retention, and was last
modified before the retention window, so data files of transactions still in flight (which are
younger) survive.
"""

from __future__ import annotations

import os
import posixpath
import time
from urllib.parse import unquote

from deltatx.errors import InvalidArgumentError
from deltatx.kernel.log_paths import STAGING_PREFIX
from deltatx.kernel.metrics import VacuumMetrics
from deltatx.kernel.operations import Operation, OperationName
from deltatx.log.delta_log import DeltaLog
from deltatx.log.transaction import OptimisticTransaction

_HOUR_MS = 3_600_000


def _relative(root: str, path: str) -> str | None:
    root_real = os.path.realpath(root)
    real = os.path.realpath(path)
    if real != path and os.path.islink(path):
        return None
    if not real.startswith(root_real.rstrip("/") + "/"):
        return None
    return real[len(root_real.rstrip("/")) + 1 :]


def _keep_key(root: str, path: str) -> str:
    """The walk-relative form of a path in the log, so referenced files are recognised.

    Relative paths are percent-decoded and normalised; absolute paths and ``file:`` URIs under
    the root become relative (the protocol allows them). Anything else cannot match a file
    under the root, which is the point: such a path is never a reason to delete.
    """
    decoded = unquote(path)
    if decoded.startswith("file:"):
        decoded = decoded[len("file:") :]
        if decoded.startswith("//"):
            decoded = decoded[2:]
            decoded = decoded[len("localhost") :] if decoded.startswith("localhost/") else decoded
    if decoded.startswith("/"):
        rel = _relative(root, posixpath.normpath(decoded))
        return decoded if rel is None else rel
    return posixpath.normpath(decoded)


def _hidden(relative: str) -> bool:
    first = relative.split("/", 1)[0]
    if first.startswith(STAGING_PREFIX):
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
            allow it (``deltatx.vacuum.retentionCheck``), knowing that readers of old versions
            and transactions still writing may lose files.
        now_ms: The current time, for tests.

    Raises:
        InvalidArgumentError: The retention is negative, or shorter than the table's without
            ``enforce_retention=False``.
    """
    started = time.monotonic()
    snapshot = log.snapshot()
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
    now = int(time.time() * 1000) if now_ms is None else now_ms
    cutoff = now - retention_ms
    root = log.table_path
    keep: set[str] = set()
    for f in snapshot.add_files():
        keep.add(_keep_key(root, f.path))
        if f.deletion_vector is not None and f.deletion_vector.storage_type == "u":
            keep.add(_dv_relative_path(f.deletion_vector.path_or_inline_dv))
    # Tombstones younger than *this* retention are kept. The snapshot's own view expires them
    # after the table's retention, which is shorter when a longer retention is asked for, so
    # it is shifted to the vacuum cutoff: files removed within the retention stay for readers.
    shifted_now = cutoff + table_retention
    for r in snapshot.tombstones(now_ms=shifted_now):
        keep.add(_keep_key(root, r.path))
        if r.deletion_vector is not None and r.deletion_vector.storage_type == "u":
            keep.add(_dv_relative_path(r.deletion_vector.path_or_inline_dv))
    doomed: list[tuple[str, int]] = []
    for status in log.store.walk(root):
        rel = _relative(root, status.path)
        if rel is None or rel.startswith("_delta_log/") or _hidden(rel):
            continue
        if rel in keep or status.modification_time > cutoff:
            continue
        doomed.append((status.path, status.size))
    if not dry_run:
        for path, _ in doomed:
            log.store.delete(path)
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


def _dv_relative_path(encoded: str) -> str:
    """The file of a ``u`` deletion vector: ``<prefix>/deletion_vector_<uuid>.bin``."""
    from deltatx.kernel.deletion_vectors import dv_relative_path

    return dv_relative_path(encoded)
