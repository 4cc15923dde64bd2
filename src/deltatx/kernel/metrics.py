"""Typed metrics that commands return and write into ``commitInfo.operationMetrics``.

Field names are snake_case here; :meth:`CommandMetrics.to_operation_metrics` renders the
camelCase names delta-spark writes (``numDeletedRows``, ``numRemovedFiles``, ...).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

# How a statement was run, not what it did: returned to the caller, never in operationMetrics
# (re-execution records its own numAttempts there).
_NOT_OPERATION_METRICS = frozenset({"attempts", "read_versions"})


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(w[:1].upper() + w[1:] for w in rest)


@dataclass(frozen=True, slots=True)
class CommandMetrics:
    """Common shape: every command reports files touched and its wall time.

    ``attempts`` and ``read_versions`` say how the statement ran: once per execution, with the
    version each execution read (more than one when a conflicting statement was re-executed).
    """

    num_added_files: int = 0
    num_removed_files: int = 0
    execution_time_ms: int = 0
    attempts: int = 1
    read_versions: tuple[int, ...] = ()

    def to_operation_metrics(self) -> dict[str, int]:
        """The camelCase metrics for commitInfo."""
        return {
            _camel(k): int(v) for k, v in asdict(self).items() if k not in _NOT_OPERATION_METRICS
        }


@dataclass(frozen=True, slots=True)
class WriteMetrics(CommandMetrics):
    """What a WRITE did."""

    num_output_rows: int = 0
    num_output_bytes: int = 0
    num_deleted_rows: int = 0


@dataclass(frozen=True, slots=True)
class DeleteMetrics(CommandMetrics):
    """What a DELETE did."""

    num_deleted_rows: int = 0
    num_copied_rows: int = 0
    num_deletion_vectors_added: int = 0
    num_deletion_vectors_removed: int = 0


@dataclass(frozen=True, slots=True)
class UpdateMetrics(CommandMetrics):
    """What an UPDATE did."""

    num_updated_rows: int = 0
    num_copied_rows: int = 0
    num_deletion_vectors_added: int = 0
    num_deletion_vectors_removed: int = 0


@dataclass(frozen=True, slots=True)
class MergeMetrics(CommandMetrics):
    """What a MERGE did."""

    num_source_rows: int = 0
    num_target_rows_inserted: int = 0
    num_target_rows_updated: int = 0
    num_target_rows_deleted: int = 0
    num_target_rows_copied: int = 0
    num_target_files_added: int = 0
    num_target_files_removed: int = 0
    num_output_rows: int = 0
    num_deletion_vectors_added: int = 0
    num_deletion_vectors_removed: int = 0


@dataclass(frozen=True, slots=True)
class OptimizeMetrics(CommandMetrics):
    """What an OPTIMIZE (compaction or Z-order) or REORG did."""

    num_partitions_optimized: int = 0
    num_batches: int = 0
    total_considered_files: int = 0
    total_files_skipped: int = 0
    num_removed_bytes: int = 0
    num_added_bytes: int = 0
    num_rows: int = 0


@dataclass(frozen=True, slots=True)
class VacuumMetrics(CommandMetrics):
    """What a VACUUM deleted (or would delete, in a dry run)."""

    num_deleted_files: int = 0
    num_deleted_bytes: int = 0
    num_files_to_delete: int = 0
    dry_run: bool = False
    deleted_paths: tuple[str, ...] = ()

    def to_operation_metrics(self) -> dict[str, int]:
        """The camelCase metrics for commitInfo (paths are left out)."""
        return {
            "numDeletedFiles": self.num_deleted_files,
            "numDeletedBytes": self.num_deleted_bytes,
            "numFilesToDelete": self.num_files_to_delete,
            "executionTimeMs": self.execution_time_ms,
        }


@dataclass(frozen=True, slots=True)
class RestoreMetrics(CommandMetrics):
    """What a RESTORE changed."""

    table_size_after_restore: int = 0
    num_of_files_after_restore: int = 0
    num_restored_files: int = 0
    restored_files_size: int = 0
    removed_files_size: int = 0
