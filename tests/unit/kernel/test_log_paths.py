"""Names of files in _delta_log: commits, classic, multi-part and UUID checkpoints."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from deltatx.kernel.log_paths import (
    LogFileKind,
    checkpoint_name,
    commit_name,
    compaction_name,
    multipart_checkpoint_name,
    parse_log_file,
    v2_checkpoint_name,
)

VERSIONS = st.integers(0, 10**20 - 1)


@given(VERSIONS)
def test_commit_and_checkpoint_names_parse_back(version: int) -> None:
    commit = parse_log_file(commit_name(version))
    checkpoint = parse_log_file(checkpoint_name(version))
    assert commit is not None and (commit.version, commit.kind) == (version, LogFileKind.COMMIT)
    assert checkpoint is not None and checkpoint.kind is LogFileKind.CHECKPOINT
    assert checkpoint.version == version


def test_names_sort_by_version() -> None:
    names = [commit_name(v) for v in (10, 2, 100)]
    assert sorted(names) == [commit_name(2), commit_name(10), commit_name(100)]
    assert commit_name(7) == "00000000000000000007.json"


def test_multipart_checkpoint_parts() -> None:
    f = parse_log_file(multipart_checkpoint_name(5, 2, 3))
    assert f is not None
    assert (f.kind, f.version, f.part, f.num_parts) == (LogFileKind.MULTIPART_CHECKPOINT, 5, 2, 3)


def test_uuid_checkpoint_is_v2() -> None:
    name = "00000000000000000003.checkpoint.80a083e8-7026-4e79-81be-64bd76c43a11.json"
    f = parse_log_file(name)
    assert f is not None and f.kind is LogFileKind.V2_CHECKPOINT and f.version == 3


def test_compaction_files_carry_their_range() -> None:
    f = parse_log_file(compaction_name(3, 9))
    assert f is not None and f.kind is LogFileKind.COMPACTION
    assert (f.version, f.end_version, f.last_version) == (3, 9, 9)
    assert parse_log_file(compaction_name(9, 3)) is None


def test_v2_checkpoint_names_parse_back() -> None:
    for json_format in (False, True):
        name = v2_checkpoint_name(
            12, "80a083e8-7026-4e79-81be-64bd76c43a11", json_format=json_format
        )
        f = parse_log_file(name)
        assert f is not None and f.kind is LogFileKind.V2_CHECKPOINT and f.last_version == 12


@pytest.mark.parametrize(
    "name",
    ["_last_checkpoint", "0.json", "00000000000000000001.json.tmp", ".00000000000000000001.json"],
)
def test_other_files_are_not_log_files(name: str) -> None:
    assert parse_log_file(name) is None
