"""VACUUM: what it keeps (every spelling of live files, both kinds of stored vectors)."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

from deltatx.kernel.deletion_vectors import dv_relative_path
from deltatx.log import DeltaLog
from deltatx.log.deletion_vectors import write_dvs
from deltatx.log.vacuum import vacuum
from deltatx.storage import LocalLogStore

from ..logtables import add, append, begin, create_table

LATER = 10**13  # far after every file's modification time


def _table(tmp_path: Path) -> tuple[Path, DeltaLog]:
    root = tmp_path / "t"
    log = create_table(
        LocalLogStore(fsync=False),
        str(root),
        partitioned=False,
        configuration={"delta.enableDeletionVectors": "true"},
    )
    return root, log


def _file(root: Path, relative: str) -> None:
    (root / relative).parent.mkdir(parents=True, exist_ok=True)
    (root / relative).write_bytes(b"x")


def _vacuum(log: DeltaLog) -> set[str]:
    metrics = vacuum(log, retention_hours=0, enforce_retention=False, now_ms=LATER)
    return {os.path.relpath(p, log.table_path) for p in metrics.deleted_paths}


def test_unreferenced_files_go_and_referenced_ones_stay(tmp_path: Path) -> None:
    root, log = _table(tmp_path)
    for name in ("live.parquet", "a b/spelt.parquet", "orphan.parquet", "_hidden/x"):
        _file(root, name)
    append(log, add("live.parquet"), add(f"file://{root}/a%20b/spelt.parquet"))
    assert _vacuum(log) == {"orphan.parquet"}
    assert (root / "a b" / "spelt.parquet").exists() and (root / "_hidden" / "x").exists()


def test_a_live_vector_stored_by_absolute_path_is_kept(tmp_path: Path) -> None:
    root, log = _table(tmp_path)
    _file(root, "data.parquet")
    [u] = write_dvs(log, [[0]])
    u_file = dv_relative_path(u.path_or_inline_dv)
    (root / "dvs").mkdir()
    os.rename(root / u_file, root / "dvs" / "kept.bin")
    p = replace(u, storage_type="p", path_or_inline_dv=f"file://{root}/dvs/kept.bin")
    txn = begin(log)
    txn.add_files([replace(add("data.parquet"), deletion_vector=p)])
    txn.commit()
    _file(root, "dvs/orphan.bin")
    assert _vacuum(log) == {"dvs/orphan.bin"}
    assert (root / "dvs" / "kept.bin").exists()


def test_a_live_vector_stored_by_id_is_kept(tmp_path: Path) -> None:
    root, log = _table(tmp_path)
    _file(root, "data.parquet")
    [u] = write_dvs(log, [[0]])
    txn = begin(log)
    txn.add_files([replace(add("data.parquet"), deletion_vector=u)])
    txn.commit()
    assert _vacuum(log) == set()
    assert (root / dv_relative_path(u.path_or_inline_dv)).exists()


def test_files_reached_through_links_are_never_deleted(tmp_path: Path) -> None:
    root, log = _table(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "precious.parquet").write_bytes(b"p")
    (root / "link").symlink_to(outside)
    assert _vacuum(log) == set()
    assert (outside / "precious.parquet").exists()
