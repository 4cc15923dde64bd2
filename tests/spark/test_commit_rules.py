"""Every public command goes through the commit rules, and a refused command writes nothing.

Table-driven: each table setup (append-only, an unknown writer feature, a CHECK constraint)
is hit with every public command. A violation must raise a typed error, publish no new log
version and leave no new file under the table root (the check runs before Spark writes data
where the violation is knowable up front, and at commit as the last gate).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

import deltatx
from deltatx import DeltaTable
from deltatx.errors import (
    AppendOnlyViolationError,
    ConstraintViolationError,
    DeltaError,
    UnsupportedFeatureError,
)
from deltatx.kernel.actions import ProtocolAction
from deltatx.kernel.codec import serialize_commit
from deltatx.kernel.log_paths import commit_name
from deltatx.kernel.operations import Operation, OperationName
from deltatx.log.delta_log import DeltaLog
from deltatx.log.transaction import OptimisticTransaction

SCHEMA = "id BIGINT, v BIGINT"
Command = Callable[[SparkSession, str], object]


def _df(spark: SparkSession, start: int, end: int):  # type: ignore[no-untyped-def]
    return spark.createDataFrame([(i, i * 10) for i in range(start, end)], SCHEMA)


def _log_api(path: str) -> None:
    log = DeltaLog.for_table(path)
    txn = OptimisticTransaction(log, log.snapshot())
    files = txn.scan()
    txn.remove_files(files[:1])
    txn.add_files([replace(files[0], path="copied.parquet", deletion_vector=None)])
    txn.record_operation(Operation(OperationName.MANUAL_UPDATE, {}), {})
    txn.commit()


def _merge(spark: SparkSession, path: str) -> None:
    (
        DeltaTable.for_path(spark, path)
        .alias("t")
        .merge(_df(spark, 1, 3).alias("s"), "t.id = s.id")
        .when_matched_update_all()
        .when_not_matched_insert_all()
        .execute()
    )


COMMANDS: dict[str, Command] = {
    "append": lambda s, p: deltatx.write(_df(s, 10, 12), p, mode="append"),
    "overwrite": lambda s, p: deltatx.write(_df(s, 10, 12), p, mode="overwrite"),
    "replace_where": lambda s, p: deltatx.write(
        _df(s, 1, 2), p, mode="overwrite", replace_where="id = 1"
    ),
    "delete": lambda s, p: DeltaTable.for_path(s, p).delete("id = 1"),
    "update": lambda s, p: DeltaTable.for_path(s, p).update("id = 1", {"v": "v + 1"}),
    "merge": _merge,
    "optimize": lambda s, p: DeltaTable.for_path(s, p).optimize().execute_compaction(),
    "restore": lambda s, p: DeltaTable.for_path(s, p).restore_to_version(0),
    "log_api": lambda s, p: _log_api(p),
}


def _append_only(spark: SparkSession, path: str) -> None:
    deltatx.write(_df(spark, 0, 5), path, properties={"delta.appendOnly": "true"})
    deltatx.write(_df(spark, 5, 10), path)


def _unknown_writer_feature(spark: SparkSession, path: str) -> None:
    deltatx.write(_df(spark, 0, 5), path)
    deltatx.write(_df(spark, 5, 10), path)
    log = DeltaLog.for_table(path)
    old = log.snapshot().protocol
    # Another engine upgraded the table to a writer feature deltatx does not know.
    future = ProtocolAction(3, 7, old.reader_features, (*(old.writer_features or ()), "future"))
    Path(path, "_delta_log", commit_name(2)).write_bytes(serialize_commit([future]))


def _check_constraint(spark: SparkSession, path: str) -> None:
    deltatx.write(_df(spark, 0, 5), path)
    deltatx.write(_df(spark, 5, 10), path)
    DeltaTable.for_path(spark, path).set_properties({"delta.constraints.positive": "id >= 0"})


SETUPS: dict[str, Callable[[SparkSession, str], None]] = {
    "append_only": _append_only,
    "unknown_writer_feature": _unknown_writer_feature,
    "check_constraint": _check_constraint,
}
ALL = set(COMMANDS)
# Which commands each setup forbids, and with which error (PROTOCOL.md "Append-only Tables",
# "Table Features", "Column Invariants" and "CHECK Constraints").
FORBIDDEN: dict[str, tuple[set[str], type[DeltaError]]] = {
    "append_only": (ALL - {"append", "optimize"}, AppendOnlyViolationError),
    "unknown_writer_feature": (ALL, UnsupportedFeatureError),
    # deltatx checks constraints on the rows its commands write; only files staged through
    # the log API carry unchecked rows.
    "check_constraint": ({"log_api"}, UnsupportedFeatureError),
}
CASES = [(s, c) for s in SETUPS for c in sorted(COMMANDS)]


def _files(root: Path) -> set[str]:
    out = set()
    for dirpath, _, names in os.walk(root):
        for n in names:
            out.add(os.path.relpath(os.path.join(dirpath, n), root))
    return out


@pytest.mark.sample(every=2)
@pytest.mark.parametrize(("setup", "command"), CASES)
def test_every_command_obeys_the_commit_rules(
    spark: SparkSession, tmp_path: Path, setup: str, command: str
) -> None:
    root = tmp_path / "t"
    SETUPS[setup](spark, str(root))
    forbidden, error = FORBIDDEN[setup]
    version = DeltaLog.for_table(str(root)).latest_version()
    before = _files(root)
    if command not in forbidden:
        COMMANDS[command](spark, str(root))
        assert DeltaLog.for_table(str(root)).latest_version() == version + 1
        return
    with pytest.raises(error):
        COMMANDS[command](spark, str(root))
    assert DeltaLog.for_table(str(root)).latest_version() == version
    assert _files(root) == before, "a refused command left files behind"


VIOLATING: dict[str, Command] = {
    "append": lambda s, p: deltatx.write(_df(s, -2, 0), p, mode="append"),
    "overwrite": lambda s, p: deltatx.write(_df(s, -2, 0), p, mode="overwrite"),
    "update": lambda s, p: DeltaTable.for_path(s, p).update("id = 1", {"id": "-id"}),
    "merge": lambda s, p: (
        DeltaTable.for_path(s, p)
        .alias("t")
        .merge(_df(s, -3, -1).alias("s"), "t.id = s.id")
        .when_not_matched_insert_all()
        .execute()
    ),
}


@pytest.mark.parametrize("command", sorted(VIOLATING))
def test_rows_breaking_a_check_constraint_are_refused_before_writing(
    spark: SparkSession, tmp_path: Path, command: str
) -> None:
    """PROTOCOL.md "CHECK Constraints": writers must refuse rows that break one."""
    root = tmp_path / "t"
    _check_constraint(spark, str(root))
    version = DeltaLog.for_table(str(root)).latest_version()
    before = _files(root)
    with pytest.raises(ConstraintViolationError, match="positive"):
        VIOLATING[command](spark, str(root))
    assert DeltaLog.for_table(str(root)).latest_version() == version
    assert _files(root) == before
