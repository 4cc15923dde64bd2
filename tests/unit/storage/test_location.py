from __future__ import annotations

import os
from pathlib import Path

import pyarrow.fs as pafs
import pytest

from deltatx.errors import InvalidTableError, UnsupportedFeatureError
from deltatx.kernel.actions import Metadata, ProtocolAction
from deltatx.log.delta_log import DeltaLog
from deltatx.log.transaction import OptimisticTransaction
from deltatx.storage import LocalLogStore, Location, MemoryLogStore
from deltatx.storage.log_store import FileAlreadyExistsError

REMOTE = ["gs://b/x", "abfss://c@acct/x", "hdfs://nn/x"]


def test_a_local_path_and_its_file_uris_are_one_location(tmp_path: Path) -> None:
    spellings = [str(tmp_path), f"{tmp_path}/", f"file:{tmp_path}", f"file://{tmp_path}/"]
    roots = {Location.of(s).root for s in spellings}
    assert roots == {str(tmp_path)}
    location = Location.of(str(tmp_path))
    assert isinstance(location.fs, pafs.LocalFileSystem)
    assert isinstance(location.store, LocalLogStore)
    assert location.uri == f"file://{tmp_path}"
    assert location.log_dir == f"{tmp_path}/_delta_log"


@pytest.mark.parametrize("uri", REMOTE)
def test_unsupported_stores_are_refused_before_anything_is_written(
    uri: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UnsupportedFeatureError, match="not supported yet") as info:
        DeltaLog.for_table(uri)
    assert info.value.feature is not None and info.value.feature.startswith("storage:")
    assert os.listdir(tmp_path) == []


def test_write_if_absent_is_the_commit_primitive() -> None:
    location = Location.of("/mem/t", store=MemoryLogStore())
    target = location.child("_delta_log/00000000000000000000.json")
    location.write_if_absent(target, b"one")
    with pytest.raises(FileAlreadyExistsError):
        location.write_if_absent(target, b"two")
    assert location.read(target) == b"one"
    location.overwrite(target, b"three")
    assert location.read(target) == b"three"


@pytest.mark.parametrize(
    "path", ["../outside/secret.parquet", "%2e%2e%2fsecret.parquet", "%2E%2E/x", "sub/../../x"]
)
def test_a_relative_path_that_climbs_out_is_refused(path: str) -> None:
    location = Location.of("/data/t", store=MemoryLogStore())
    with pytest.raises(InvalidTableError, match="outside the table root"):
        location.file(path, what="data file")


def test_absolute_paths_and_file_uris_may_point_anywhere_local() -> None:
    location = Location.of("/data/t", store=MemoryLogStore())
    assert location.file("/elsewhere/a.parquet") == "/elsewhere/a.parquet"
    assert location.file("file:///elsewhere/a%20b.parquet") == "/elsewhere/a b.parquet"
    assert location.file("a%20b/c.parquet") == "/data/t/a b/c.parquet"
    with pytest.raises(UnsupportedFeatureError, match="s3://"):
        location.file("s3://bucket/t/a.parquet")
    with pytest.raises(InvalidTableError, match="host"):
        location.file("file://server/t/a.parquet")


def test_walk_lists_regular_files_and_not_links(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_bytes(b"s")
    root = tmp_path / "t"
    (root / "d").mkdir(parents=True)
    (root / "d" / "a.parquet").write_bytes(b"x")
    (root / "link").symlink_to(outside / "secret")
    (root / "dirlink").symlink_to(outside)
    location = Location.of(str(root))
    assert [location.relative(s.path) for s in location.walk()] == ["d/a.parquet"]


def test_a_table_on_a_file_uri_commits_under_the_local_path(tmp_path: Path) -> None:
    log = DeltaLog.for_table(f"file://{tmp_path}/my%20table")
    txn = OptimisticTransaction(log, None)
    txn.update_protocol(ProtocolAction(1, 2))
    txn.update_metadata(Metadata(id="t", schema_string='{"type":"struct","fields":[]}'))
    txn.commit()
    assert (tmp_path / "my table" / "_delta_log" / "00000000000000000000.json").is_file()
