"""The change data feed at the log level: which files make up each version's changes."""

from __future__ import annotations

from dataclasses import replace

import pytest

from deltatx.errors import ChangeDataNotRecordedError, InvalidArgumentError, VersionNotFoundError
from deltatx.kernel.actions import (
    AddCDCFile,
    AddFile,
    CommitInfo,
    DeletionVectorDescriptor,
    RemoveFile,
)
from deltatx.kernel.log_paths import commit_name
from deltatx.log import DeltaLog
from deltatx.log.change_feed import (
    ChangeType,
    changes_between,
    version_change_files,
    version_range,
)
from deltatx.storage import MemoryLogStore

from ..log_helpers import METADATA, PROTOCOL, add, info, remove, write_commit

ROOT = "/mem/cdf"
CDF_ON = replace(METADATA, configuration={"delta.enableChangeDataFeed": "true"})
CDF_OFF = replace(METADATA, configuration={"delta.enableChangeDataFeed": "false"})


def dv(tag: str) -> DeletionVectorDescriptor:
    return DeletionVectorDescriptor("u", f"ab{tag}", size_in_bytes=34, cardinality=1, offset=1)


def cdc(path: str) -> AddCDCFile:
    return AddCDCFile(path=path, partition_values={"part": "a"}, size=10)


def no_dvs(_: AddFile | RemoveFile) -> frozenset[int]:
    raise AssertionError("no deletion vector should be read")


def files_of(actions: list[object], dv_rows: object = no_dvs) -> list[tuple[str, object]]:
    out = version_change_files(actions, version=3, timestamp=7, dv_rows=dv_rows)  # type: ignore[arg-type]
    assert all(f.version == 3 and f.timestamp == 7 for f in out)
    return [(f.path, f.change_type) for f in out]


# "If there are cdc actions in this version, then read only those to get the row-level
# changes, and skip the remaining add and remove actions in this version."
def test_a_version_with_cdc_actions_reads_only_them() -> None:
    actions = [remove("old.parquet"), add("new.parquet"), cdc("_change_data/c.parquet")]
    assert files_of(actions) == [("_change_data/c.parquet", None)]


# "Otherwise ... read and treat all the rows in the add and remove actions as inserted and
# deleted rows, respectively."
def test_without_cdc_adds_are_inserts_and_removes_are_deletes() -> None:
    with_dv = add("b.parquet", deletion_vector=dv("1"))
    actions = [add("a.parquet"), with_dv, remove("gone.parquet", deletion_vector=dv("2"))]
    out = version_change_files(actions, version=1, timestamp=0, dv_rows=no_dvs)
    by_path = {f.path: f for f in out}
    assert by_path["a.parquet"].change_type is ChangeType.INSERT
    assert by_path["b.parquet"].deletion_vector == dv("1")
    assert by_path["gone.parquet"].change_type is ChangeType.DELETE
    # A removed file's rows are read as they were: its own vector still hides deleted rows.
    assert by_path["gone.parquet"].deletion_vector == dv("2")
    assert by_path["a.parquet"].partition_values == (("part", "a"),)


def test_files_moved_without_data_change_are_no_changes() -> None:
    compaction = [
        replace(remove("small.parquet"), data_change=False),
        replace(add("big.parquet"), data_change=False),
    ]
    assert files_of(compaction) == []


def test_a_file_whose_deletion_vector_alone_changed_yields_the_newly_deleted_rows() -> None:
    before = remove("f.parquet", deletion_vector=dv("old"))
    after = add("f.parquet", deletion_vector=dv("new"))
    rows = {dv("old"): frozenset({1}), dv("new"): frozenset({1, 4, 6})}

    def dv_rows(a: AddFile | RemoveFile) -> frozenset[int]:
        assert a.deletion_vector is not None
        return rows[a.deletion_vector]

    out = version_change_files([before, after], version=2, timestamp=0, dv_rows=dv_rows)
    assert [(f.change_type, f.only_rows, f.deletion_vector) for f in out] == [
        (ChangeType.DELETE, (4, 6), None)
    ]


@pytest.fixture
def store() -> MemoryLogStore:
    return MemoryLogStore()


@pytest.fixture
def log(store: MemoryLogStore) -> DeltaLog:
    return DeltaLog.for_table(ROOT, store=store)


def build(store: MemoryLogStore, *versions: list[object]) -> None:
    for v, actions in enumerate(versions):
        write_commit(store, ROOT, v, actions)  # type: ignore[arg-type]
        store.set_modification_time(f"{ROOT}/_delta_log/{commit_name(v)}", 10_000 * (v + 1))


def test_changes_between_lists_versions_in_order_with_commit_times(
    store: MemoryLogStore, log: DeltaLog
) -> None:
    build(
        store,
        [info(1), PROTOCOL, CDF_ON],
        [info(2_000), add("a.parquet")],
        [
            CommitInfo(operation="UPDATE"),
            remove("a.parquet"),
            add("b.parquet"),
            cdc("_change_data/u.parquet"),
        ],
    )
    out = changes_between(log, 0, 2)
    assert [(f.version, f.path, f.change_type) for f in out] == [
        (1, "a.parquet", ChangeType.INSERT),
        (2, "_change_data/u.parquet", None),
    ]
    # commitInfo's timestamp (as history and time travel report it); without one, the
    # commit file's modification time.
    assert [f.timestamp for f in out] == [2_000, 30_000]


def test_in_commit_timestamps_win_over_file_times(store: MemoryLogStore, log: DeltaLog) -> None:
    stamped = CommitInfo(timestamp=5, operation="WRITE", in_commit_timestamp=12_345)
    build(store, [info(1), PROTOCOL, CDF_ON], [stamped, add("a.parquet")])
    assert [f.timestamp for f in changes_between(log, 1, 1)] == [12_345]


def test_a_version_written_with_the_feed_off_is_refused(
    store: MemoryLogStore, log: DeltaLog
) -> None:
    build(
        store,
        [info(1), PROTOCOL, CDF_OFF],
        [info(2), add("a.parquet")],
        [info(3), CDF_ON],
        [info(4), add("b.parquet")],
        [info(5), CDF_OFF],
    )
    with pytest.raises(ChangeDataNotRecordedError, match="version 1") as caught:
        changes_between(log, 1, 3)
    assert caught.value.version == 1
    # The commit that turns the feed on records (no data changes); the next one is readable.
    assert [f.path for f in changes_between(log, 2, 3)] == ["b.parquet"]
    with pytest.raises(ChangeDataNotRecordedError) as later:
        changes_between(log, 3, 4)
    assert later.value.version == 4


def test_version_range_bounds(store: MemoryLogStore, log: DeltaLog) -> None:
    build(store, [info(1), PROTOCOL, CDF_ON], [info(2), add("a")], [info(3), add("b")])
    assert version_range(log, starting_version=1) == (1, 2)
    assert version_range(log, starting_version=0, ending_version=99) == (0, 2)
    with pytest.raises(InvalidArgumentError, match="starting version or a starting timestamp"):
        version_range(log)
    with pytest.raises(InvalidArgumentError, match="not both"):
        version_range(log, starting_version=0, starting_timestamp=0)
    with pytest.raises(InvalidArgumentError, match="before the starting version"):
        version_range(log, starting_version=2, ending_version=1)
    with pytest.raises(InvalidArgumentError, match=">= 0"):
        version_range(log, starting_version=-1)
    with pytest.raises(VersionNotFoundError, match="latest version is 2"):
        version_range(log, starting_version=3)


def test_timestamps_select_the_versions_inside_them(store: MemoryLogStore, log: DeltaLog) -> None:
    build(
        store,
        [info(10_000), PROTOCOL, CDF_ON],
        [info(20_000), add("a")],
        [info(30_000), add("b")],
    )
    assert version_range(log, starting_timestamp=15_000) == (1, 2)
    assert version_range(log, starting_timestamp=10_000, ending_timestamp=25_000) == (0, 1)
    with pytest.raises(VersionNotFoundError, match="at or after"):
        version_range(log, starting_timestamp=31_000)
    with pytest.raises(VersionNotFoundError):
        version_range(log, starting_timestamp=11_000, ending_timestamp=12_000)
