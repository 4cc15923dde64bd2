"""``spark.deltatx.storage.fsync``: local commits synced to disk by default, or not when asked.

Either way a DML commit lands whole (its version, its deletion vector, the rows it leaves);
a malformed value is refused before anything is written.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

import deltatx
from deltatx import DeltaTable
from deltatx.errors import InvalidArgumentError
from deltatx.spark.durability import FSYNC_CONF, fsync_enabled

_DV = {"delta.enableDeletionVectors": "true"}


@pytest.fixture
def fsync_setting(spark: SparkSession) -> Iterator[None]:
    yield
    spark.conf.unset(FSYNC_CONF)


@pytest.fixture
def fsyncs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    real = os.fsync

    def spy(fd: int) -> None:
        calls.append(fd)
        real(fd)

    monkeypatch.setattr(os, "fsync", spy)
    return calls


def _table(spark: SparkSession, path: Path) -> DeltaTable:
    deltatx.write(spark.range(100).toDF("id"), str(path), properties=_DV)
    return DeltaTable.for_path(spark, str(path))


@pytest.mark.parametrize(("setting", "synced"), [(None, True), ("true", True), ("FALSE ", False)])
def test_a_delete_commits_whole_and_syncs_as_the_session_says(
    spark: SparkSession,
    table_dir: Path,
    fsync_setting: None,
    fsyncs: list[int],
    setting: str | None,
    synced: bool,
) -> None:
    if setting is not None:
        spark.conf.set(FSYNC_CONF, setting)
    assert fsync_enabled(spark) is synced
    dt = _table(spark, table_dir)
    fsyncs.clear()
    metrics = dt.delete("id < 10")
    assert metrics.num_deleted_rows == 10
    assert metrics.num_deletion_vectors_added == 1
    # The DV file and its directory, the commit and the log directory.
    assert len(fsyncs) == (4 if synced else 0)
    rows = sorted(r.id for r in dt.to_df().collect())
    assert rows == list(range(10, 100))
    log = table_dir / "_delta_log"
    assert sorted(p.name for p in log.iterdir() if p.name.endswith(".json")) == [
        "00000000000000000000.json",
        "00000000000000000001.json",
    ]
    assert not [p for p in log.iterdir() if p.name.startswith(".")]


def test_a_write_without_fsync_is_still_exclusive(
    spark: SparkSession, table_dir: Path, fsync_setting: None, fsyncs: list[int]
) -> None:
    spark.conf.set(FSYNC_CONF, "false")
    dt = _table(spark, table_dir)
    first = dt.begin()
    second = dt.begin()
    first.delete("id < 10")
    second.delete("id < 10")
    first.commit()
    with pytest.raises(deltatx.ConcurrentModificationException):
        second.commit()
    assert fsyncs == []
    assert (table_dir / "_delta_log" / "00000000000000000001.json").exists()
    assert not (table_dir / "_delta_log" / "00000000000000000002.json").exists()


@pytest.mark.parametrize("value", ["no", "0", "", "yes please"])
def test_a_malformed_setting_is_refused_before_writing(
    spark: SparkSession, table_dir: Path, fsync_setting: None, value: str
) -> None:
    spark.conf.set(FSYNC_CONF, value)
    with pytest.raises(InvalidArgumentError, match=FSYNC_CONF):
        deltatx.write(spark.range(3).toDF("id"), str(table_dir))
    assert not table_dir.exists()
    spark.conf.unset(FSYNC_CONF)
    deltatx.write(spark.range(3).toDF("id"), str(table_dir))
    spark.conf.set(FSYNC_CONF, value)
    with pytest.raises(InvalidArgumentError, match="'true' or 'false'"):
        DeltaTable.for_path(spark, str(table_dir))
