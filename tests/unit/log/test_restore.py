"""RESTORE: the difference as one commit, refused when VACUUM took files it needs."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from deltatx.errors import VersionNotReadableError
from deltatx.kernel.actions import AddFile
from deltatx.kernel.deletion_vectors import dv_relative_path
from deltatx.log import DeltaLog
from deltatx.log.deletion_vectors import write_dvs
from deltatx.log.restore import stage_restore
from deltatx.storage import LocalLogStore

from ..logtables import add, append, begin, create_table


def _table(tmp_path: Path) -> tuple[Path, DeltaLog]:
    root = tmp_path / "t"
    return root, create_table(LocalLogStore(fsync=False), str(root), partitioned=False)


def _write(root: Path, relative: str) -> None:
    (root / relative).parent.mkdir(parents=True, exist_ok=True)
    (root / relative).write_bytes(b"x")


def _replace_all(log: DeltaLog, old: list[AddFile], new: AddFile) -> int:
    txn = begin(log)
    txn.remove_files(old)
    txn.add_files([new])
    return txn.commit()


def test_restore_re_adds_what_was_live_then(tmp_path: Path) -> None:
    root, log = _table(tmp_path)
    for name in ("a.parquet", "b.parquet"):
        _write(root, name)
    v1 = append(log, add("a.parquet"))
    _replace_all(log, log.snapshot().add_files(), add("b.parquet"))
    txn = begin(log)
    metrics = stage_restore(txn, version=v1)
    txn.commit()
    assert [f.path for f in log.snapshot().add_files()] == ["a.parquet"]
    assert (metrics.num_restored_files, metrics.num_removed_files) == (1, 1)


def test_restore_refuses_when_a_data_file_was_vacuumed(tmp_path: Path) -> None:
    root, log = _table(tmp_path)
    _write(root, "b.parquet")
    v1 = append(log, add("a%20b.parquet"), add(f"{root}/abs.parquet"))
    _replace_all(log, log.snapshot().add_files(), add("b.parquet"))
    with pytest.raises(VersionNotReadableError, match="VACUUM") as info:
        stage_restore(begin(log), version=v1)
    assert set(info.value.missing_files) == {f"{root}/a b.parquet", f"{root}/abs.parquet"}
    assert "allow_missing_files" in str(info.value)
    assert log.latest_version() == 2


def test_restore_refuses_when_a_deletion_vector_was_vacuumed(tmp_path: Path) -> None:
    root = tmp_path / "t"
    log = create_table(
        LocalLogStore(fsync=False),
        str(root),
        partitioned=False,
        configuration={"delta.enableDeletionVectors": "true"},
    )
    for name in ("a.parquet", "b.parquet"):
        _write(root, name)
    [dv] = write_dvs(log, [[0]])
    v1 = append(log, replace(add("a.parquet"), deletion_vector=dv))
    _replace_all(log, log.snapshot().add_files(), add("b.parquet"))
    (root / dv_relative_path(dv.path_or_inline_dv)).unlink()
    with pytest.raises(VersionNotReadableError) as info:
        stage_restore(begin(log), version=v1)
    assert info.value.missing_files == (f"{root}/{dv_relative_path(dv.path_or_inline_dv)}",)


def test_restore_with_missing_files_can_be_forced(tmp_path: Path) -> None:
    root, log = _table(tmp_path)
    _write(root, "b.parquet")
    v1 = append(log, add("gone.parquet"))
    _replace_all(log, log.snapshot().add_files(), add("b.parquet"))
    txn = begin(log)
    stage_restore(txn, version=v1, allow_missing_files=True)
    txn.commit()
    assert [f.path for f in log.snapshot().add_files()] == ["gone.parquet"]


def test_time_travel_to_a_vacuumed_version_names_the_oldest_readable_one(
    tmp_path: Path,
) -> None:
    root, log = _table(tmp_path)
    _write(root, "c.parquet")
    v1 = append(log, add("a.parquet"))
    v2 = _replace_all(log, log.snapshot().add_files(), add("b.parquet"))
    v3 = _replace_all(log, log.snapshot().add_files(), add("c.parquet"))
    log.require_files(log.snapshot(v3))
    for version in (v1, v2):
        with pytest.raises(VersionNotReadableError, match="VACUUM removed") as info:
            log.require_files(log.snapshot(version))
        assert info.value.oldest_readable_version == v3
        assert f"oldest readable version is {v3}" in str(info.value)
