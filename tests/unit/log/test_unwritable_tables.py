"""A table naming a writer feature deltatx does not support is refused before anything is touched.

Covers VACUUM (API and CLI), ``deltatx checkpoint`` and commits through the log API: each used
to act first (delete files, write a checkpoint) and fail, or not fail at all.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from deltatx.errors import UnsupportedFeatureError
from deltatx.kernel.actions import ProtocolAction
from deltatx.kernel.codec import serialize_commit
from deltatx.kernel.log_paths import commit_name
from deltatx.kernel.operations import Operation, OperationName
from deltatx.log.delta_log import DeltaLog
from deltatx.log.vacuum import vacuum
from deltatx.storage import LocalLogStore

from ..logtables import add, append, begin, create_table

FUTURE = ProtocolAction(1, 7, None, ("appendOnly", "futureWriter"))
OLD = 10**9  # seconds since the epoch: far older than any retention


@pytest.fixture
def table(tmp_path: Path) -> Path:
    root = tmp_path / "t"
    log = create_table(LocalLogStore(fsync=False), str(root))
    append(log, add("part=a/1.parquet", "a"))
    # Another engine upgraded the protocol to a feature deltatx does not know.
    (root / "_delta_log" / commit_name(2)).write_bytes(serialize_commit([FUTURE]))
    orphan = root / "part=a" / "orphan.parquet"
    orphan.parent.mkdir(parents=True, exist_ok=True)
    orphan.write_bytes(b"x")
    os.utime(orphan, (OLD, OLD))
    return root


def _log_files(root: Path) -> list[str]:
    return sorted(os.listdir(root / "_delta_log"))


def test_vacuum_refuses_before_deleting_anything(table: Path) -> None:
    before = _log_files(table)
    with pytest.raises(UnsupportedFeatureError, match="futureWriter"):
        vacuum(DeltaLog.for_table(str(table)), retention_hours=0, enforce_retention=False)
    assert (table / "part=a" / "orphan.parquet").exists()
    assert _log_files(table) == before


def test_cli_vacuum_and_checkpoint_exit_3_and_touch_nothing(
    run_cli: Callable[..., tuple[int, str, str]], table: Path
) -> None:
    before = _log_files(table)
    code, _, err = run_cli("vacuum", str(table))
    assert code == 3 and "futureWriter" in err
    assert (table / "part=a" / "orphan.parquet").exists()
    code, _, err = run_cli("checkpoint", str(table))
    assert code == 3 and "futureWriter" in err
    assert _log_files(table) == before


def test_log_api_commit_is_refused(table: Path) -> None:
    log = DeltaLog.for_table(str(table))
    txn = begin(log)
    txn.add_files([add("part=a/2.parquet", "a")])
    txn.record_operation(Operation(OperationName.WRITE, {"mode": "Append"}), {})
    with pytest.raises(UnsupportedFeatureError, match="futureWriter"):
        txn.commit()
    assert log.latest_version() == 2
