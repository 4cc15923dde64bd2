"""Operations (kernel/operations.py) and the read set (kernel/transaction.py)."""

from __future__ import annotations

import dataclasses

import pytest

from deltatx.kernel.actions import AddCDCFile, AddFile, RemoveFile, SetTransaction
from deltatx.kernel.expressions import TRUE, Column, Comparison, ComparisonOp, Literal
from deltatx.kernel.isolation import IsolationLevel, resolve_isolation_level
from deltatx.kernel.operations import Operation, OperationName
from deltatx.kernel.transaction import ReadSet, ReadTracker, is_blind_append

CHANGES_DATA = {
    "WRITE",
    "STREAMING UPDATE",
    "DELETE",
    "TRUNCATE",
    "MERGE",
    "UPDATE",
    "CREATE TABLE AS SELECT",
    "REPLACE TABLE",
    "REPLACE TABLE AS SELECT",
    "CREATE OR REPLACE TABLE",
    "CREATE OR REPLACE TABLE AS SELECT",
    "RESTORE",
}


def test_names_are_delta_spark_spellings() -> None:
    assert OperationName.MANUAL_UPDATE.value == "Manual Update"
    assert OperationName.SET_TBLPROPERTIES.value == "SET TBLPROPERTIES"
    assert OperationName("CREATE OR REPLACE TABLE") is OperationName.CREATE_OR_REPLACE_TABLE
    for name in ("VACUUM START", "VACUUM END", "UPGRADE PROTOCOL", "REORG", "ADD COLUMNS"):
        assert OperationName(name).value == name


@pytest.mark.parametrize("name", list(OperationName), ids=lambda n: n.value)
def test_changes_data(name: OperationName) -> None:
    """conflict-spec 2.3: the operations whose commits change data by nature."""
    assert Operation(name).changes_data is (name.value in CHANGES_DATA)


def test_optimize_downgrades_under_write_serializable() -> None:
    """Seed 004: OPTIMIZE changes no data, so it runs at SnapshotIsolation."""
    rewrite = [
        RemoveFile("a", data_change=False),
        AddFile("b", {}, 1, 0, data_change=False),
    ]
    for level in (IsolationLevel.SERIALIZABLE, IsolationLevel.WRITE_SERIALIZABLE):
        got = resolve_isolation_level(
            rewrite,
            table_level=level,
            operation_changes_data=Operation(OperationName.OPTIMIZE).changes_data,
        )
        assert got is IsolationLevel.SNAPSHOT_ISOLATION
    got = resolve_isolation_level(
        [],
        table_level=IsolationLevel.WRITE_SERIALIZABLE,
        operation_changes_data=Operation(OperationName.DELETE).changes_data,
    )
    assert got is IsolationLevel.WRITE_SERIALIZABLE


def test_commit_parameters_are_json_encoded_like_delta_spark() -> None:
    op = Operation(
        OperationName.WRITE,
        {
            "mode": "Append",
            "partitionBy": ["date"],
            "predicate": [],
            "isManaged": False,
            "properties": {"a": "1"},
            "n": 3,
            "description": None,
        },
    )
    assert op.commit_parameters() == {
        "mode": "Append",
        "partitionBy": '["date"]',
        "predicate": "[]",
        "isManaged": "false",
        "properties": '{"a":"1"}',
        "n": "3",
    }
    assert Operation(OperationName.DELETE).commit_parameters() == {}


def test_operation_is_frozen() -> None:
    op = Operation(OperationName.DELETE, {"predicate": ["id = 1"]})
    with pytest.raises(dataclasses.FrozenInstanceError):
        op.name = OperationName.UPDATE  # type: ignore[misc]


# --------------------------------------------------------------------------- read set


def add(path: str) -> AddFile:
    return AddFile(path, {}, 1, 0, True)


def test_tracker_records_scans_files_and_flags() -> None:
    t = ReadTracker()
    pred = Comparison(ComparisonOp.EQ, Column("x"), Literal(1))
    t.record_scan(pred, [add("a"), add("b")])
    t.record_scan(pred, [add("a")])
    t.record_app_id("q1")
    t.record_metadata_read()
    rs = t.freeze()
    assert rs.predicates == (pred,)
    assert set(rs.read_files) == {"a", "b"}
    assert rs.read_paths == frozenset({"a", "b"})
    assert rs.read_app_ids == frozenset({"q1"})
    assert rs.read_metadata and not rs.read_whole_table
    assert rs.depends_on_files


def test_whole_table_and_partition_predicate() -> None:
    t = ReadTracker()
    t.record_partition_predicate(TRUE)
    assert t.freeze().read_files == {}
    t.record_whole_table()
    rs = t.freeze()
    assert rs.read_whole_table and rs.predicates == (TRUE,)


def test_frozen_read_set_is_a_snapshot() -> None:
    t = ReadTracker()
    rs = t.freeze()
    t.record_scan(TRUE, [add("a")])
    assert not rs.depends_on_files


@pytest.mark.parametrize(
    ("actions", "read_set", "blind"),
    [
        ([], ReadSet(), True),  # vacuously
        ([add("a")], ReadSet(), True),
        ([add("a"), SetTransaction("q", 1)], ReadSet(read_app_ids=frozenset({"q"})), True),
        ([add("a")], ReadSet(read_metadata=True), True),  # OT01: t.metadata then append
        ([add("a"), RemoveFile("b")], ReadSet(), False),
        ([add("a"), AddCDCFile("c", {}, 1)], ReadSet(), False),
        ([add("a")], ReadSet(predicates=(TRUE,)), False),
        ([add("a")], ReadSet(read_files={"b": add("b")}), False),
        ([add("a")], ReadSet(read_whole_table=True), False),
    ],
)
def test_is_blind_append(actions: list[object], read_set: ReadSet, blind: bool) -> None:
    """Seed 000: an INSERT that reads nothing of the table is a blind append."""
    assert is_blind_append(actions, read_set) is blind  # type: ignore[arg-type]
