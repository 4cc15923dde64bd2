"""Isolation levels: lenient parsing of logged values and the SnapshotIsolation downgrade."""

from __future__ import annotations

import pytest

from deltatx.kernel.actions import AddFile, CommitInfo, Metadata, RemoveFile, SetTransaction
from deltatx.kernel.isolation import (
    DEFAULT_ISOLATION_LEVEL,
    IsolationLevel,
    parse_isolation_level_lenient,
    resolve_isolation_level,
)

S, WS, SI = (
    IsolationLevel.SERIALIZABLE,
    IsolationLevel.WRITE_SERIALIZABLE,
    IsolationLevel.SNAPSHOT_ISOLATION,
)


def _add(data_change: bool) -> AddFile:
    return AddFile("a.parquet", {}, 1, 1, data_change)


@pytest.mark.parametrize(
    ("text", "level"),
    [
        ("Serializable", S),
        (" serializable ", S),
        ("WRITESERIALIZABLE", WS),
        ("snapshotIsolation", SI),
        (None, DEFAULT_ISOLATION_LEVEL),
        ("nonsense", DEFAULT_ISOLATION_LEVEL),
    ],
)
def test_logged_levels_are_read_leniently(text: str | None, level: IsolationLevel) -> None:
    assert parse_isolation_level_lenient(text) is level


def test_default_is_write_serializable() -> None:
    assert DEFAULT_ISOLATION_LEVEL is WS


@pytest.mark.parametrize(
    ("actions", "table", "changes_data", "expected"),
    [
        # Only dataChange=false file actions: compaction downgrades under both levels.
        ([_add(False), RemoveFile("b", 1, False)], S, False, SI),
        ([_add(False), CommitInfo(timestamp=1)], WS, False, SI),
        # Under WriteSerializable an operation that changes data keeps the table's level.
        ([_add(False)], WS, True, WS),
        ([_add(False)], S, True, SI),
        # Any data change, or any non-file action, keeps the table's level.
        ([_add(True)], S, False, S),
        ([_add(False), SetTransaction("app", 1)], S, False, S),
        ([_add(False), Metadata(id="x", schema_string="{}")], WS, False, WS),
    ],
)
def test_commits_that_change_no_data_run_at_snapshot_isolation(
    actions: list[object], table: IsolationLevel, changes_data: bool, expected: IsolationLevel
) -> None:
    level = resolve_isolation_level(
        actions,  # type: ignore[arg-type]
        table_level=table,
        operation_changes_data=changes_data,
    )
    assert level is expected
