"""DML reports its phases through deltatx.progress (logged; printed only when enabled)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

import deltatx
from deltatx import DeltaTable


def test_update_and_merge_report_their_phases(
    spark: SparkSession, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = str(tmp_path / "t")
    DeltaTable.create(spark, path, schema="id BIGINT, v STRING")
    deltatx.write(spark.createDataFrame([(1, "a"), (2, "b")], "id BIGINT, v STRING"), path)
    dt = DeltaTable.for_path(spark, path)
    deltatx.enable_progress(False)
    try:
        with caplog.at_level(logging.INFO, logger="deltatx.progress"):
            dt.update(condition="id = 1", set={"v": "'z'"})
            source = spark.createDataFrame([(2, "y")], "id BIGINT, v STRING")
            dt.alias("t").merge(
                source.alias("s"), "t.id = s.id"
            ).when_matched_update_all().execute()
    finally:
        deltatx.enable_progress(None)
    lines = [r.getMessage() for r in caplog.records]
    update = [line for line in lines if line.startswith(f"UPDATE {path}:")]
    merge = [line for line in lines if line.startswith(f"MERGE {path}:")]
    assert [line.split(": ", 1)[1] for line in update[:1]] == ["scanning…"]
    assert any("committing…" in line for line in update)
    assert any("writing…" in line for line in update)
    assert update[-1].split(": ", 1)[1].startswith("done in")
    assert any("scanning…" in line for line in merge) and any(
        "committing…" in line for line in merge
    )


def test_a_commit_that_loses_a_race_reports_rebasing(
    spark: SparkSession, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = str(tmp_path / "t")
    deltatx.write(spark.range(3), path)
    dt = DeltaTable.for_path(spark, path)
    deltatx.enable_progress(False)
    try:
        with caplog.at_level(logging.INFO, logger="deltatx.progress"):
            txn = dt.begin()
            txn.write(spark.range(10, 12), mode="append")
            deltatx.write(spark.range(20, 22), path)  # wins the race
            txn.commit()
    finally:
        deltatx.enable_progress(None)
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("COMMIT ")]
    phases = [line.split(": ", 1)[1] for line in lines]
    assert phases[0] == "committing…"
    assert any(p.startswith("rebasing…") for p in phases), phases
    assert phases[-1].startswith("done in")
    assert dt.version() == 2
