"""Broken logs fail with typed errors that say what and where, and change nothing on disk."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from deltatx.errors import InvalidTableError, TableNotFoundError, VersionNotFoundError
from deltatx.kernel.codec import serialize_commit
from deltatx.kernel.log_paths import checkpoint_name, commit_name, multipart_checkpoint_name
from deltatx.log import DeltaLog
from deltatx.storage import LocalLogStore

from .log_helpers import METADATA, PROTOCOL, add, create, info, remove, snapshot_dir, write_commit


@pytest.fixture
def table(tmp_path: Path) -> str:
    path = str(tmp_path / "t")
    store = LocalLogStore()
    create(store, path, add("a"), add("b"))
    write_commit(store, path, 1, [info(2000), remove("a"), add("c")])
    write_commit(store, path, 2, [info(3000), add("d")])
    return path


def log_file(table: str, name: str) -> Path:
    return Path(table) / "_delta_log" / name


def unchanged(table: str, call: Callable[[], object], error: type[Exception], match: str) -> None:
    before = snapshot_dir(table)
    with pytest.raises(error, match=match):
        call()
    assert snapshot_dir(table) == before


def test_corrupt_json_line_names_file_and_line(table: str) -> None:
    path = log_file(table, commit_name(1))
    lines = path.read_bytes().split(b"\n")
    lines[1] = b'{"remove":{"path":"a",'
    path.write_bytes(b"\n".join(lines))
    log = DeltaLog.for_table(table)
    where = r"00000000000000000001\.json line 2: not valid JSON"
    unchanged(table, log.snapshot, InvalidTableError, where)
    unchanged(table, lambda: log.read_commit(1), InvalidTableError, where)
    assert log.snapshot(0).num_files == 2  # earlier versions still read


def test_truncated_file(table: str) -> None:
    path = log_file(table, commit_name(2))
    data = path.read_bytes()
    path.write_bytes(data[: len(data) - 20])
    unchanged(
        table,
        DeltaLog.for_table(table).snapshot,
        InvalidTableError,
        r"00000000000000000002\.json line 2: not valid JSON",
    )


def test_wrong_field_type_names_file_line_and_field(table: str) -> None:
    log_file(table, commit_name(3)).write_text(
        '{"add":{"path":"x","partitionValues":{},"size":1,"modificationTime":1,"dataChange":true}}\n'
        '{"add":{"path":"y","partitionValues":{},"size":"big","modificationTime":1,"dataChange":true}}\n'
    )
    unchanged(
        table,
        DeltaLog.for_table(table).snapshot,
        InvalidTableError,
        r"00000000000000000003\.json line 2.*'size'",
    )


def test_missing_required_field(table: str) -> None:
    log_file(table, commit_name(3)).write_text(
        '{"add":{"path":"x","partitionValues":{},"modificationTime":1,"dataChange":true}}\n'
    )
    unchanged(
        table,
        DeltaLog.for_table(table).snapshot,
        InvalidTableError,
        r"00000000000000000003\.json line 1.*'size'",
    )


def test_not_utf8(table: str) -> None:
    log_file(table, commit_name(3)).write_bytes(b'{"add":\xff}\n')
    unchanged(table, DeltaLog.for_table(table).snapshot, InvalidTableError, "not UTF-8")


def test_version_gap(table: str) -> None:
    log_file(table, commit_name(4)).write_bytes(serialize_commit([add("e")]))
    log = DeltaLog.for_table(table)
    unchanged(table, log.snapshot, InvalidTableError, r"gap: commit\(s\) 3 are missing")
    assert log.snapshot(2).version == 2


def test_missing_checkpoint_part_falls_back_to_commits(table: str) -> None:
    log = DeltaLog.for_table(table)
    expected = sorted(f.path for f in log.snapshot().add_files())
    log.checkpoint()
    cp = log_file(table, checkpoint_name(2))
    cp.rename(log_file(table, multipart_checkpoint_name(2, 1, 2)))  # part 2 of 2 is missing
    before = snapshot_dir(table)
    assert sorted(f.path for f in log.snapshot().add_files()) == expected
    assert snapshot_dir(table) == before
    # Without the commits there is no way to reconstruct the table.
    for v in range(3):
        log_file(table, commit_name(v)).unlink()
    unchanged(table, log.snapshot, InvalidTableError, "missing parts")


def test_last_checkpoint_pointing_at_missing_checkpoint(table: str) -> None:
    log = DeltaLog.for_table(table)
    expected = sorted(f.path for f in log.snapshot().add_files())
    log_file(table, "_last_checkpoint").write_text('{"version":2,"size":6}')
    before = snapshot_dir(table)
    snap = log.snapshot()
    assert snap.version == 2 and sorted(f.path for f in snap.add_files()) == expected
    assert log.latest_version() == 2
    assert snapshot_dir(table) == before


@pytest.mark.parametrize("content", [b"", b"{not json", b'{"version":"x"}', b"\xff\xfe"])
def test_corrupt_last_checkpoint_falls_back_to_listing(table: str, content: bytes) -> None:
    log = DeltaLog.for_table(table)
    log.checkpoint()
    log_file(table, "_last_checkpoint").write_bytes(content)
    before = snapshot_dir(table)
    assert sorted(f.path for f in log.snapshot().add_files()) == ["b", "c", "d"]
    assert snapshot_dir(table) == before


def test_corrupt_checkpoint_falls_back_to_commits_else_names_the_file(table: str) -> None:
    log = DeltaLog.for_table(table)
    log.checkpoint()
    log_file(table, checkpoint_name(2)).write_bytes(b"PAR1 this is not parquet")
    # The commits can still rebuild the version: the torn checkpoint is ignored.
    before = snapshot_dir(table)
    assert sorted(f.path for f in log.snapshot().add_files()) == ["b", "c", "d"]
    assert snapshot_dir(table) == before
    # Without them the checkpoint was the only way: the error names it.
    log_file(table, commit_name(0)).unlink()
    unchanged(table, log.snapshot, InvalidTableError, r"00000000000000000002\.checkpoint\.parquet")


@pytest.mark.parametrize("missing", ["protocol", "metaData"])
def test_missing_protocol_or_metadata(tmp_path: Path, missing: str) -> None:
    table = str(tmp_path / "t")
    actions = [info(1000), add("a")]
    if missing != "protocol":
        actions.append(PROTOCOL)
    if missing != "metaData":
        actions.append(METADATA)
    write_commit(LocalLogStore(), table, 0, actions)
    unchanged(
        table, DeltaLog.for_table(table).snapshot, InvalidTableError, f"version 0 has no {missing}"
    )


def test_nonexistent_version(table: str) -> None:
    log = DeltaLog.for_table(table)
    unchanged(table, lambda: log.snapshot(7), VersionNotFoundError, "versions 0 to 2")
    unchanged(table, lambda: log.read_commit(7), VersionNotFoundError, "latest version is 2")


def test_no_table_at_path(tmp_path: Path) -> None:
    absent = str(tmp_path / "absent")
    with pytest.raises(TableNotFoundError):
        DeltaLog.for_table(absent).snapshot()
    assert not Path(absent).exists()
    plain = tmp_path / "plain"
    (plain / "_delta_log").mkdir(parents=True)
    (plain / "data.parquet").write_bytes(b"x")
    unchanged(
        str(plain), DeltaLog.for_table(str(plain)).snapshot, TableNotFoundError, "not a Delta table"
    )
    assert not DeltaLog.for_table(str(plain)).table_exists()
