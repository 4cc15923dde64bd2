"""Destructive operations never read, write or delete outside the table root.

A crafted log names a canary file outside the table under each path form a log can hold:
relative (``../``), percent-encoded (``%2E%2E/``), absolute, ``file:`` URI, and a partition
directory that is a symbolic link to elsewhere. Every destructive operation (VACUUM, OPTIMIZE,
REORG, RESTORE, overwrite, checkpoint) then runs on the table. Whatever the operation answers,
the canary and its directory must be exactly as they were, and the canary's rows must never
reach the table: an operation either refuses with a typed deltatx error or works on the
table's own files only.

Absolute paths and ``file:`` URIs may name files outside the root (the Delta protocol allows
it, for shallow clones); those forms are still required never to be deleted or written, and
are planted as tombstones where an operation would otherwise legitimately read them.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

import deltatx
from deltatx import DeltaTable
from deltatx.errors import DeltaError
from deltatx.kernel.log_paths import commit_name
from deltatx.log.delta_log import DeltaLog

CANARY_ID = 666_666
SCHEMA = "id BIGINT, p STRING"


def _relative(base: Path) -> str:
    return "../outside/canary.parquet"


def _percent(base: Path) -> str:
    return "%2E%2E/outside/canary.parquet"


def _absolute(base: Path) -> str:
    return str(base / "outside" / "canary.parquet")


def _file_uri(base: Path) -> str:
    return (base / "outside" / "canary.parquet").as_uri()


def _symlink(base: Path) -> str:
    (base / "t" / "p=x").symlink_to(base / "outside", target_is_directory=True)
    return "p=x/canary.parquet"


FORMS: dict[str, Callable[[Path], str]] = {
    "relative": _relative,
    "percent-encoded": _percent,
    "absolute": _absolute,
    "file-uri": _file_uri,
    "symlink": _symlink,
}
# Forms the protocol lets a reader follow: planted as tombstones only (see module docstring).
OUTSIDE_ALLOWED = {"absolute", "file-uri"}


def _plant(root: Path, path: str, *, live: bool) -> None:
    """Appends a raw commit naming ``path``, as a live file or as an expired tombstone."""
    log = DeltaLog.for_table(str(root))
    version = log.latest_version() + 1
    if live:
        action = {
            "add": {
                "path": path,
                "partitionValues": {"p": "x"},
                "size": 1000,
                "modificationTime": 1,
                "dataChange": True,
            }
        }
    else:
        action = {
            "remove": {
                "path": path,
                "deletionTimestamp": 1,
                "dataChange": True,
                "partitionValues": {"p": "x"},
                "size": 1000,
            }
        }
    lines = [{"commitInfo": {"operation": "WRITE", "timestamp": 1}}, action]
    (root / "_delta_log" / commit_name(version)).write_text(
        "".join(json.dumps(line) + "\n" for line in lines)
    )


def _vacuum(spark: SparkSession, root: Path) -> object:
    return DeltaTable.for_path(spark, str(root)).vacuum(0, enforce_retention=False)


def _optimize(spark: SparkSession, root: Path) -> object:
    return DeltaTable.for_path(spark, str(root)).optimize().execute_compaction()


def _reorg(spark: SparkSession, root: Path) -> object:
    return DeltaTable.for_path(spark, str(root)).reorg_purge()


def _restore(spark: SparkSession, root: Path) -> object:
    dt = DeltaTable.for_path(spark, str(root))
    planted = dt.version()
    deltatx.write(spark.createDataFrame([(3, "a")], SCHEMA), str(root), mode="append")
    return dt.restore_to_version(planted)


def _overwrite(spark: SparkSession, root: Path) -> object:
    df = spark.createDataFrame([(7, "a"), (8, "x")], SCHEMA)
    return deltatx.write(df, str(root), mode="overwrite")


def _checkpoint(spark: SparkSession, root: Path) -> object:
    log = DeltaLog.for_table(str(root))
    log.checkpoint()
    return log.snapshot().version


OPERATIONS: dict[str, Callable[[SparkSession, Path], object]] = {
    "vacuum": _vacuum,
    "optimize": _optimize,
    "reorg": _reorg,
    "restore": _restore,
    "overwrite": _overwrite,
    "checkpoint": _checkpoint,
}


def _tree(path: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()
    }


@pytest.mark.sample(every=2)
@pytest.mark.parametrize("form", sorted(FORMS))
@pytest.mark.parametrize("operation", sorted(OPERATIONS))
def test_destructive_operations_leave_the_canary_alone(
    spark: SparkSession, tmp_path: Path, form: str, operation: str
) -> None:
    root = tmp_path / "t"
    outside = tmp_path / "outside"
    deltatx.write(
        spark.createDataFrame([(1, "a"), (2, "a")], SCHEMA), str(root), partition_by=["p"]
    )
    outside.mkdir()
    pq.write_table(pa.table({"id": [CANARY_ID]}), outside / "canary.parquet")
    (outside / "neighbour.txt").write_text("neighbour")
    before = _tree(outside)

    path = FORMS[form](tmp_path)
    _plant(root, path, live=form not in OUTSIDE_ALLOWED or operation == "restore")
    if form in OUTSIDE_ALLOWED and operation == "restore":
        # Restoring the version that names the file must not re-add an outside file.
        _plant(root, path, live=False)

    with contextlib.suppress(DeltaError):  # a typed refusal is a correct answer
        OPERATIONS[operation](spark, root)

    assert _tree(outside) == before, f"{operation} touched the canary through a {form} path"
    try:
        ids = {r.id for r in DeltaTable.for_path(spark, str(root)).to_df().collect()}
    except DeltaError:
        return  # the crafted file is still live and the read refuses it: never read
    assert CANARY_ID not in ids, f"{operation} read the canary through a {form} path"
