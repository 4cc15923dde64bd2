"""Parquet checkpoints: what deltatx writes, what it reads, and interop with delta-rs."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from deltatx.kernel.actions import (
    AddFile,
    DeletionVectorDescriptor,
    DomainMetadata,
    SetTransaction,
)
from deltatx.kernel.codec import serialize_commit
from deltatx.kernel.log_paths import checkpoint_name, commit_name, multipart_checkpoint_name
from deltatx.log import DeltaLog, Snapshot
from deltatx.storage import LocalLogStore, MemoryLogStore

from ..log_helpers import METADATA, PROTOCOL, add, create, info, remove, write_commit

ROOT = "/mem/t"


def rows(snap: Snapshot) -> list[dict[str, object]]:
    return sorted(snap.files.to_pylist(), key=lambda r: str(r["path"]))


def _populated(store: MemoryLogStore) -> DeltaLog:
    now = int(time.time() * 1000)
    dv = DeletionVectorDescriptor("u", "ab^-aqEH.-t@S}K{vb[*k^", 34, 2, offset=1)
    create(
        store,
        ROOT,
        add("a", stats='{"numRecords":3}', tags={"t": "1"}),
        add("b", part="b", deletion_vector=dv, base_row_id=0, default_row_commit_version=0),
        add("c"),
        SetTransaction("app", 3, 1),
        DomainMetadata("delta.rowTracking", '{"rowIdHighWaterMark":17}'),
        DomainMetadata("gone", "{}"),
    )
    write_commit(
        store,
        ROOT,
        1,
        [
            info(now),
            remove("c", ts=now - 1000, size=100, partition_values={"part": "a"}),
            remove("expired", ts=now - 30 * 24 * 3600 * 1000),
            DomainMetadata("gone", "{}", removed=True),
            add("d%20e", part=None),  # type: ignore[arg-type]
        ],
    )
    return DeltaLog.for_table(ROOT, store=store)


def test_checkpoint_round_trips_the_state() -> None:
    store = MemoryLogStore()
    log = _populated(store)
    before = log.snapshot()
    log.checkpoint()
    hint = json.loads(store.read(f"{ROOT}/_delta_log/_last_checkpoint"))
    assert set(hint) == {"version", "size", "sizeInBytes", "numOfAddFiles"}
    assert hint["version"] == 1 and hint["numOfAddFiles"] == 3
    # protocol, metaData, 1 txn, 1 live domain, 3 adds, 1 unexpired remove
    assert hint["size"] == 8
    data = store.read(f"{ROOT}/_delta_log/{checkpoint_name(1)}")
    assert hint["sizeInBytes"] == len(data)
    # Only the checkpoint is left: the state must come from it alone.
    for v in (0, 1):
        store.delete(f"{ROOT}/_delta_log/{commit_name(v)}")
    after = DeltaLog.for_table(ROOT, store=store).snapshot()
    assert after.version == 1
    assert rows(after) == rows(before)
    assert after.protocol == PROTOCOL and after.metadata == METADATA
    assert after.app_transactions == {"app": SetTransaction("app", 3, 1)}
    assert list(after.domain_metadata) == ["delta.rowTracking"]
    assert [t.path for t in after.tombstones()] == ["c"]
    tomb = after.tombstones()[0]
    assert tomb.size == 100 and tomb.partition_values == {"part": "a"}
    b = next(f for f in after.add_files() if f.path == "b")
    assert b.deletion_vector == DeletionVectorDescriptor("u", "ab^-aqEH.-t@S}K{vb[*k^", 34, 2, 1)
    assert b.base_row_id == 0 and b.default_row_commit_version == 0
    assert next(f for f in after.add_files() if f.path == "d%20e").partition_values == {
        "part": None
    }


def test_checkpoint_schema_uses_protocol_names() -> None:
    store = MemoryLogStore()
    log = _populated(store)
    log.checkpoint()
    table = pq.read_table(pa.BufferReader(store.read(f"{ROOT}/_delta_log/{checkpoint_name(1)}")))
    assert set(table.column_names) == {
        "txn",
        "add",
        "remove",
        "metaData",
        "protocol",
        "domainMetadata",
    }
    add_type = table.schema.field("add").type
    assert [add_type.field(i).name for i in range(add_type.num_fields)][:6] == [
        "path",
        "partitionValues",
        "size",
        "modificationTime",
        "dataChange",
        "stats",
    ]
    assert pa.types.is_map(add_type.field("partitionValues").type)
    dv = add_type.field("deletionVector").type
    assert [dv.field(i).name for i in range(dv.num_fields)] == [
        "storageType",
        "pathOrInlineDv",
        "offset",
        "sizeInBytes",
        "cardinality",
    ]
    assert dv.field("offset").type == pa.int32() and dv.field("cardinality").type == pa.int64()
    remove_type = table.schema.field("remove").type
    assert remove_type.get_field_index("stats") < 0 and remove_type.get_field_index("tags") < 0
    meta = table.schema.field("metaData").type
    assert pa.types.is_list(meta.field("partitionColumns").type)
    assert meta.field("format").type.get_field_index("options") >= 0
    # Every row holds exactly one action.
    valid = [table.column(c).is_valid().to_pylist() for c in table.column_names]
    assert all(sum(r) == 1 for r in zip(*valid, strict=True))


def test_reads_multipart_checkpoint_with_extra_and_missing_columns() -> None:
    store = MemoryLogStore()
    log = _populated(store)
    expected = log.snapshot()
    log.checkpoint()
    path = f"{ROOT}/_delta_log/{checkpoint_name(1)}"
    table = pq.read_table(pa.BufferReader(store.read(path)))
    # Writers such as delta-spark add parsed stats and may omit optional columns.
    add_col = table.column("add").combine_chunks()
    n = len(add_col)
    parsed = pa.StructArray.from_arrays(
        [pa.array([1] * n, pa.int64())], names=["numRecords"], mask=add_col.is_null()
    )
    add_with_extra = pa.StructArray.from_arrays(
        [*add_col.flatten(), parsed],
        fields=[*add_col.type, pa.field("stats_parsed", parsed.type)],
        mask=add_col.is_null(),
    )
    table = table.set_column(table.column_names.index("add"), "add", add_with_extra)
    table = table.drop_columns(["domainMetadata"]).append_column(
        "commitInfo", pa.nulls(n, pa.struct([("x", pa.int32())]))
    )
    store.delete(path)
    store.delete(f"{ROOT}/_delta_log/_last_checkpoint")
    half = table.num_rows // 2
    for part, piece in enumerate([table.slice(0, half), table.slice(half)], start=1):
        sink = pa.BufferOutputStream()
        pq.write_table(piece, sink)
        store.write(
            f"{ROOT}/_delta_log/{multipart_checkpoint_name(1, part, 2)}",
            sink.getvalue().to_pybytes(),
        )
    for v in (0, 1):
        store.delete(f"{ROOT}/_delta_log/{commit_name(v)}")
    snap = DeltaLog.for_table(ROOT, store=store).snapshot()
    assert rows(snap) == rows(expected)
    assert snap.domain_metadata == {}  # the column was absent
    assert snap.app_transaction_version("app") == 3


def test_commits_after_checkpoint_are_applied_on_top() -> None:
    store = MemoryLogStore()
    create(store, ROOT, add("a"), add("b"))
    log = DeltaLog.for_table(ROOT, store=store)
    log.checkpoint()
    write_commit(store, ROOT, 1, [remove("a"), add("c")])
    write_commit(store, ROOT, 2, [add("a", size=5)])
    store.delete(f"{ROOT}/_delta_log/{commit_name(0)}")
    snap = log.snapshot()
    assert snap.version == 2
    assert sorted((f.path, f.size) for f in snap.add_files()) == [("a", 5), ("b", 100), ("c", 100)]
    assert snap.tombstones(now_ms=0) == []
    assert log.snapshot(1).version == 1
    # Version 0 is still reconstructible from its checkpoint, without its commit file.
    assert sorted(f.path for f in log.snapshot(0).add_files()) == ["a", "b"]


def test_checkpoint_of_an_older_snapshot() -> None:
    store = MemoryLogStore()
    create(store, ROOT, add("a"))
    write_commit(store, ROOT, 1, [add("b")])
    log = DeltaLog.for_table(ROOT, store=store)
    log.checkpoint(log.snapshot(0))
    assert json.loads(store.read(f"{ROOT}/_delta_log/_last_checkpoint"))["version"] == 0
    assert store.exists(f"{ROOT}/_delta_log/{checkpoint_name(0)}")
    assert log.snapshot().num_files == 2


# -- interop with delta-rs --------------------------------------------------------------------


def _write_data_file(table: Path, rel: str, ids: list[int]) -> AddFile:
    full = table / rel
    full.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"id": pa.array(ids, pa.int64())}), full)
    part = rel.split("/")[0].split("=")[1]
    stats = json.dumps(
        {
            "numRecords": len(ids),
            "minValues": {"id": min(ids)},
            "maxValues": {"id": max(ids)},
            "nullCount": {"id": 0},
        },
        separators=(",", ":"),
    )
    return AddFile(
        path=rel,
        partition_values={"part": part},
        size=os.path.getsize(full),
        modification_time=int(os.path.getmtime(full) * 1000),
        data_change=True,
        stats=stats,
    )


def test_delta_rs_reads_a_deltatx_checkpoint(tmp_path: Path) -> None:
    deltalake = pytest.importorskip("deltalake")
    table = tmp_path / "t"
    log_dir = table / "_delta_log"
    log_dir.mkdir(parents=True)
    f1 = _write_data_file(table, "part=a/f1.parquet", [1, 2, 3])
    f2 = _write_data_file(table, "part=b/f2.parquet", [4, 5])
    f3 = _write_data_file(table, "part=a/f3.parquet", [6])
    commits = [
        [info(1000, "CREATE TABLE"), PROTOCOL, METADATA, f1, f2],
        [info(2000), f3],
        [info(3000, "DELETE"), f2.remove(timestamp=int(time.time() * 1000))],
    ]
    for v, actions in enumerate(commits):
        (log_dir / commit_name(v)).write_bytes(serialize_commit(actions))
    DeltaLog.for_table(str(table)).checkpoint()
    # Delete the commits the checkpoint covers, so delta-rs can only get the state from it.
    for v in range(3):
        (log_dir / commit_name(v)).unlink()
    f4 = _write_data_file(table, "part=b/f4.parquet", [7, 8])
    (log_dir / commit_name(3)).write_bytes(serialize_commit([info(4000), f4]))

    dt = deltalake.DeltaTable(str(table))
    assert dt.version() == 3
    actions = dt.get_add_actions(flatten=True)
    assert sorted(actions.column("path").to_pylist()) == [
        "part=a/f1.parquet",
        "part=a/f3.parquet",
        "part=b/f4.parquet",
    ]
    data = dt.to_pyarrow_table()
    assert sorted(data.column("id").to_pylist()) == [1, 2, 3, 6, 7, 8]
    assert sorted(set(data.column("part").to_pylist())) == ["a", "b"]
    ours = DeltaLog.for_table(str(table)).snapshot()
    assert sorted(f.path for f in ours.add_files()) == sorted(actions.column("path").to_pylist())


def test_deltatx_reads_a_delta_rs_table_with_checkpoint(tmp_path: Path) -> None:
    deltalake = pytest.importorskip("deltalake")
    path = str(tmp_path / "t")
    for i in range(4):
        batch = pa.table(
            {
                "id": pa.array(range(i * 10, i * 10 + 10), pa.int64()),
                "part": pa.array([str(i % 2)] * 10),
            }
        )
        deltalake.write_deltalake(path, batch, mode="append", partition_by=["part"])
    dt = deltalake.DeltaTable(path)
    dt.delete("id < 15")
    dt.create_checkpoint()
    deltalake.write_deltalake(
        path,
        pa.table({"id": pa.array([99], pa.int64()), "part": pa.array(["1"])}),
        mode="append",
        partition_by=["part"],
    )
    dt = deltalake.DeltaTable(path)
    theirs = sorted(dt.get_add_actions(flatten=True).column("path").to_pylist())
    log = DeltaLog.for_table(path, store=LocalLogStore())
    snap = log.snapshot()
    assert snap.version == dt.version()
    assert sorted(f.path for f in snap.add_files()) == theirs
    assert snap.metadata.partition_columns == ("part",)
    assert snap.size_in_bytes == sum(
        dt.get_add_actions(flatten=True).column("size_bytes").to_pylist()
    )
    # Delete the commits before delta-rs's checkpoint: deltatx reads delta-rs's Parquet.
    cp_version = json.loads((tmp_path / "t/_delta_log/_last_checkpoint").read_text())["version"]
    for v in range(cp_version + 1):
        os.unlink(f"{path}/_delta_log/{commit_name(v)}")
    again = DeltaLog.for_table(path).snapshot()
    assert sorted(f.path for f in again.add_files()) == theirs
    assert rows(again) == rows(snap)
