"""Snapshot and log replay: one file per spelling, superseded partial metaData, bad sizes."""

from __future__ import annotations

import json
from urllib.parse import quote

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from deltatx.errors import InvalidTableError
from deltatx.kernel.actions import AddFile
from deltatx.kernel.evaluation import file_may_match
from deltatx.kernel.expressions import (
    Column,
    Comparison,
    ComparisonOp,
    Expression,
    Literal,
    Not,
    and_,
    or_,
)
from deltatx.kernel.log_paths import commit_name
from deltatx.kernel.schema import parse_schema
from deltatx.log import DeltaLog, Snapshot
from deltatx.log import snapshot as snapshot_module
from deltatx.log.checkpoint import write_checkpoint
from deltatx.storage import MemoryLogStore

from ..log_helpers import SCHEMA, add, create, info, remove, write_commit

ROOT = "/mem/t"


def _log() -> tuple[MemoryLogStore, DeltaLog]:
    store = MemoryLogStore()
    return store, DeltaLog.for_table(ROOT, store=store)


def _spellings(relative: str) -> list[str]:
    """Ways the protocol lets a log name the file at ``ROOT/relative`` (decoded)."""
    encoded = quote(relative)
    return [
        relative,
        encoded,
        f"{ROOT}/{relative}",
        f"file:{ROOT}/{encoded}",
        f"file://{ROOT}/{encoded}",
        f"file://localhost{ROOT}/{encoded}",
        f"./{encoded}",
    ]


_NAME = st.text(alphabet="ab %+=é", min_size=1, max_size=6).filter(
    lambda s: s.strip(".") != "" and "%" not in s
)


@settings(max_examples=60, deadline=None)
@given(
    parts=st.lists(_NAME, min_size=1, max_size=3),
    added=st.integers(0, 6),
    removed=st.integers(0, 6),
)
def test_a_file_added_under_one_spelling_is_removed_under_another(
    parts: list[str], added: int, removed: int
) -> None:
    store, log = _log()
    relative = "/".join(parts)
    spellings = _spellings(relative)
    create(store, ROOT)
    write_commit(store, ROOT, 1, [info(2_000), add(spellings[added])])
    assert log.snapshot().num_files == 1
    write_commit(store, ROOT, 2, [info(3_000), remove(spellings[removed])])
    assert log.snapshot().num_files == 0
    # The incremental path agrees with the full load.
    assert log.update(log.snapshot(1)).num_files == 0


def test_a_respelt_add_replaces_the_file_rather_than_doubling_it() -> None:
    store, log = _log()
    create(store, ROOT)
    write_commit(store, ROOT, 1, [info(2_000), add("a%20b/x.parquet", size=1)])
    write_commit(store, ROOT, 2, [info(3_000), add(f"file://{ROOT}/a%20b/x.parquet", size=2)])
    snap = log.snapshot()
    assert snap.num_files == 1 and snap.size_in_bytes == 2


def test_spellings_are_one_file_across_a_checkpoint() -> None:
    store, log = _log()
    create(store, ROOT)
    write_commit(store, ROOT, 1, [info(2_000), add(f"{ROOT}/d=1/x%3Ay.parquet")])
    log.checkpoint()
    write_commit(store, ROOT, 2, [info(3_000), remove("d=1/x%3Ay.parquet")])
    assert log.snapshot().num_files == 0


def _partial_metadata() -> str:
    # What Delta Live Tables writes first: a metaData without schemaString.
    return json.dumps(
        {
            "metaData": {
                "id": "dlt",
                "format": {"provider": "parquet", "options": {}},
                "partitionColumns": [],
                "configuration": {},
                "createdTime": 1,
            }
        }
    )


def _full_metadata() -> str:
    return json.dumps(
        {
            "metaData": {
                "id": "dlt",
                "format": {"provider": "parquet", "options": {}},
                "schemaString": SCHEMA,
                "partitionColumns": [],
                "configuration": {},
            }
        }
    )


def _raw(store: MemoryLogStore, version: int, *lines: str) -> None:
    store.write(f"{ROOT}/_delta_log/{commit_name(version)}", ("\n".join(lines) + "\n").encode())


PROTOCOL_LINE = json.dumps({"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}})
INFO_LINE = json.dumps({"commitInfo": {"timestamp": 5, "operation": "CREATE TABLE"}})


def test_a_superseded_partial_metadata_does_not_fail_replay() -> None:
    store, log = _log()
    _raw(store, 0, INFO_LINE, PROTOCOL_LINE, _partial_metadata())
    _raw(store, 1, INFO_LINE, _full_metadata())
    snap = log.snapshot()
    assert snap.metadata.schema_string == SCHEMA
    assert log.update(log.snapshot(1)).version == 1
    assert [e.version for e in log.history()] == [1, 0]


def test_a_partial_metadata_in_force_is_still_refused() -> None:
    store, log = _log()
    _raw(store, 0, INFO_LINE, PROTOCOL_LINE, _partial_metadata())
    with pytest.raises(InvalidTableError, match=r"00000000000000000000\.json line 3"):
        log.snapshot()


def test_a_negative_file_size_is_refused_naming_file_and_commit() -> None:
    store, log = _log()
    create(store, ROOT)
    write_commit(store, ROOT, 1, [info(2_000), add("ok.parquet"), add("bad.parquet", size=-5)])
    with pytest.raises(InvalidTableError, match=r"00001\.json line 3: add 'bad.parquet'.*-5"):
        log.snapshot()


def test_a_negative_file_size_in_a_checkpoint_is_refused() -> None:
    store, log = _log()
    create(store, ROOT)
    write_commit(store, ROOT, 1, [info(2_000), add("f.parquet", size=5)])
    snap = log.snapshot()
    sizes = pa.array([-5], pa.int64())
    write_checkpoint(
        store,
        log.log_path,
        version=1,
        files=snap.files.set_column(snap.files.schema.get_field_index("size"), "size", sizes),
        tombstones=snap.tombstone_table(),
        protocol=snap.protocol,
        metadata=snap.metadata,
        app_transactions={},
        domain_metadata={},
    )
    # Without the commits to fall back on, the checkpoint is the only account of version 1.
    store.delete(f"{ROOT}/_delta_log/{commit_name(0)}")
    with pytest.raises(InvalidTableError, match=r"checkpoint\.parquet: add 'f\.parquet'.*-5"):
        log.snapshot()


def test_a_snapshot_is_a_value_without_its_loader() -> None:
    store, log = _log()
    create(store, ROOT, ts=1_234)
    snap = log.snapshot()
    assert not hasattr(snap, "log")
    assert "log" not in Snapshot.__slots__
    assert (snap.table_path, snap.version, snap.timestamp) == (ROOT, 0, 1_234)
    store.delete(f"{ROOT}/_delta_log/{commit_name(0)}")
    # Everything a snapshot answers, it answers without storage.
    assert (snap.timestamp, snap.num_files, snap.schema.fields[0].name) == (1_234, 0, "id")


@st.composite
def _files_and_predicate(draw: st.DrawFn) -> tuple[list[AddFile], Expression]:
    files = []
    for i in range(draw(st.integers(1, 12))):
        lo, hi = sorted((draw(st.integers(-5, 5)), draw(st.integers(-5, 5))))
        stats = draw(
            st.sampled_from(
                [
                    None,
                    json.dumps({"numRecords": 3, "minValues": {"id": lo}, "maxValues": {"id": hi}}),
                    json.dumps({"numRecords": 0}),
                    json.dumps({"numRecords": 3, "nullCount": {"id": 3}}),
                ]
            )
        )
        files.append(add(f"f{i}", part=draw(st.sampled_from(["a", "b"])), stats=stats))
    leaves = st.builds(
        Comparison,
        st.sampled_from(list(ComparisonOp)),
        st.just(Column("id")),
        st.builds(Literal, st.integers(-6, 6)),
    ) | st.builds(
        Comparison,
        st.just(ComparisonOp.EQ),
        st.just(Column("part")),
        st.builds(Literal, st.sampled_from(["a", "b", "c"])),
    )
    predicate = draw(
        st.recursive(
            leaves,
            lambda inner: (
                st.builds(and_, inner, inner) | st.builds(or_, inner, inner) | st.builds(Not, inner)
            ),
            max_leaves=4,
        )
    )
    return files, predicate


@settings(max_examples=60)
@given(case=_files_and_predicate())
def test_skipping_on_the_state_table_keeps_the_files_file_may_match_keeps(
    case: tuple[list[AddFile], Expression],
) -> None:
    # A fresh snapshot skips on two columns of its state and builds only the kept actions;
    # once its actions exist it skips on them. Both keep exactly what file_may_match keeps.
    files, predicate = case
    store, log = _log()
    create(store, ROOT, *files)
    expected = [
        f.path
        for f in files
        if file_may_match(predicate, f, schema=parse_schema(SCHEMA), partition_columns=["part"])
    ]
    fresh = log.snapshot()
    assert [f.path for f in fresh.scan_files(predicate)] == expected
    assert fresh.scan_files(predicate) == [f for f in fresh.add_files() if f.path in expected]
    assert [f.path for f in fresh.scan_files(predicate)] == expected


def _histories(files: int, versions: int) -> st.SearchStrategy[list[list[tuple[bool, int]]]]:
    """Commits of up to four actions: (add or remove, which of ``files`` files)."""
    action = st.tuples(st.booleans(), st.integers(0, files - 1))
    return st.lists(st.lists(action, min_size=1, max_size=4), min_size=1, max_size=versions)


def _files_and_tombstones(s: Snapshot) -> tuple[list[tuple[str, int]], list[str]]:
    files = sorted((f.path, f.size) for f in s.add_files())
    return files, sorted(s.tombstone_table().column("path").to_pylist())


@settings(max_examples=30, deadline=None)
@given(history=_histories(6, 8), flush_every=st.integers(1, 6))
def test_replay_gives_the_same_state_whenever_it_turns_records_into_chunks(
    history: list[list[tuple[bool, int]]], flush_every: int
) -> None:
    # Records become Arrow chunks when enough have gathered, mid-log or never before the end:
    # the files, their order of precedence and the tombstones are the same either way.
    store, _ = _log()
    create(store, ROOT)
    for version, actions in enumerate(history, start=1):
        staged = [
            add(f"f{n}.parquet", size=version) if is_add else remove(f"f{n}.parquet")
            for is_add, n in actions
        ]
        write_commit(store, ROOT, version, [info(1_000 + version), *staged])
    whole = DeltaLog.for_table(ROOT, store=store).snapshot()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(snapshot_module, "_FLUSH_RECORDS", flush_every)
        chunked = DeltaLog.for_table(ROOT, store=store).snapshot()

    assert _files_and_tombstones(chunked) == _files_and_tombstones(whole)


_SPELLINGS = ["f0.parquet", "f1.parquet", "f 2.parquet", "f%202.parquet", "f3.parquet"]


@settings(max_examples=40, deadline=None)
@given(history=_histories(len(_SPELLINGS), 10), branch_at=st.integers(0, 9))
def test_updates_with_the_set_of_live_keys_give_a_full_load_s_state(
    history: list[list[tuple[bool, int]]], branch_at: int
) -> None:
    """From the second update in a row a large state keeps a set of its live file keys (here
    every state, however small); each update's files and tombstones must be a full load's.

    The set moves to the newer snapshot, so an update from an older one (``branch_at``)
    matches keys in Arrow: it must give the same state too.
    """
    store, log = _log()
    create(store, ROOT, add("f0.parquet"))
    snap = log.snapshot()
    older = snap
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(snapshot_module, "INDEX_FROM_FILES", 0)
        for version, actions in enumerate(history, start=1):
            staged = [
                add(_SPELLINGS[n], size=version) if is_add else remove(_SPELLINGS[n])
                for is_add, n in actions
            ]
            write_commit(store, ROOT, version, [info(1_000 + version), *staged])
            if version == branch_at:
                older = snap
            snap = log.update(snap)
            full = DeltaLog.for_table(ROOT, store=store).snapshot()
            assert _files_and_tombstones(snap) == _files_and_tombstones(full)
            index = snap._file_index
            assert index is None or index == set(snap._file_keys.to_pylist())
            assert (index is not None) == (version >= 2)
        assert _files_and_tombstones(log.update(older)) == _files_and_tombstones(snap)
