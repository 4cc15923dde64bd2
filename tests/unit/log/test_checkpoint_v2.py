"""V2 checkpoints (JSON and Parquet, with and without sidecars) and log compaction files.

The protocol: a v2 checkpoint is ``n.checkpoint.<uuid>.json|parquet`` holding a
``checkpointMetadata`` action, the non-file actions, and file actions inline or in ``sidecar``
files under ``_delta_log/_sidecars``; a table with the ``v2Checkpoint`` feature writes v2
checkpoints only. A compaction file ``x.y.compacted.json`` reconciles commits x to y.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from deltatx.errors import InvalidTableError
from deltatx.kernel.actions import (
    AddFile,
    CommitInfo,
    DeletionVectorDescriptor,
    DomainMetadata,
    Metadata,
    ProtocolAction,
    SetTransaction,
)
from deltatx.kernel.codec import serialize_action, serialize_commit
from deltatx.kernel.features import protocol_for_configuration
from deltatx.kernel.log_paths import (
    checkpoint_name,
    commit_name,
    compaction_name,
    parse_log_file,
    v2_checkpoint_name,
)
from deltatx.log import DeltaLog, Snapshot
from deltatx.log.checkpoint import checkpoint_table
from deltatx.storage import MemoryLogStore

from ..log_helpers import METADATA, PROTOCOL, add, info, remove, write_commit

ROOT = "/mem/t"
LOG = f"{ROOT}/_delta_log"
V2 = ProtocolAction(3, 7, ("v2Checkpoint",), ("v2Checkpoint",))
UUID = "0f3c83b6-6b1e-4b55-9f0c-ff6a1f4e0a01"


def rows(snap: Snapshot) -> list[dict[str, object]]:
    return sorted(snap.files.to_pylist(), key=lambda r: str(r["path"]))


def tombstones(snap: Snapshot) -> list[str]:
    return sorted(t.path for t in snap.tombstones())


def _populated(store: MemoryLogStore, protocol: ProtocolAction = V2) -> DeltaLog:
    now = int(time.time() * 1000)
    dv = DeletionVectorDescriptor("u", "ab^-aqEH.-t@S}K{vb[*k^", 34, 2, offset=1)
    write_commit(
        store,
        ROOT,
        0,
        [
            info(now - 5000, "CREATE TABLE"),
            protocol,
            METADATA,
            add("a", stats='{"numRecords":3}'),
            add("b", part="b", deletion_vector=dv),
            add("c"),
            SetTransaction("app", 3, 1),
            DomainMetadata("delta.rowTracking", '{"rowIdHighWaterMark":17}'),
        ],
    )
    write_commit(store, ROOT, 1, [info(now), remove("c", ts=now - 1000), add("d")])
    return DeltaLog.for_table(ROOT, store=store)


def _drop_commits(store: MemoryLogStore, *versions: int) -> None:
    for v in versions:
        store.delete(f"{LOG}/{commit_name(v)}")


def _state_of(snap: Snapshot) -> pa.Table:
    return checkpoint_table(
        files=snap.files,
        tombstones=snap.tombstone_table(),
        protocol=snap.protocol,
        metadata=snap.metadata,
        app_transactions=snap.app_transactions,
        domain_metadata=snap.domain_metadata,
    )


def _fields(md: Metadata) -> dict[str, object]:
    return {f: getattr(md, f) for f in Metadata.__dataclass_fields__ if f != "extra"}


def _file_rows(table: pa.Table) -> pa.Table:
    keep = pc.or_(pc.is_valid(table.column("add")), pc.is_valid(table.column("remove")))
    return table.select(["add", "remove"]).filter(keep)


def _parquet(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    return bytes(sink.getvalue().to_pybytes())


def _non_file_lines(snap: Snapshot) -> list[str]:
    actions = [snap.protocol, snap.metadata, *snap.app_transactions.values()]
    actions += list(snap.domain_metadata.values())
    return [serialize_action(a) for a in actions]


def test_a_table_with_the_feature_gets_a_v2_checkpoint_it_reads_back() -> None:
    store = MemoryLogStore()
    log = _populated(store)
    before = log.snapshot()
    log.checkpoint()
    names = [s.name for s in store.list_from(LOG)]
    written = [n for n in names if n.startswith(f"{1:020d}.checkpoint.")]
    assert len(written) == 1 and written[0].endswith(".parquet")
    parsed = parse_log_file(written[0])
    assert parsed is not None and parsed.kind.value == "v2_checkpoint"
    table = pq.read_table(pa.BufferReader(store.read(f"{LOG}/{written[0]}")))
    meta = [r for r in table.column("checkpointMetadata").to_pylist() if r is not None]
    assert meta == [{"version": 1, "tags": None}]
    assert table.column("sidecar").null_count == table.num_rows
    hint = json.loads(store.read(f"{LOG}/_last_checkpoint"))
    assert hint["version"] == 1 and hint["v2Checkpoint"]["path"] == written[0]
    _drop_commits(store, 0, 1)
    after = DeltaLog.for_table(ROOT, store=store).snapshot()
    assert rows(after) == rows(before) and tombstones(after) == ["c"]
    assert after.protocol == V2 and after.domain_metadata == before.domain_metadata


def test_a_table_without_the_feature_keeps_classic_checkpoints() -> None:
    store = MemoryLogStore()
    log = _populated(store, ProtocolAction(1, 2))
    log.checkpoint()
    assert store.exists(f"{LOG}/{checkpoint_name(1)}")
    assert "v2Checkpoint" not in json.loads(store.read(f"{LOG}/_last_checkpoint"))


@pytest.mark.parametrize("sidecars", [0, 1, 2])
def test_json_v2_checkpoint_with_file_actions_inline_or_in_sidecars(sidecars: int) -> None:
    store = MemoryLogStore()
    before = _populated(store).snapshot()
    lines = [json.dumps({"checkpointMetadata": {"version": 1}}), *_non_file_lines(before)]
    files = _file_rows(_state_of(before))
    if sidecars:
        step = -(-files.num_rows // sidecars)
        for i in range(sidecars):
            name = f"sidecar-{i}.parquet"
            store.write(f"{LOG}/_sidecars/{name}", _parquet(files.slice(i * step, step)))
            sidecar = {"path": name, "sizeInBytes": 1, "modificationTime": 1}
            lines.append(json.dumps({"sidecar": sidecar}))
    else:
        for row in files.to_pylist():
            kind = "add" if row["add"] is not None else "remove"
            body = {k: v for k, v in row[kind].items() if v is not None}
            body["partitionValues"] = dict(body.get("partitionValues") or [])
            if body.get("tags") is not None:
                body["tags"] = dict(body["tags"])
            lines.append(json.dumps({kind: body}))
    store.write(f"{LOG}/{v2_checkpoint_name(1, UUID, json_format=True)}", "\n".join(lines).encode())
    _drop_commits(store, 0, 1)
    after = DeltaLog.for_table(ROOT, store=store).snapshot()
    assert after.version == 1
    assert rows(after) == rows(before) and tombstones(after) == ["c"]
    assert after.app_transactions == before.app_transactions


def test_classic_named_parquet_checkpoint_with_a_sidecar_column() -> None:
    store = MemoryLogStore()
    before = _populated(store).snapshot()
    state = _state_of(before)
    store.write(f"{LOG}/_sidecars/s.parquet", _parquet(_file_rows(state)))
    small = state.filter(
        pc.invert(pc.or_(pc.is_valid(state.column("add")), pc.is_valid(state.column("remove"))))
    ).drop_columns(["add", "remove"])
    sidecar_type = pa.struct([("path", pa.string()), ("sizeInBytes", pa.int64())])
    sidecar = pa.array(
        [None] * small.num_rows + [{"path": "s.parquet", "sizeInBytes": 1}], sidecar_type
    )
    padded = pa.concat_tables(
        [small, pa.table({c: pa.nulls(1, small.schema.field(c).type) for c in small.column_names})]
    )
    store.write(f"{LOG}/{checkpoint_name(1)}", _parquet(padded.append_column("sidecar", sidecar)))
    _drop_commits(store, 0, 1)
    after = DeltaLog.for_table(ROOT, store=store).snapshot()
    assert rows(after) == rows(before) and tombstones(after) == ["c"]


def test_a_missing_sidecar_falls_back_to_the_commits_or_is_named() -> None:
    store = MemoryLogStore()
    before = _populated(store).snapshot()
    lines = [*_non_file_lines(before), json.dumps({"sidecar": {"path": "gone.parquet"}})]
    store.write(f"{LOG}/{v2_checkpoint_name(1, UUID, json_format=True)}", "\n".join(lines).encode())
    assert rows(DeltaLog.for_table(ROOT, store=store).snapshot()) == rows(before)
    _drop_commits(store, 0)
    with pytest.raises(
        InvalidTableError, match=r"_sidecars/gone\.parquet: sidecar file is missing"
    ):
        DeltaLog.for_table(ROOT, store=store).snapshot()


def test_a_sidecar_path_may_not_climb_out_of_the_sidecar_directory() -> None:
    store = MemoryLogStore()
    before = _populated(store).snapshot()
    lines = [*_non_file_lines(before), json.dumps({"sidecar": {"path": "../../x.parquet"}})]
    store.write(f"{LOG}/{v2_checkpoint_name(1, UUID, json_format=True)}", "\n".join(lines).encode())
    _drop_commits(store, 0)
    with pytest.raises(InvalidTableError, match="climbs out of the sidecar directory"):
        DeltaLog.for_table(ROOT, store=store).snapshot()


def test_a_compaction_file_stands_for_the_commits_it_covers() -> None:
    store = MemoryLogStore()
    now = int(time.time() * 1000)
    log = _populated(store)
    write_commit(store, ROOT, 2, [info(now + 1), add("e"), remove("a", ts=now)])
    write_commit(store, ROOT, 3, [info(now + 2), add("f")])
    expected = log.snapshot()
    # What a writer reconciles commits 1..2 into (no commitInfo).
    compacted = [remove("c", ts=now - 1000), add("d"), add("e"), remove("a", ts=now)]
    store.write(f"{LOG}/{compaction_name(1, 2)}", serialize_commit(compacted))
    # The covered commits are not read: garbling them changes nothing.
    store.write(f"{LOG}/{commit_name(1)}", b"not json\n", overwrite=True)
    store.write(f"{LOG}/{commit_name(2)}", b"not json\n", overwrite=True)
    snap = DeltaLog.for_table(ROOT, store=store).snapshot()
    assert snap.version == 3 and rows(snap) == rows(expected)
    assert tombstones(snap) == tombstones(expected)
    assert snap.timestamp == now + 2
    # A version inside the compaction's range is replayed from commits (and fails here).
    with pytest.raises(InvalidTableError, match="not valid JSON"):
        DeltaLog.for_table(ROOT, store=store).snapshot(1)


# -- interop: delta-rs reads what deltatx writes ------------------------------------


def _data_file(table: Path, rel: str, ids: list[int]) -> AddFile:
    full = table / rel
    full.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"id": pa.array(ids, pa.int64())}), full)
    stats = {"numRecords": len(ids), "minValues": {"id": min(ids)}, "maxValues": {"id": max(ids)}}
    return AddFile(
        path=rel,
        partition_values={"part": rel.split("/")[0].split("=")[1]},
        size=full.stat().st_size,
        modification_time=int(full.stat().st_mtime * 1000),
        data_change=True,
        stats=json.dumps({**stats, "nullCount": {"id": 0}}),
    )


@pytest.mark.interop
def test_delta_rs_reads_a_v2_checkpoint_and_in_commit_timestamps(tmp_path: Path) -> None:
    deltalake = pytest.importorskip("deltalake")
    table = tmp_path / "t"
    log_dir = table / "_delta_log"
    log_dir.mkdir(parents=True)
    conf = {"delta.checkpointPolicy": "v2", "delta.enableInCommitTimestamps": "true"}
    protocol = protocol_for_configuration(conf, PROTOCOL)
    metadata = Metadata(**{**_fields(METADATA), "configuration": conf})
    f1 = _data_file(table, "part=a/f1.parquet", [1, 2, 3])
    f2 = _data_file(table, "part=b/f2.parquet", [4, 5])
    f3 = _data_file(table, "part=a/f3.parquet", [6])
    commits = [
        [CommitInfo(timestamp=1000, in_commit_timestamp=1000), protocol, metadata, f1, f2],
        [CommitInfo(timestamp=2000, in_commit_timestamp=2000), f3],
        [CommitInfo(timestamp=3000, in_commit_timestamp=3000), f2.remove(timestamp=3000)],
    ]
    for v, actions in enumerate(commits):
        (log_dir / commit_name(v)).write_bytes(serialize_commit(actions))
    DeltaLog.for_table(str(table)).checkpoint()
    assert [p.name for p in log_dir.glob(f"{2:020d}.checkpoint.*-*.parquet")]
    for v in range(3):  # only the v2 checkpoint holds the state now
        (log_dir / commit_name(v)).unlink()
    dt = deltalake.DeltaTable(str(table))
    assert dt.version() == 2
    paths = sorted(dt.get_add_actions(flatten=True).column("path").to_pylist())
    assert paths == ["part=a/f1.parquet", "part=a/f3.parquet"]
    # deltalake's Python reader refuses the v2Checkpoint feature by name; its log reader
    # (above) replays the v2 checkpoint, and the files it lists hold the rows.
    ids = [i for uri in dt.file_uris() for i in pq.read_table(uri).column("id").to_pylist()]
    assert sorted(ids) == [1, 2, 3, 6]
