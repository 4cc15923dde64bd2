"""OptimisticTransaction: what it sees, what it records, and its lifecycle."""

from __future__ import annotations

import pytest

from deltatx.errors import TransactionStateError, UnsupportedFeatureError
from deltatx.kernel.actions import AddCDCFile, AddFile, RemoveFile
from deltatx.kernel.expressions import TRUE
from deltatx.storage import MemoryLogStore

from ..logtables import add, append, begin, create_table, eq

ROOT = "/mem/txn"


def test_a_scan_sees_own_writes_and_records_only_the_snapshots_files() -> None:
    log = create_table(MemoryLogStore(), ROOT)
    append(log, add("a.parquet", "x"), add("b.parquet", "y"))
    txn = begin(log)
    txn.add_files([add("c.parquet", "x")])
    seen = [f.path for f in txn.scan(eq("part", "x"))]
    assert seen == ["a.parquet", "c.parquet"]
    reads = txn.tracker.freeze()
    assert reads.read_paths == {"a.parquet"}
    assert reads.predicates == (eq("part", "x"),)


def test_a_staged_remove_hides_the_file_from_later_scans() -> None:
    log = create_table(MemoryLogStore(), ROOT)
    append(log, add("a.parquet", "x"))
    txn = begin(log)
    [a] = txn.scan(None)
    txn.remove_files([a])
    assert txn.scan(None) == []
    assert txn.tracker.freeze().predicates == (TRUE,)
    staged = txn.staged_actions()
    assert any(isinstance(s, RemoveFile) and s.path == "a.parquet" for s in staged)


def test_a_committed_or_aborted_transaction_refuses_more_work() -> None:
    log = create_table(MemoryLogStore(), ROOT)
    txn = begin(log)
    txn.add_files([add("a.parquet", "x")])
    assert txn.commit() == 1
    with pytest.raises(TransactionStateError, match="committed"):
        txn.add_files([add("b.parquet", "x")])
    aborted = begin(log)
    aborted.abort()
    with pytest.raises(TransactionStateError, match="aborted"):
        aborted.scan(None)
    assert log.latest_version() == 1


def test_the_read_version_is_the_pinned_snapshots() -> None:
    log = create_table(MemoryLogStore(), ROOT)
    txn = begin(log)
    append(log, add("a.parquet", "x"))
    assert txn.read_version == 0
    assert [f.path for f in txn.scan(None)] == []
    txn.add_files([AddFile("b.parquet", {"part": "x"}, 1, 1, True)])
    # Its read of the empty table conflicts with nothing the append did: it lands after it.
    assert txn.commit() == 2
    assert {f.path for f in log.snapshot().add_files()} == {"a.parquet", "b.parquet"}


def test_cdc_files_must_record_every_data_change_of_the_commit() -> None:
    log = create_table(MemoryLogStore(), ROOT)
    append(log, add("a.parquet", "x"))
    txn = begin(log)
    [a] = txn.scan(None)
    txn.remove_files([a])
    txn.add_files([add("b.parquet", "x")])
    change = AddCDCFile(path="_change_data/c.parquet", partition_values={"part": "x"}, size=1)
    txn.add_cdc_files([change], covering=["a.parquet", "b.parquet"])
    txn.add_files([add("appended.parquet", "x")])
    with pytest.raises(UnsupportedFeatureError, match=r"appended\.parquet") as caught:
        txn.commit()
    assert caught.value.feature == "changeDataFeed"
    assert log.latest_version() == 1

    covered = begin(log)
    covered.add_files([add("d.parquet", "x")])
    covered.add_cdc_files([change], covering=["d.parquet"])
    assert covered.commit() == 2
    assert change in log.read_commit(2)
