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
    # Refused, committing nothing: a property deltatx does not implement, and a CHECK
    # constraint (adding one checks the existing rows, which the command cannot do).
    for assignment in ("delta.autoOptimize.autoCompact=true", "delta.constraints.pos=id > 0"):
        code, _, err = run_cli("set-property", str(table), assignment)
        assert code == 2, err
    assert "delta.isolationLevel" in err or "ADD CONSTRAINT" in err
    assert DeltaLog.for_table(str(table)).latest_version() == 3


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
    assert code == 3  # collisions found: the documented conflict code
    rows = json.loads(out)
    assert [r["version"] for r in rows] == [3]
    assert rows[0]["conflict"] == "ConcurrentDeleteDeleteException"
    assert rows[0]["partition"] == "[part=a]"
    assert rows[0]["hint"]
    code, out, _ = run_cli(
        "conflicts", str(table), "--since", "2", "--condition", "part = 'b'", "--json"
    )
    assert code == 0
    assert json.loads(out)[0]["conflict"] is None


# -- reading well at 80 and 160 columns ------------------------------------------------------


def _delete_partition_a(table: Path) -> None:
    log = DeltaLog.for_table(str(table))
    txn = begin(log)
    txn.remove_files(txn.scan(eq("part", "a")))
    txn.record_operation(
        Operation(OperationName.DELETE, {"predicate": "[\"(part = 'a')\"]"}),
        {"numRemovedFiles": "2", "numDeletedRows": "20", "numAddedFiles": "0"},
    )
    txn.commit()  # version 3


def _fits(out: str, width: int) -> None:
    assert out.strip()
    assert max(len(line) for line in out.splitlines()) <= width
    assert "…" not in out  # nothing cut


@pytest.mark.parametrize("width", [80, 160])
def test_history_is_compact_with_parameters_and_metrics(
    run_cli: Callable[..., tuple[int, str, str]],
    table: Path,
    monkeypatch: pytest.MonkeyPatch,
    width: int,
) -> None:
    _delete_partition_a(table)
    monkeypatch.setenv("COLUMNS", str(width))
    code, out, _ = run_cli("history", str(table))
    assert code == 0
    _fits(out, width)
    assert "predicate=[\"(part = 'a')\"]" in out.replace("\n", "") or "predicate=" in out
    assert "numDeletedRows=20" in out and "numRemovedFiles=2" in out
    assert "numAddedFiles" not in out  # zero metrics are left out
    assert "{" not in out  # no Python dict
    assert len(out.splitlines()) < 30
    assert ("WriteSerializable" in out) is (width >= 120)


@pytest.mark.parametrize("width", [80, 160])
def test_files_and_describe_read_well(
    run_cli: Callable[..., tuple[int, str, str]],
    table: Path,
    monkeypatch: pytest.MonkeyPatch,
    width: int,
) -> None:
    monkeypatch.setenv("COLUMNS", str(width))
    code, out, _ = run_cli("files", str(table))
    assert code == 0
    _fits(out, width)
    assert "deleted rows (DV)" in out
    assert "part=a/1.parquet" in out and "part=b/2.parquet" in out  # full paths
    assert "part=b" in out  # partition values, not swallowed as markup
    code, out, _ = run_cli("describe", str(table))
    _fits(out, width)
    assert "300 B (300 bytes)" in out  # three files of 100 bytes
    assert "rows" in out and "30" in out


def test_human_sizes() -> None:
    from deltatx.cli import human_size

    assert human_size(100) == "100 B"
    assert human_size(1536) == "1.5 KiB"
    assert human_size(5 * 1024**3) == "5.0 GiB"


@pytest.mark.parametrize("width", [80, 160])
def test_conflicts_output_keeps_brackets_and_exits_3(
    run_cli: Callable[..., tuple[int, str, str]],
    table: Path,
    monkeypatch: pytest.MonkeyPatch,
    width: int,
) -> None:
    _delete_partition_a(table)
    monkeypatch.setenv("COLUMNS", str(width))
    code, out, _ = run_cli("conflicts", str(table), "--since", "2", "--condition", "part = 'a'")
    assert code == 3
    assert "[part=a]" in out  # rich markup must not swallow it
    assert "ConcurrentDeleteDeleteException" in out
    assert "1 of 1 later commit(s) collide" in out
    assert max(len(line) for line in out.splitlines()) <= width


def test_a_merge_on_condition_is_understood_as_copied(
    run_cli: Callable[..., tuple[int, str, str]], table: Path
) -> None:
    _delete_partition_a(table)
    plain = run_cli("conflicts", str(table), "--since", "2", "--condition", "part = 'b'", "--json")
    aliased = run_cli(
        "conflicts", str(table), "--since", "2", "--condition", "t.part = 'b'", "--json"
    )
    assert plain[0] == aliased[0] == 0
    assert json.loads(plain[1]) == json.loads(aliased[1])
    code, out, _ = run_cli(
        "conflicts", str(table), "--since", "2", "--condition", "t.part = 'a'", "--json"
    )
    assert code == 3 and json.loads(out)[0]["partition"] == "[part=a]"
    # The full ON clause of a MERGE: the source's columns are ignored once --alias says which
    # name is the table.
    code, out, _ = run_cli(
        "conflicts",
        str(table),
        "--since",
        "2",
        "--operation",
        "MERGE",
        "--alias",
        "t",
        "--condition",
        "s.id = t.id AND t.part = 'b'",
        "--json",
    )
    assert code == 0 and json.loads(out)[0]["conflict"] is None


def test_an_ambiguous_condition_is_refused_not_matched_to_nothing(
    run_cli: Callable[..., tuple[int, str, str]], table: Path
) -> None:
    code, _, err = run_cli(
        "conflicts", str(table), "--since", "1", "--condition", "s.id = t.id AND t.part = 'a'"
    )
    assert code == 2 and "--alias" in err
    code, _, err = run_cli("conflicts", str(table), "--since", "1", "--condition", "part = AND")
    assert code == 2 and "<class" not in err and "cannot parse" in err


def test_history_json_timestamps_are_iso_with_a_zone(
    run_cli: Callable[..., tuple[int, str, str]], table: Path
) -> None:
    from datetime import datetime

    code, out, _ = run_cli("history", str(table), "--json")
    assert code == 0
    for row in json.loads(out):
        parsed = datetime.fromisoformat(row["timestamp"])
        assert parsed.tzinfo is not None and parsed.utcoffset().total_seconds() == 0
        assert "." in row["timestamp"]  # milliseconds, the log's full precision


def test_vacuum_names_the_cli_flag(
    run_cli: Callable[..., tuple[int, str, str]], table: Path
) -> None:
    code, _, err = run_cli("vacuum", str(table), "--retention-hours", "1", "--dry-run")
    assert code == 2 and "--no-enforce-retention" in err
    code, out, _ = run_cli(
        "vacuum", str(table), "--retention-hours", "1", "--dry-run", "--no-enforce-retention"
    )
    assert code == 0 and "would delete" in out


def test_exit_codes(run_cli: Callable[..., tuple[int, str, str]], table: Path) -> None:
    assert run_cli("describe", str(table))[0] == 0
    assert run_cli("history", str(table / "nothing"))[0] == 2
    assert run_cli("set-property", str(table), "nonsense")[0] == 2
    assert run_cli("history")[0] == 2  # click usage error
