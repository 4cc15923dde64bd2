"""DeltaLog and Snapshot: replay rules, time travel, incremental update, history."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pytest

from deltatx.errors import (
    InvalidArgumentError,
    TableNotFoundError,
    UnsupportedFeatureError,
    VersionNotFoundError,
)
from deltatx.kernel.actions import (
    AddFile,
    CommitInfo,
    DeletionVectorDescriptor,
    DomainMetadata,
    Metadata,
    ProtocolAction,
    SetTransaction,
)
from deltatx.kernel.isolation import IsolationLevel
from deltatx.log import DeltaLog, HistoryEntry, Snapshot
from deltatx.storage import LocalLogStore, MemoryLogStore

from ..log_helpers import METADATA, add, create, info, remove, write_commit

ROOT = "/mem/t"


@pytest.fixture
def store() -> MemoryLogStore:
    return MemoryLogStore()


@pytest.fixture
def log(store: MemoryLogStore) -> DeltaLog:
    return DeltaLog.for_table(ROOT, store=store)


def paths(snap: Snapshot) -> set[str]:
    return set(snap.files.column("path").to_pylist())


def dv(tag: str, offset: int | None = 1) -> DeletionVectorDescriptor:
    return DeletionVectorDescriptor("u", f"ab{tag}", size_in_bytes=34, cardinality=1, offset=offset)


def test_for_table_normalises_paths(tmp_path: Path) -> None:
    plain = DeltaLog.for_table(str(tmp_path) + "/")
    assert plain.table_path == str(tmp_path)
    assert plain.log_path == str(tmp_path) + "/_delta_log"
    assert isinstance(plain.store, LocalLogStore)
    assert DeltaLog.for_table("file://" + str(tmp_path)).table_path == str(tmp_path)
    assert DeltaLog.for_table("file:" + str(tmp_path) + "/").table_path == str(tmp_path)
    assert DeltaLog.for_table("file:///tmp/my%20table").table_path == "/tmp/my table"


def test_empty_location(log: DeltaLog) -> None:
    assert log.latest_version() == -1
    assert not log.table_exists()
    with pytest.raises(TableNotFoundError):
        log.snapshot()
    with pytest.raises(TableNotFoundError):
        log.history()


def test_replay_adds_removes_and_readds(store: MemoryLogStore, log: DeltaLog) -> None:
    create(store, ROOT, add("a"), add("b"))
    write_commit(store, ROOT, 1, [info(2000), remove("a"), add("c", part="b")])
    write_commit(store, ROOT, 2, [info(3000), add("a", size=7)])  # re-added after removal
    snap = log.snapshot()
    assert log.latest_version() == 2 and log.table_exists()
    assert snap.version == 2 and snap.timestamp == 3000
    assert paths(snap) == {"a", "b", "c"}
    by_path = {f.path: f for f in snap.add_files()}
    assert by_path["a"].size == 7
    assert by_path["c"].partition_values == {"part": "b"}
    assert snap.num_files == 3 and snap.size_in_bytes == 207
    # The re-add cancels the tombstone of the same key.
    assert [t.path for t in snap.tombstones(now_ms=2001)] == []
    assert paths(log.snapshot(1)) == {"b", "c"}
    assert [t.path for t in log.snapshot(1).tombstones(now_ms=2001)] == ["a"]


def test_files_table_is_columnar_with_the_documented_columns(
    store: MemoryLogStore, log: DeltaLog
) -> None:
    create(
        store, ROOT, add("a", stats='{"numRecords":1}', tags={"k": "v"}, deletion_vector=dv("x"))
    )
    files = log.snapshot().files
    assert isinstance(files, pa.Table)
    assert files.column_names[:10] == [
        "path",
        "partition_values",
        "size",
        "modification_time",
        "data_change",
        "stats",
        "tags",
        "deletion_vector",
        "base_row_id",
        "default_row_commit_version",
    ]
    assert files.schema.field("partition_values").type == pa.map_(pa.string(), pa.string())
    row = files.to_pylist(maps_as_pydicts="strict")[0]
    assert row["partition_values"] == {"part": "a"} and row["tags"] == {"k": "v"}
    assert row["stats"] == '{"numRecords":1}'
    assert row["deletion_vector"]["path_or_inline_dv"] == "abx"
    assert row["deletion_vector"]["offset"] == 1


def test_files_are_keyed_by_path_and_dv(store: MemoryLogStore, log: DeltaLog) -> None:
    create(store, ROOT, add("a", deletion_vector=dv("1")), add("b"))
    # A DV update: remove the old (path, dv), add the new one, in one commit.
    write_commit(
        store, ROOT, 1, [remove("a", deletion_vector=dv("1")), add("a", deletion_vector=dv("2"))]
    )
    # A remove of the same path with a DV the live file does not have removes nothing.
    write_commit(
        store, ROOT, 2, [remove("a", deletion_vector=dv("9")), remove("b", deletion_vector=dv("1"))]
    )
    snap = log.snapshot()
    files = snap.add_files()
    assert sorted(f.path for f in files) == ["a", "b"]
    a = next(f for f in files if f.path == "a")
    assert a.deletion_vector is not None and a.deletion_vector.path_or_inline_dv == "ab2"
    tomb_ids = sorted(t.dv_id or "" for t in snap.tombstones(now_ms=2001))
    assert tomb_ids == ["uab1@1", "uab1@1", "uab9@1"]
    # A DV without offset is a different key from one with offset 1.
    write_commit(store, ROOT, 3, [remove("a", deletion_vector=dv("2", offset=None))])
    assert len(log.update(snap).add_files()) == 2
    write_commit(store, ROOT, 4, [remove("a", deletion_vector=dv("2"))])
    assert [f.path for f in log.snapshot().add_files()] == ["b"]


def test_newest_protocol_metadata_txn_and_domains_win(store: MemoryLogStore, log: DeltaLog) -> None:
    create(
        store,
        ROOT,
        SetTransaction("app", 1, 10),
        DomainMetadata("d1", '{"a":1}'),
        DomainMetadata("d2", "{}"),
    )
    meta2 = Metadata(
        id="tbl-1",
        schema_string=METADATA.schema_string,
        partition_columns=("part",),
        configuration={"delta.isolationLevel": "Serializable"},
    )
    proto2 = ProtocolAction(1, 7, None, ("appendOnly", "domainMetadata"))
    write_commit(
        store,
        ROOT,
        1,
        [
            meta2,
            proto2,
            SetTransaction("app", 5, 20),
            SetTransaction("other", 2),
            DomainMetadata("d1", '{"a":2}'),
            DomainMetadata("d2", "{}", removed=True),
        ],
    )
    snap = log.snapshot()
    assert snap.metadata == meta2 and snap.protocol == proto2
    assert snap.properties.isolation_level is IsolationLevel.SERIALIZABLE
    assert snap.schema.field_names() == ["id", "part"]
    assert snap.partition_columns == ("part",)
    assert snap.app_transaction_version("app") == 5
    assert snap.app_transaction_version("other") == 2
    assert snap.app_transaction_version("none") is None
    assert set(snap.app_transactions) == {"app", "other"}
    assert snap.domain_metadata == {"d1": DomainMetadata("d1", '{"a":2}')}
    old = log.snapshot(0)
    assert old.properties.isolation_level is IsolationLevel.WRITE_SERIALIZABLE
    assert old.app_transaction_version("app") == 1 and set(old.domain_metadata) == {"d1", "d2"}


def test_unreadable_protocol_is_refused(store: MemoryLogStore, log: DeltaLog) -> None:
    create(store, ROOT)
    write_commit(store, ROOT, 1, [ProtocolAction(3, 7, ("futureFeature",), ("futureFeature",))])
    with pytest.raises(UnsupportedFeatureError, match="futureFeature"):
        log.snapshot()
    assert log.snapshot(0).version == 0


def test_tombstones_expire_after_retention(store: MemoryLogStore, log: DeltaLog) -> None:
    now = int(time.time() * 1000)
    week = 7 * 24 * 3600 * 1000
    create(store, ROOT, add("old"), add("new"), add("nots"))
    write_commit(
        store,
        ROOT,
        1,
        [remove("old", ts=now - week - 1000), remove("new", ts=now - 1000), remove("nots", ts=0)],
    )
    snap = log.snapshot()
    assert [t.path for t in snap.tombstones()] == ["new"]
    assert sorted(t.path for t in snap.tombstones(now_ms=now - week)) == ["new", "old"]


def test_time_travel_by_version_and_timestamp(store: MemoryLogStore, log: DeltaLog) -> None:
    t0 = int(datetime(2024, 1, 1, tzinfo=UTC).timestamp() * 1000)
    hour = 3600 * 1000
    create(store, ROOT, add("v0"), ts=t0)
    write_commit(store, ROOT, 1, [info(t0 + hour), add("v1")])
    write_commit(store, ROOT, 2, [info(t0 + 2 * hour), add("v2")])
    assert paths(log.snapshot(1)) == {"v0", "v1"}
    assert log.snapshot(timestamp=t0).version == 0
    assert log.snapshot(timestamp=t0 + hour - 1).version == 0
    assert log.snapshot(timestamp=t0 + hour).version == 1
    assert log.snapshot(timestamp="2024-01-01 01:30:00").version == 1
    assert log.snapshot(timestamp="2024-01-02").version == 2
    assert log.snapshot(timestamp=datetime(2024, 1, 1, 2, 0)).version == 2
    assert log.snapshot(timestamp=t0 + hour).timestamp == t0 + hour
    with pytest.raises(VersionNotFoundError, match="2024-01-01T00:00:00"):
        log.snapshot(timestamp="2023-12-31")
    with pytest.raises(VersionNotFoundError, match="versions 0 to 2"):
        log.snapshot(5)
    with pytest.raises(InvalidArgumentError):
        log.snapshot(1, timestamp=t0)
    with pytest.raises(InvalidArgumentError):
        log.snapshot(timestamp="yesterday")


def test_update_is_incremental(store: MemoryLogStore, log: DeltaLog) -> None:
    create(store, ROOT, add("a"), add("b"))
    snap = log.snapshot()
    assert log.update(snap) is snap  # nothing new
    for v in range(1, 6):
        write_commit(
            store, ROOT, v, [info(1000 + v), add(f"f{v}"), remove("a" if v == 1 else f"f{v - 1}")]
        )
    write_commit(store, ROOT, 6, [SetTransaction("app", 9)])
    # Version 0 disappears: a replay from scratch would now fail, an incremental one does not.
    store.delete(f"{ROOT}/_delta_log/00000000000000000000.json")
    updated = log.update(snap)
    assert updated.version == 6
    assert paths(updated) == {"b", "f5"}
    assert updated.app_transaction_version("app") == 9
    assert updated.metadata == snap.metadata
    assert paths(snap) == {"a", "b"}  # the old snapshot is unchanged


def test_update_matches_a_full_load(store: MemoryLogStore, log: DeltaLog) -> None:
    create(store, ROOT, *[add(f"p{i}") for i in range(50)])
    snap = log.snapshot()
    for v in range(1, 120):
        actions = [add(f"n{v}", part=str(v % 3))]
        if v % 4 == 0:
            actions.append(remove(f"p{v // 4}"))
        if v % 9 == 0:
            actions.append(remove(f"n{v - 1}"))
        write_commit(store, ROOT, v, actions)
        if v % 13 == 0:
            snap = log.update(snap)
    snap = log.update(snap)
    full = log.snapshot()
    assert snap.version == full.version == 119
    assert sorted(snap.files.to_pylist(), key=lambda r: r["path"]) == sorted(
        full.files.to_pylist(), key=lambda r: r["path"]
    )
    assert log.update().version == 119


def test_read_commit_and_commit_timestamp(store: MemoryLogStore, log: DeltaLog) -> None:
    create(store, ROOT, ts=1234)
    write_commit(store, ROOT, 1, [add("x")])  # no commitInfo
    store.set_modification_time(f"{ROOT}/_delta_log/00000000000000000001.json", 98765)
    actions = log.read_commit(0)
    assert [type(a).__name__ for a in actions] == ["CommitInfo", "ProtocolAction", "Metadata"]
    assert log.read_commit(1) == [add("x")]
    assert log.commit_timestamp(0) == 1234
    assert log.commit_timestamp(1) == 98765
    assert log.snapshot().timestamp == 98765
    with pytest.raises(VersionNotFoundError, match="latest version is 1"):
        log.read_commit(2)


def test_history_newest_first(store: MemoryLogStore, log: DeltaLog) -> None:
    create(store, ROOT, ts=100)
    write_commit(store, ROOT, 1, [info(200, "DELETE"), remove("a")])
    write_commit(store, ROOT, 2, [add("b")])
    store.set_modification_time(f"{ROOT}/_delta_log/00000000000000000002.json", 300)
    hist = log.history()
    assert [(h.version, h.timestamp) for h in hist] == [(2, 300), (1, 200), (0, 100)]
    assert hist[0].commit_info is None
    assert hist[1] == HistoryEntry(1, 200, CommitInfo(timestamp=200, operation="DELETE"))
    assert [h.version for h in log.history(limit=2)] == [2, 1]
    assert log.history(limit=0) == []
    with pytest.raises(InvalidArgumentError, match="-1"):
        log.history(limit=-1)


def test_scan_files_without_predicate_is_every_file(store: MemoryLogStore, log: DeltaLog) -> None:
    create(store, ROOT, add("a"), add("b", part="b"))
    snap = log.snapshot()
    assert sorted(f.path for f in snap.scan_files()) == ["a", "b"]
    assert all(isinstance(f, AddFile) for f in snap.scan_files(None))


def test_scan_files_prunes_on_partition_equality(store: MemoryLogStore, log: DeltaLog) -> None:
    evaluation = pytest.importorskip("deltatx.kernel.evaluation")
    assert hasattr(evaluation, "file_may_match")
    from deltatx.kernel.expressions import Column, Comparison, ComparisonOp, Literal

    create(store, ROOT, add("a1"), add("a2"), add("b1", part="b"))
    pred = Comparison(ComparisonOp.EQ, Column("part"), Literal("b"))
    assert [f.path for f in log.snapshot().scan_files(pred)] == ["b1"]


def test_local_table_end_to_end(tmp_path: Path) -> None:
    table = str(tmp_path / "t")
    store = LocalLogStore()
    create(store, table, add("x"))
    log = DeltaLog.for_table(table)
    assert log.snapshot().num_files == 1
    assert log.history()[0].version == 0
