"""StreamingLog: which files each micro-batch of a streaming read takes, and where it stops."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from deltatx.errors import (
    ChangeDataNotRecordedError,
    InvalidArgumentError,
    StreamDataChangedError,
    StreamMetadataChangedError,
)
from deltatx.kernel.actions import AddCDCFile, AddFile, ProtocolAction
from deltatx.log import DeltaLog
from deltatx.log.change_feed import ChangeFile, ChangeType
from deltatx.log.streaming import (
    ReadLimits,
    StreamFile,
    StreamingLog,
    StreamOffset,
    starting_version_at,
)
from deltatx.storage import MemoryLogStore

from ..log_helpers import METADATA, PROTOCOL, add, create, info, remove, write_commit

ROOT = "/mem/s"
NO_LIMIT = ReadLimits()


@pytest.fixture
def store() -> MemoryLogStore:
    store = MemoryLogStore()
    create(store, ROOT, add("s0a"), add("s0b"))
    write_commit(store, ROOT, 1, [info(2_000), add("c1a"), add("c1b"), add("c1c")])
    write_commit(store, ROOT, 2, [info(3_000), add("c2a")])
    return store


def streaming(store: MemoryLogStore, *, skip: bool = False) -> StreamingLog:
    log = DeltaLog.for_table(ROOT, store=store)
    return StreamingLog(log, metadata=METADATA, protocol=PROTOCOL, skip_change_commits=skip)


def paths(files: list[object]) -> list[str]:
    return [f.file.path for f in files]  # type: ignore[attr-defined]


def drain(s: StreamingLog, start: StreamOffset, limits: ReadLimits) -> list[list[str]]:
    """Every batch a stream takes from ``start``, each checked against files_between."""
    batches = []
    while True:
        files, end = s.files_after(start, limits)
        if end == start:
            return batches
        assert paths(s.files_between(start, end)) == paths(files)
        batches.append(paths(files))
        start = end


def test_starting_snapshot_then_each_commit_in_order(store: MemoryLogStore) -> None:
    s = streaming(store)
    batches = drain(s, s.starting_offset(0, snapshot=True), NO_LIMIT)
    assert batches == [["s0a", "s0b", "c1a", "c1b", "c1c", "c2a"]]


def test_starting_version_reads_commits_not_the_snapshot(store: MemoryLogStore) -> None:
    s = streaming(store)
    assert drain(s, s.starting_offset(1, snapshot=False), NO_LIMIT) == [
        ["c1a", "c1b", "c1c", "c2a"]
    ]


def test_max_files_splits_batches_inside_a_commit(store: MemoryLogStore) -> None:
    s = streaming(store)
    batches = drain(s, s.starting_offset(0, snapshot=True), ReadLimits(max_files=2))
    assert batches == [["s0a", "s0b"], ["c1a", "c1b"], ["c1c", "c2a"]]


def test_max_bytes_takes_files_until_the_limit_is_reached(store: MemoryLogStore) -> None:
    s = streaming(store)
    # Every file is 100 bytes: a batch stops once it holds 250 bytes or more.
    batches = drain(s, s.starting_offset(1, snapshot=False), ReadLimits(max_bytes=250))
    assert batches == [["c1a", "c1b", "c1c"], ["c2a"]]


def test_a_file_larger_than_the_byte_limit_still_moves_the_stream(store: MemoryLogStore) -> None:
    s = streaming(store)
    batches = drain(s, s.starting_offset(2, snapshot=False), ReadLimits(max_bytes=1))
    assert batches == [["c2a"]]


def test_new_commits_are_picked_up_from_the_last_offset(store: MemoryLogStore) -> None:
    s = streaming(store)
    _, end = s.files_after(s.starting_offset(0, snapshot=True), NO_LIMIT)
    assert s.files_after(end, NO_LIMIT) == ([], end)
    write_commit(store, ROOT, 3, [info(4_000), add("c3a")])
    files, _ = s.files_after(end, NO_LIMIT)
    assert paths(files) == ["c3a"]


def test_last_version_caps_what_available_now_reads(store: MemoryLogStore) -> None:
    s = streaming(store)
    files, end = s.files_after(s.starting_offset(0, snapshot=True), NO_LIMIT, last_version=1)
    assert paths(files) == ["s0a", "s0b", "c1a", "c1b", "c1c"]
    assert end.reservoir_version == 2


def test_data_change_false_commits_are_passed_over(store: MemoryLogStore) -> None:
    compacted = AddFile("big", {"part": "a"}, 300, 1_000, data_change=False)
    write_commit(
        store,
        ROOT,
        3,
        [
            info(4_000, "OPTIMIZE"),
            replace(remove("c1a"), data_change=False),
            replace(remove("c1b"), data_change=False),
            compacted,
        ],
    )
    write_commit(store, ROOT, 4, [info(5_000), add("c4a")])
    s = streaming(store)
    assert drain(s, s.starting_offset(2, snapshot=False), NO_LIMIT) == [["c2a", "c4a"]]


def test_a_delete_stops_the_stream_after_the_rows_before_it(store: MemoryLogStore) -> None:
    write_commit(store, ROOT, 3, [info(4_000, "DELETE"), remove("c1a")])
    write_commit(store, ROOT, 4, [info(5_000), add("c4a")])
    s = streaming(store)
    start = s.starting_offset(2, snapshot=False)
    files, end = s.files_after(start, NO_LIMIT)
    assert paths(files) == ["c2a"]
    with pytest.raises(StreamDataChangedError, match=r"version 3: that commit \(DELETE\)") as e:
        s.files_after(end, NO_LIMIT)
    assert "skipChangeCommits" in str(e.value)
    assert e.value.version == 3


def test_skip_change_commits_passes_over_the_whole_commit(store: MemoryLogStore) -> None:
    rewritten = add("c1a-rewritten")
    write_commit(store, ROOT, 3, [info(4_000, "UPDATE"), remove("c1a"), rewritten])
    write_commit(store, ROOT, 4, [info(5_000), add("c4a")])
    s = streaming(store, skip=True)
    assert drain(s, s.starting_offset(2, snapshot=False), NO_LIMIT) == [["c2a", "c4a"]]


@pytest.mark.parametrize(
    ("changed", "why"),
    [
        (
            replace(METADATA, schema_string=METADATA.schema_string.replace('"id"', '"key"')),
            "schema",
        ),
        (replace(METADATA, configuration={"delta.appendOnly": "true"}), "delta.appendOnly"),
        (replace(METADATA, partition_columns=()), "partition columns"),
        (
            ProtocolAction(
                min_reader_version=3,
                min_writer_version=7,
                reader_features=("deletionVectors",),
                writer_features=("deletionVectors",),
            ),
            "protocol",
        ),
    ],
)
def test_a_metadata_change_stops_the_stream_and_says_to_restart(
    store: MemoryLogStore, changed: object, why: str
) -> None:
    write_commit(store, ROOT, 3, [info(4_000, "SET TBLPROPERTIES"), changed])  # type: ignore[list-item]
    s = streaming(store, skip=True)
    files, end = s.files_after(s.starting_offset(2, snapshot=False), NO_LIMIT)
    assert paths(files) == ["c2a"]
    with pytest.raises(StreamMetadataChangedError, match="restarted") as e:
        s.files_after(end, NO_LIMIT)
    assert why in str(e.value)
    assert e.value.version == 3


def test_the_same_metadata_again_is_no_change(store: MemoryLogStore) -> None:
    write_commit(store, ROOT, 3, [info(4_000), METADATA, add("c3a")])
    s = streaming(store)
    assert drain(s, s.starting_offset(2, snapshot=False), NO_LIMIT) == [["c2a", "c3a"]]


def test_offsets_round_trip_and_belong_to_one_table() -> None:
    offset = StreamOffset("tbl-1", 7, 3, False)
    assert StreamOffset.from_dict(offset.to_dict(), table_id="tbl-1") == offset
    with pytest.raises(InvalidArgumentError, match="created again"):
        StreamOffset.from_dict(offset.to_dict(), table_id="tbl-2")
    with pytest.raises(InvalidArgumentError, match="unknown format"):
        StreamOffset.from_dict({**offset.to_dict(), "sourceVersion": 99}, table_id="tbl-1")


@given(
    sizes=st.lists(st.lists(st.integers(1, 50), max_size=4), min_size=1, max_size=5),
    max_files=st.one_of(st.none(), st.integers(1, 4)),
    max_bytes=st.one_of(st.none(), st.integers(1, 120)),
)
def test_batches_deliver_every_file_once_in_log_order(
    sizes: list[list[int]], max_files: int | None, max_bytes: int | None
) -> None:
    store = MemoryLogStore()
    create(store, ROOT)
    expected = []
    for version, commit in enumerate(sizes, start=1):
        adds = [add(f"v{version}-{i}", size=n) for i, n in enumerate(commit)]
        write_commit(store, ROOT, version, [info(1_000 + version), *adds])
        expected += [a.path for a in adds]
    s = streaming(store)
    limits = ReadLimits(max_files=max_files, max_bytes=max_bytes)
    batches = drain(s, s.starting_offset(0, snapshot=True), limits)
    assert [p for batch in batches for p in batch] == expected
    for batch in batches:
        assert batch
        if max_files is not None:
            assert len(batch) <= max_files


def test_starting_timestamp_is_the_first_commit_at_or_after_it(store: MemoryLogStore) -> None:
    log = DeltaLog.for_table(ROOT, store=store)
    assert starting_version_at(log, 2_000) == 1
    assert starting_version_at(log, 2_500) == 2
    assert starting_version_at(log, 500) == 0
    assert starting_version_at(log, 9_000) == 3


# --- the change data feed (readChangeFeed) ---------------------------------------------------

CDF_ON = replace(METADATA, configuration={"delta.enableChangeDataFeed": "true"})


def cdc(path: str) -> AddCDCFile:
    return AddCDCFile(path=path, partition_values={"part": "a"}, size=10)


@pytest.fixture
def cdf_store() -> MemoryLogStore:
    store = MemoryLogStore()
    write_commit(store, ROOT, 0, [info(1_000, "CREATE TABLE"), PROTOCOL, CDF_ON, add("s0a")])
    write_commit(store, ROOT, 1, [info(2_000), add("c1a"), add("c1b")])
    write_commit(store, ROOT, 2, [info(3_000, "UPDATE"), remove("c1a"), add("u2"), cdc("cdc2")])
    write_commit(store, ROOT, 3, [info(4_000, "DELETE"), remove("c1b")])
    return store


def change_stream(store: MemoryLogStore) -> StreamingLog:
    log = DeltaLog.for_table(ROOT, store=store)
    return StreamingLog(
        log, metadata=CDF_ON, protocol=PROTOCOL, skip_change_commits=False, change_feed=True
    )


def changes(files: list[StreamFile]) -> list[tuple[str, object, int, int]]:
    out = []
    for f in files:
        assert isinstance(f.file, ChangeFile)
        out.append((f.file.path, f.file.change_type, f.file.version, f.file.timestamp))
    return out


def test_a_change_feed_stream_starts_with_the_snapshot_as_inserts(
    cdf_store: MemoryLogStore,
) -> None:
    s = change_stream(cdf_store)
    files, _ = s.files_after(s.starting_offset(1, snapshot=True), NO_LIMIT)
    # Each version's changes: its cdc files alone when it has some, else adds and removes.
    # The snapshot's files in the order a plain stream takes them, as rows of version 1.
    assert changes(files) == [
        ("c1a", ChangeType.INSERT, 1, 2_000),
        ("c1b", ChangeType.INSERT, 1, 2_000),
        ("s0a", ChangeType.INSERT, 1, 2_000),
        ("cdc2", None, 2, 3_000),
        ("c1b", ChangeType.DELETE, 3, 4_000),
    ]


def test_change_commits_are_delivered_whole_not_refused_in_a_change_feed_stream(
    cdf_store: MemoryLogStore,
) -> None:
    s = change_stream(cdf_store)
    assert drain(s, s.starting_offset(2, snapshot=False), ReadLimits(max_files=1)) == [
        ["cdc2"],
        ["c1b"],
    ]
    assert drain(s, s.starting_offset(0, snapshot=False), ReadLimits(max_bytes=100)) == [
        ["s0a"],
        ["c1a", "c1b"],
        ["cdc2", "c1b"],
    ]
    # The starting snapshot is split file by file; commits are taken whole.
    assert drain(s, s.starting_offset(1, snapshot=True), ReadLimits(max_files=1)) == [
        ["c1a"],
        ["c1b"],
        ["s0a"],
        ["cdc2"],
        ["c1b"],
    ]


def test_a_change_feed_stream_passes_over_data_change_false_and_stops_on_metadata(
    cdf_store: MemoryLogStore,
) -> None:
    write_commit(
        cdf_store,
        ROOT,
        4,
        [
            info(5_000, "OPTIMIZE"),
            replace(remove("u2"), data_change=False),
            replace(add("big"), data_change=False),
        ],
    )
    write_commit(cdf_store, ROOT, 5, [info(6_000), add("c5a")])
    write_commit(cdf_store, ROOT, 6, [info(7_000), replace(CDF_ON, partition_columns=())])
    s = change_stream(cdf_store)
    files, end = s.files_after(s.starting_offset(3, snapshot=False), NO_LIMIT)
    assert changes(files) == [
        ("c1b", ChangeType.DELETE, 3, 4_000),
        ("c5a", ChangeType.INSERT, 5, 6_000),
    ]
    with pytest.raises(StreamMetadataChangedError, match="partition columns"):
        s.files_after(end, NO_LIMIT)


def test_a_change_feed_stream_stops_at_a_version_whose_changes_were_not_recorded() -> None:
    store = MemoryLogStore()
    create(store, ROOT, add("s0a"))
    write_commit(store, ROOT, 1, [info(2_000), add("c1a")])
    log = DeltaLog.for_table(ROOT, store=store)
    s = StreamingLog(
        log, metadata=METADATA, protocol=PROTOCOL, skip_change_commits=False, change_feed=True
    )
    # The starting snapshot needs no recorded changes: it is the table's rows.
    files, end = s.files_after(s.starting_offset(0, snapshot=True), NO_LIMIT)
    assert paths(files) == ["s0a"]
    with pytest.raises(ChangeDataNotRecordedError, match="stopped at version 1") as e:
        s.files_after(end, NO_LIMIT)
    assert e.value.version == 1


@given(
    commits=st.lists(st.lists(st.integers(1, 50), max_size=4), min_size=1, max_size=5),
    max_files=st.one_of(st.none(), st.integers(1, 4)),
    max_bytes=st.one_of(st.none(), st.integers(1, 120)),
)
def test_change_feed_batches_deliver_each_commit_whole_and_once(
    commits: list[list[int]], max_files: int | None, max_bytes: int | None
) -> None:
    store = MemoryLogStore()
    write_commit(store, ROOT, 0, [info(1_000, "CREATE TABLE"), PROTOCOL, CDF_ON])
    owner = {}
    for version, sizes in enumerate(commits, start=1):
        files = [AddCDCFile(f"v{version}-{i}", {"part": "a"}, n) for i, n in enumerate(sizes)]
        write_commit(store, ROOT, version, [info(1_000 + version), *files])
        owner.update({f.path: version for f in files})
    s = change_stream(store)
    batches = drain(s, s.starting_offset(1, snapshot=False), ReadLimits(max_files, max_bytes))
    assert [p for batch in batches for p in batch] == list(owner)
    seen: set[int] = set()
    for batch in batches:
        versions = {owner[p] for p in batch}
        # No commit is split across batches, and a batch ends at a commit's end.
        assert not versions & seen
        seen |= versions
