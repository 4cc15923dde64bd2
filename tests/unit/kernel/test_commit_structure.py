"""A commit's structure (partition values, no file or app id twice), checked in check_commit's
one pass over the actions: the same error as checking the rules first and the structure after.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from deltatx.errors import DeltaError, InvalidArgumentError
from deltatx.kernel.actions import (
    Action,
    AddFile,
    DeletionVectorDescriptor,
    Metadata,
    ProtocolAction,
    RemoveFile,
    SetTransaction,
)
from deltatx.kernel.commit_rules import check_commit, check_structure
from deltatx.kernel.deletion_vectors import z85_encode
from deltatx.kernel.operations import Operation, OperationName
from deltatx.kernel.table_configuration import TableConfiguration

ROOT = "/data/t"
SCHEMA = json.dumps(
    {
        "type": "struct",
        "fields": [
            {"name": "id", "type": "long", "nullable": True, "metadata": {}},
            {"name": "p", "type": "string", "nullable": True, "metadata": {}},
            {"name": "q", "type": "string", "nullable": True, "metadata": {}},
        ],
    }
)
PROTOCOL = ProtocolAction(3, 7, ("deletionVectors",), ("deletionVectors",))
PARTITIONED = TableConfiguration.of(PROTOCOL, Metadata("t", SCHEMA, ("p",), {}))
UNPARTITIONED = TableConfiguration.of(PROTOCOL, Metadata("t", SCHEMA, (), {}))
TWO_COLUMNS = TableConfiguration.of(PROTOCOL, Metadata("t", SCHEMA, ("p", "q"), {}))
WRITE = Operation(OperationName.WRITE)


def dv(offset: int) -> DeletionVectorDescriptor:
    return DeletionVectorDescriptor("u", z85_encode(bytes(16)), 10, 1, offset=offset)


def add(path: str, values: dict[str, str | None] | None = None, **kw: object) -> AddFile:
    return AddFile(
        path=path,
        partition_values={"p": "a"} if values is None else values,
        size=1,
        modification_time=1,
        data_change=True,
        **kw,  # type: ignore[arg-type]
    )


def remove(path: str) -> RemoveFile:
    return RemoveFile(path=path, deletion_timestamp=1, data_change=True)


@pytest.mark.parametrize(
    ("actions", "match"),
    [
        ([add("a.parquet", {})], r"partition values \[\] do not match .*\['p'\]"),
        ([add("a.parquet", {"p": "a", "q": "b"})], "do not match"),
        ([add("a.parquet"), add("a.parquet")], "add a.parquet appears twice"),
        ([add("a.parquet", deletion_vector=dv(1))] * 2, "add a.parquet appears twice"),
        ([remove("a.parquet"), remove("a.parquet")], "remove a.parquet appears twice"),
        ([SetTransaction("app", 1, 1), SetTransaction("app", 2, 1)], "app id 'app'"),
    ],
)
def test_each_structural_fault_is_refused_naming_it(actions: list[Action], match: str) -> None:
    with pytest.raises(InvalidArgumentError, match=match):
        check_commit(PARTITIONED, actions, WRITE, table_root=ROOT, structure=True)
    check_commit(PARTITIONED, actions, WRITE, table_root=ROOT)  # not without ``structure``


def test_one_file_under_two_deletion_vectors_or_none_is_not_a_duplicate() -> None:
    actions = [
        add("a.parquet"),
        add("a.parquet", deletion_vector=dv(1)),
        add("a.parquet", deletion_vector=dv(2)),
    ]
    check_commit(PARTITIONED, actions, WRITE, table_root=ROOT, structure=True)


def test_a_protocol_rule_is_reported_before_a_structural_fault() -> None:
    actions = [add("a.parquet", {}), add("../x.parquet")]
    with pytest.raises(InvalidArgumentError, match="escapes"):
        check_commit(PARTITIONED, actions, WRITE, table_root=ROOT, structure=True)


def _outcome(call: object) -> tuple[type[BaseException], str] | None:
    try:
        call()  # type: ignore[operator]
    except DeltaError as exc:
        return type(exc), str(exc)
    return None


paths = st.sampled_from(["a.parquet", "b.parquet", "p=a/c.parquet", "../x.parquet", "d e.parquet"])
values = st.sampled_from(
    [
        {"p": "a"},
        {"p": None},
        {},
        {"q": "a"},
        {"p": "a", "q": "b"},
        {"q": "b", "p": "a"},
        {"id": "1", "q": "b"},
    ]
)
file_actions = st.one_of(
    st.builds(add, paths, values),
    st.builds(add, paths, values, deletion_vector=st.builds(dv, st.integers(1, 2))),
    st.builds(remove, paths),
    st.builds(SetTransaction, st.sampled_from(["x", "y"]), st.integers(0, 2), st.just(1)),
)


@settings(max_examples=400, deadline=None)
@given(
    st.sampled_from([PARTITIONED, UNPARTITIONED, TWO_COLUMNS]), st.lists(file_actions, max_size=6)
)
def test_one_pass_raises_what_rules_then_structure_raise(
    configuration: TableConfiguration, actions: list[Action]
) -> None:
    """The merged pass gives the outcome of the two passes it replaced, message included.

    With no partition column, one, or two: the pass tests the partition values' keys in a
    way of its own for each width.
    """

    def two_passes() -> None:
        check_commit(configuration, actions, WRITE, table_root=ROOT)
        check_structure(configuration, actions)

    merged = _outcome(
        lambda: check_commit(configuration, actions, WRITE, table_root=ROOT, structure=True)
    )
    assert merged == _outcome(two_passes)
