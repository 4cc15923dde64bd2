"""Isolation levels and the downgrade of commits that change no data (the Delta code)."""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum

from deltatx.kernel.actions import Action, AddCDCFile, AddFile, CommitInfo, RemoveFile


class IsolationLevel(StrEnum):
    """The isolation level a commit is validated at; recorded in ``commitInfo``."""

    SERIALIZABLE = "Serializable"
    WRITE_SERIALIZABLE = "WriteSerializable"
    SNAPSHOT_ISOLATION = "SnapshotIsolation"


SETTABLE_LEVELS: tuple[IsolationLevel, ...] = (
    IsolationLevel.SERIALIZABLE,
    IsolationLevel.WRITE_SERIALIZABLE,
)
DEFAULT_ISOLATION_LEVEL = IsolationLevel.WRITE_SERIALIZABLE


def parse_isolation_level_lenient(value: str | None) -> IsolationLevel:
    """Reads a level already in a log: any case and delta-rs's camelCase spellings.

    An unreadable value falls back to the default rather than failing every later commit;
    setting such a value is refused by :mod:`deltatx.kernel.properties`.
    """
    if value is None:
        return DEFAULT_ISOLATION_LEVEL
    lowered = value.strip().lower()
    for level in IsolationLevel:
        if level.value.lower() == lowered:
            return level
    return DEFAULT_ISOLATION_LEVEL


def can_downgrade_to_snapshot_isolation(
    actions: Iterable[Action], *, table_level: IsolationLevel, operation_changes_data: bool
) -> bool:
    """Whether a commit may run at SnapshotIsolation instead of the table's level.

    As Delta's own code does: a commit whose file actions all have ``dataChange=false``
    (compaction, REORG) and that carries no other action (metadata, protocol, txn, domain
    metadata) downgrades. Under WriteSerializable the operation itself must also not be one
    that changes data.
    """
    for action in actions:
        if isinstance(action, AddFile | RemoveFile | AddCDCFile):
            if action.data_change:
                return False
        elif not isinstance(action, CommitInfo):
            return False
    if table_level is IsolationLevel.SERIALIZABLE:
        return True
    if table_level is IsolationLevel.WRITE_SERIALIZABLE:
        return not operation_changes_data
    return False


def resolve_isolation_level(
    actions: Iterable[Action], *, table_level: IsolationLevel, operation_changes_data: bool
) -> IsolationLevel:
    """The level a commit is validated at: the table's, or SnapshotIsolation after downgrade."""
    if can_downgrade_to_snapshot_isolation(
        actions, table_level=table_level, operation_changes_data=operation_changes_data
    ):
        return IsolationLevel.SNAPSHOT_ISOLATION
    return table_level
