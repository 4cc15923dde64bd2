"""VACUUM: what it keeps (every spelling of live files, both kinds of stored vectors)."""

from __future__ import annotations

import logging
import os
from dataclasses import replace
from pathlib import Path

import pytest

from deltatx.errors import InvalidArgumentError
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


def test_a_short_retention_is_refused_and_forcing_it_is_flagged_unsafe(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The chosen answer to VACUUM racing an in-flight writer: as in delta-spark, the retention
    check protects it, and turning the check off is documented and logged as unsafe (the
    writer's uncommitted file is deleted, and its later commit names a missing file)."""
    root, log = _table(tmp_path)
    in_flight = begin(log)
    _file(root, "in-flight.parquet")  # written by a transaction that has not committed yet
    with pytest.raises(InvalidArgumentError, match="in-flight writers could lose files"):
        vacuum(log, retention_hours=0, now_ms=LATER)
    assert (root / "in-flight.parquet").exists()
    with caplog.at_level(logging.WARNING, logger="deltatx.log.vacuum"):
        deleted = _vacuum(log)
    assert deleted == {"in-flight.parquet"}
    assert any("UNSAFE while other writers are active" in r.getMessage() for r in caplog.records)
    in_flight.add_files([add("in-flight.parquet")])
    version = in_flight.commit()  # the documented hazard: the commit names a deleted file
    assert "in-flight.parquet" in {f.path for f in log.snapshot(version).add_files()}
    assert not (root / "in-flight.parquet").exists()


def test_change_data_files_age_out_with_the_retention(tmp_path: Path) -> None:
    # delta-spark's VACUUM deletes change data files older than the retention: no snapshot
    # references them, so keeping them would grow the table forever.
    root, log = _table(tmp_path)
    _file(root, "live.parquet")
    _file(root, "_change_data/cdc-00000-a.c000.snappy.parquet")
    _file(root, "_change_data/date=2024-01-01/cdc-00001-b.c000.snappy.parquet")
    append(log, add("live.parquet"))
    modified = os.path.getmtime(root / "_change_data" / "cdc-00000-a.c000.snappy.parquet")
    within = vacuum(log, dry_run=True, now_ms=int(modified * 1000) + 3_600_000)
    assert within.deleted_paths == ()
    assert _vacuum(log) == {
        "_change_data/cdc-00000-a.c000.snappy.parquet",
        "_change_data/date=2024-01-01/cdc-00001-b.c000.snappy.parquet",
    }
    assert (root / "live.parquet").exists()
