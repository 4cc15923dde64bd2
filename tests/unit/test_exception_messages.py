"""The conflict exceptions as the checker raises them: class, message prefix, attributes, hint.

Seed 000 documents six exceptions and when each is raised; decision 7 of conflict-spec says
each carries the winning version and operation, what collided and a hint.
"""

from __future__ import annotations

import pytest

from deltatx.errors import (
    ConcurrentAppendException,
    ConcurrentDeleteDeleteException,
    ConcurrentDeleteReadException,
    ConcurrentModificationException,
    ConcurrentTransactionException,
    MetadataChangedException,
    ProtocolChangedException,
)
from deltatx.kernel.actions import DomainMetadata, Metadata
from deltatx.kernel.operations import OperationName

from .conflict_harness import (
    WS,
    Case,
    S,
    Table,
    add,
    app,
    bare,
    metadata,
    protocol,
    rm,
    run,
    scan,
    schema,
    txn,
    value_stats,
    whole,
    win,
)

PART = Table(
    schema(date="string", id="long"),
    ("date",),
    (add("date=2024-01-01/a", {"date": "2024-01-01"}),),
)
FLAT = Table(
    schema(date="string", id="long"), (), (add("a", stats=value_stats(1, 5, column="id")),)
)


def raised(case: Case, level=S) -> ConcurrentModificationException:  # type: ignore[no-untyped-def]
    with pytest.raises(ConcurrentModificationException) as info:
        run(case, level)
    return info.value


def case(table: Table, reads, writes, *winners, op=OperationName.DELETE, **kw) -> Case:  # type: ignore[no-untyped-def]
    return Case(
        "msg",
        "messages",
        table,
        tuple(reads),
        tuple(writes),
        tuple(winners),
        (None,) * 3,
        op=op,
        **kw,
    )


def common(
    e: ConcurrentModificationException, cls: type, prefix: str, version: int, op: str
) -> None:
    assert type(e) is cls
    assert str(e).startswith(f"[{prefix}] ")
    assert e.winning_version == version
    assert e.winning_operation == op
    assert e.hint and e.hint in str(e)


def test_concurrent_append_partitioned_names_partition_and_suggests_condition() -> None:
    e = raised(
        case(
            PART,
            [scan("date >= '2024-01-01'")],
            [rm("date=2024-01-01/a", {"date": "2024-01-01"})],
            win(add("date=2024-01-01/n", {"date": "2024-01-01"}), op="MERGE", read=True),
        )
    )
    common(e, ConcurrentAppendException, "DELTA_CONCURRENT_APPEND", 2, "MERGE")
    assert e.partition_values == {"date": "2024-01-01"}
    assert e.partition == "[date=2024-01-01]"
    assert e.file == "date=2024-01-01/n"
    assert "date = '2024-01-01'" in e.hint
    assert "[date=2024-01-01]" in e.hint


def test_concurrent_append_unpartitioned_suggests_partitioning() -> None:
    e = raised(
        case(
            FLAT,
            [scan("id <= 3")],
            [rm("a")],
            win(add("b", stats=value_stats(2, 9, column="id")), op="WRITE", read=True),
        )
    )
    common(e, ConcurrentAppendException, "DELTA_CONCURRENT_APPEND", 2, "WRITE")
    assert e.partition_values is None
    assert "not partitioned" in e.hint and "partition the table" in e.hint
    assert "(id)" in e.hint


def test_concurrent_append_serializable_blind_append_mentions_write_serializable() -> None:
    """Seed 000: at Serializable blind appends may conflict; WriteSerializable allows them."""
    c = case(
        PART,
        [scan("date = '2024-01-01'")],
        [rm("date=2024-01-01/a", {"date": "2024-01-01"})],
        win(add("date=2024-01-01/n", {"date": "2024-01-01"}), op="WRITE"),
    )
    e = raised(c, S)
    common(e, ConcurrentAppendException, "DELTA_CONCURRENT_APPEND", 2, "WRITE")
    assert "blind append" in e.hint and "WriteSerializable" in e.hint
    run(c, WS)  # and indeed WriteSerializable allows it


def test_concurrent_append_whole_table() -> None:
    e = raised(
        case(
            PART,
            [whole()],
            [add("date=y/z", {"date": "y"})],
            win(add("date=x/n", {"date": "x"}), read=True),
        )
    )
    assert "whole table" in e.hint


def test_delete_read() -> None:
    e = raised(
        case(
            PART,
            [scan("date = '2024-01-01'")],
            [],
            win(rm("date=2024-01-01/a", {"date": "2024-01-01"}), op="DELETE"),
        )
    )
    common(e, ConcurrentDeleteReadException, "DELTA_CONCURRENT_DELETE_READ", 2, "DELETE")
    assert e.file == "date=2024-01-01/a"
    assert e.partition_values == {"date": "2024-01-01"}
    assert "deleted or rewrote" in e.hint


def test_delete_read_by_compaction() -> None:
    e = raised(case(PART, [scan()], [], win(rm("date=2024-01-01/a", dc=False), op="OPTIMIZE")))
    assert "compacted" in e.hint and "OPTIMIZE" in e.hint


def test_delete_delete_compactions() -> None:
    """Seed 000: two concurrent compactions rewriting the same files."""
    e = raised(
        case(
            FLAT,
            [scan()],
            [rm("a", dc=False), add("c", dc=False)],
            win(rm("a", dc=False), add("b", dc=False), op="OPTIMIZE", read=True),
            op=OperationName.OPTIMIZE,
        )
    )
    common(e, ConcurrentDeleteDeleteException, "DELTA_CONCURRENT_DELETE_DELETE", 2, "OPTIMIZE")
    assert e.file == "a"
    assert "compactions" in e.hint


def test_metadata_changed_says_what_changed() -> None:
    changed = Metadata(
        id="m",
        schema_string=PART.schema.to_json(),
        partition_columns=("date",),
        configuration={"delta.isolationLevel": "Serializable"},
    )
    e = raised(case(PART, [], [], win(changed, op="SET TBLPROPERTIES")))
    common(e, MetadataChangedException, "DELTA_METADATA_CHANGED", 2, "SET TBLPROPERTIES")
    assert "delta.isolationLevel" in e.hint
    e = raised(case(PART, [], [], win(metadata(Table(schema(x="long"))), op="ADD COLUMNS")))
    assert "partition columns" in e.hint or "schema" in e.hint


def test_protocol_changed_at_version_zero_says_create_table_first() -> None:
    """Seed 000: ProtocolChangedException when several writers create the table."""
    c = Case(
        "x",
        "x",
        PART,
        (),
        (protocol(), metadata(PART)),
        (win(protocol(), metadata(PART), op="CREATE TABLE"),),
        (None,) * 3,
        read_version=-1,
        first_winner_version=0,
    )
    e = raised(c)
    common(e, ProtocolChangedException, "DELTA_PROTOCOL_CHANGED", 0, "CREATE TABLE")
    assert "several writers created the table" in e.hint.lower()
    assert "create" in e.hint and "first" in e.hint


def test_protocol_changed_later_names_versions() -> None:
    e = raised(case(PART, [], [], win(protocol(3, 7), op="UPGRADE PROTOCOL")))
    assert "reader version 3" in e.hint and "writer version 7" in e.hint


def test_concurrent_transaction_same_app_id() -> None:
    """Seed 000: two streaming queries with the same checkpoint (application id)."""
    e = raised(case(PART, [app("q1")], [], win(txn("q1", 7), op="STREAMING UPDATE")))
    common(e, ConcurrentTransactionException, "DELTA_CONCURRENT_TRANSACTION", 2, "STREAMING UPDATE")
    assert "same application id 'q1'" in e.hint


def test_concurrent_transaction_domain() -> None:
    c = case(PART, [], [DomainMetadata("my.domain", "{}")], win(DomainMetadata("my.domain", "{}")))
    e = raised(c)
    assert type(e) is ConcurrentTransactionException
    assert "A conflicting metadata domain my.domain is added." in str(e)
    row_tracking = case(
        PART,
        [],
        [DomainMetadata("delta.rowTracking", "{}")],
        win(DomainMetadata("delta.rowTracking", "{}")),
    )
    run(row_tracking, S)


def test_winner_without_commit_info_is_reported_as_transaction() -> None:
    e = raised(case(PART, [scan()], [], bare(rm("date=2024-01-01/a"))))
    assert e.winning_operation == "TRANSACTION"
