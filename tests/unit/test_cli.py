"""The `deltatx` command against real (log-only) tables: --json output parsed back, exit codes."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from deltatx.kernel.operations import Operation, OperationName
from deltatx.log.delta_log import DeltaLog
from deltatx.storage import LocalLogStore

from .logtables import add, append, begin, create_table, eq


@pytest.fixture
def table(tmp_path: Path) -> Path:
    log = create_table(LocalLogStore(fsync=False), str(tmp_path / "t"))
    append(log, add("part=a/1.parquet", "a"), add("part=b/2.parquet", "b"))
    append(log, add("part=a/3.parquet", "a"))
    return tmp_path / "t"


def test_history_json(run_cli: Callable[..., tuple[int, str, str]], table: Path) -> None:
    code, out, _ = run_cli("history", str(table), "--json")
    assert code == 0
    rows = json.loads(out)
    assert [r["version"] for r in rows] == [2, 1, 0]
    assert rows[-1]["operation"] == "CREATE TABLE"
    assert rows[0]["isBlindAppend"] is True


def test_describe_and_files_json(run_cli: Callable[..., tuple[int, str, str]], table: Path) -> None:
    code, out, _ = run_cli("describe", str(table), "--json")
    info = json.loads(out)
    assert code == 0
    assert info["partitionColumns"] == ["part"]
    assert info["numFiles"] == 3
    assert info["isolationLevel"] == "WriteSerializable"
    assert (info["minReaderVersion"], info["minWriterVersion"]) == (1, 2)
    code, out, _ = run_cli("files", str(table), "--version", "1", "--json")
    assert sorted(r["path"] for r in json.loads(out)) == ["part=a/1.parquet", "part=b/2.parquet"]


def test_set_property_validates_and_commits(
    run_cli: Callable[..., tuple[int, str, str]], table: Path
) -> None:
    code, _, err = run_cli("set-property", str(table), "delta.isolationLevel=Chaos")
    assert code == 2
    assert "Serializable" in err and "WriteSerializable" in err
    assert DeltaLog.for_table(str(table)).latest_version() == 2
    code, out, _ = run_cli(
        "set-property", str(table), "delta.isolationLevel=serializable", "--json"
    )
    assert code == 0
    assert json.loads(out) == {"version": 3, "properties": {"delta.isolationLevel": "Serializable"}}
    snap = DeltaLog.for_table(str(table)).snapshot()
    assert snap.metadata.configuration["delta.isolationLevel"] == "Serializable"


def test_checkpoint_and_vacuum_dry_run(
    run_cli: Callable[..., tuple[int, str, str]], table: Path
) -> None:
    code, out, _ = run_cli("checkpoint", str(table), "--json")
    assert code == 0 and json.loads(out) == {"version": 2, "numFiles": 3}
    assert (table / "_delta_log" / "00000000000000000002.checkpoint.parquet").exists()
    (table / "orphan.parquet").write_bytes(b"x")
    code, out, _ = run_cli("vacuum", str(table), "--dry-run", "--json")
    assert code == 0
    assert json.loads(out)["numFilesToDelete"] == 0  # too young for the default retention
    assert (table / "orphan.parquet").exists()


def test_errors_are_one_line_with_documented_codes(
    run_cli: Callable[..., tuple[int, str, str]], tmp_path: Path, table: Path
) -> None:
    code, _, err = run_cli("history", str(tmp_path / "missing"))
    assert code == 2 and err.strip().count("\n") == 0 and "no Delta table" in err
    code, _, err = run_cli("files", str(table), "--version", "99")
    assert code == 2 and "99" in err
    code, out, err = run_cli("history", str(table), "--limit", "-1")
    assert code == 2 and "limit" in err and out == ""


def test_conflicts_explains_the_collisions(
    run_cli: Callable[..., tuple[int, str, str]], table: Path
) -> None:
    log = DeltaLog.for_table(str(table))
    txn = begin(log)
    txn.remove_files(txn.scan(eq("part", "a")))
    txn.record_operation(Operation(OperationName.DELETE, {}), {})
    txn.commit()  # version 3 rewrote partition a
    code, out, _ = run_cli(
        "conflicts",
        str(table),
        "--since",
        "2",
        "--condition",
        "part = 'a'",
        "--operation",
        "UPDATE",
        "--json",
    )
    assert code == 0
    rows = json.loads(out)
    assert [r["version"] for r in rows] == [3]
    assert rows[0]["conflict"] == "ConcurrentDeleteDeleteException"
    assert rows[0]["partition"] == "[part=a]"
    assert rows[0]["hint"]
    code, out, _ = run_cli(
        "conflicts", str(table), "--since", "2", "--condition", "part = 'b'", "--json"
    )
    assert json.loads(out)[0]["conflict"] is None
