"""Writes the storage refuses, or that would leave the table root, get typed errors.

Hardening findings: a 300-character partition value and a table directory that cannot be
written surfaced as raw Java errors; a write into a partition directory that is a symbolic
link to elsewhere landed outside the table.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

import deltatx
from deltatx import DeltaTable
from deltatx.errors import InvalidArgumentError, InvalidTableError, StorageAccessError


def _files_under(path: Path) -> set[str]:
    return {str(p.relative_to(path)) for p in path.rglob("*") if p.is_file()}


def test_a_partition_value_too_long_for_a_directory_name_is_refused(
    spark: SparkSession, table_dir: Path
) -> None:
    deltatx.write(spark.createDataFrame([(1, "short")], "id INT, p STRING"), str(table_dir),
                  partition_by=["p"])  # fmt: skip
    before = _files_under(table_dir)
    df = spark.createDataFrame([(2, "x" * 300)], "id INT, p STRING")
    with pytest.raises(InvalidArgumentError, match="too long to be part of a directory name"):
        deltatx.write(df, str(table_dir), mode="append")
    assert _files_under(table_dir) == before
    assert DeltaTable.for_path(spark, str(table_dir)).version() == 0


@pytest.fixture
def immutable_dir(tmp_path: Path) -> Iterator[Path]:
    """A directory nobody may write into, the current user included (root too)."""
    path = tmp_path / "locked"
    path.mkdir()
    if os.geteuid() != 0:
        path.chmod(0o555)
        yield path
        path.chmod(0o755)
        return
    if shutil.which("chattr") is None:
        pytest.skip("running as root without chattr: no way to make a directory unwritable")
    done = subprocess.run(["chattr", "+i", str(path)], capture_output=True)
    if done.returncode != 0:
        pytest.skip("this file system does not support the immutable attribute")
    try:
        yield path
    finally:
        subprocess.run(["chattr", "-i", str(path)], check=True)


def test_a_table_directory_that_cannot_be_written_gives_a_typed_error(
    spark: SparkSession, immutable_dir: Path
) -> None:
    df = spark.createDataFrame([(1, "a")], "id INT, p STRING")
    with pytest.raises(StorageAccessError, match="no permission") as info:
        deltatx.write(df, str(immutable_dir / "t"))
    assert "Py4J" not in str(info.value) and "Traceback" not in str(info.value)
    assert not list(immutable_dir.iterdir())


def test_writing_through_a_partition_symlink_out_of_the_root_is_refused(
    spark: SparkSession, tmp_path: Path
) -> None:
    root = tmp_path / "t"
    deltatx.write(spark.createDataFrame([(1, "a")], "id INT, p STRING"), str(root),
                  partition_by=["p"])  # fmt: skip
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "canary.txt").write_text("canary")
    (root / "p=b").symlink_to(outside, target_is_directory=True)
    before = _files_under(root)
    with pytest.raises(InvalidTableError, match="outside the table root"):
        deltatx.write(spark.createDataFrame([(2, "b")], "id INT, p STRING"), str(root))
    assert sorted(p.name for p in outside.iterdir()) == ["canary.txt"]
    assert _files_under(root) == before
    rows = DeltaTable.for_path(spark, str(root)).to_df().collect()
    assert [(r.id, r.p) for r in rows] == [(1, "a")]
