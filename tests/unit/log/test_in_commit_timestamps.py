"""In-commit timestamps: written when enabled, monotonic, and used by history and time travel.

The protocol: with ``delta.enableInCommitTimestamps`` (feature ``inCommitTimestamp``) every
commit's first action is ``commitInfo`` with an ``inCommitTimestamp`` greater than the previous
commit's; a commit that enables the feature on an existing table records the enablement
version and timestamp in the table properties; readers use these timestamps for history and
time travel.
"""

from __future__ import annotations

import json
import time

import pytest

from deltatx.kernel.actions import CommitInfo, Metadata
from deltatx.kernel.codec import parse_commit
from deltatx.kernel.features import protocol_for_configuration, writer_features
from deltatx.log import commit as commit_module
from deltatx.log.delta_log import DeltaLog
from deltatx.storage import MemoryLogStore

from ..log_helpers import METADATA, PROTOCOL, add, write_commit
from ..logtables import add as stats_add
from ..logtables import append, begin, create_table

ROOT = "/mem/ict"
ON = {"delta.enableInCommitTimestamps": "true"}


def _info(log: DeltaLog, version: int) -> CommitInfo:
    actions = parse_commit(log.store.read(f"{log.log_path}/{version:020d}.json"), where="t")
    assert isinstance(actions[0], CommitInfo), "commitInfo must be the first action"
    return actions[0]


def test_commits_record_strictly_growing_timestamps_even_when_the_clock_steps_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    log = create_table(MemoryLogStore(), ROOT, partitioned=False, configuration=ON)
    assert "inCommitTimestamp" in writer_features(log.snapshot().protocol)
    created = _info(log, 0).in_commit_timestamp
    assert created is not None
    assert "delta.inCommitTimestampEnablementVersion" not in log.snapshot().metadata.configuration
    # The clock now reads a minute before the table was created.
    monkeypatch.setattr(commit_module.time, "time", lambda: created / 1000 - 60.0)
    append(log, stats_add("a.parquet"))
    append(log, stats_add("b.parquet"))
    stamps = [_info(log, v).in_commit_timestamp for v in range(3)]
    assert stamps == [created, created + 1, created + 2]
    assert [e.timestamp for e in reversed(log.history())] == stamps
    assert log.snapshot().timestamp == created + 2


def test_a_table_without_them_records_none() -> None:
    log = create_table(MemoryLogStore(), ROOT, partitioned=False)
    append(log, stats_add("a.parquet"))
    assert _info(log, 1).in_commit_timestamp is None


def test_enabling_them_records_the_enablement_version_and_timestamp() -> None:
    log = create_table(MemoryLogStore(), ROOT, partitioned=False)
    append(log, stats_add("a.parquet"))
    txn = begin(log)
    snap = log.snapshot()
    txn.update_protocol(protocol_for_configuration(ON, snap.protocol))
    txn.update_metadata(Metadata(**{**_fields(snap.metadata), "configuration": ON}))
    version = txn.commit()
    conf = log.snapshot().metadata.configuration
    stamp = _info(log, version).in_commit_timestamp
    assert stamp is not None and stamp > snap.timestamp
    assert conf["delta.inCommitTimestampEnablementVersion"] == str(version)
    assert conf["delta.inCommitTimestampEnablementTimestamp"] == str(stamp)
    # Later commits keep the enablement point as it was.
    append(log, stats_add("b.parquet"))
    assert log.snapshot().metadata.configuration == conf


def _fields(md: Metadata) -> dict[str, object]:
    return {f: getattr(md, f) for f in Metadata.__dataclass_fields__ if f != "extra"}


def test_a_commit_rebased_onto_a_winner_follows_the_winners_timestamp() -> None:
    log = create_table(MemoryLogStore(), ROOT, partitioned=False, configuration=ON)
    txn = begin(log)
    txn.add_files([stats_add("mine.parquet")])
    future = int(time.time() * 1000) + 10**9
    winner = CommitInfo(timestamp=1, operation="WRITE", in_commit_timestamp=future)
    write_commit(log.store, ROOT, 1, [winner, stats_add("theirs.parquet")])
    assert txn.commit() == 2
    assert _info(log, 2).in_commit_timestamp == future + 1


def test_history_and_time_travel_use_the_recorded_timestamps() -> None:
    store = MemoryLogStore()
    # Wall-clock timestamps disagree with the in-commit ones; the in-commit ones win.
    conf = {**ON}
    md = Metadata(**{**_fields(METADATA), "configuration": conf})
    proto = protocol_for_configuration(conf, PROTOCOL)
    write_commit(
        store, ROOT, 0, [CommitInfo(timestamp=9_000, in_commit_timestamp=1_000), proto, md]
    )
    write_commit(store, ROOT, 1, [CommitInfo(timestamp=5_000, in_commit_timestamp=2_000), add("a")])
    write_commit(store, ROOT, 2, [CommitInfo(timestamp=1_000, in_commit_timestamp=3_000), add("b")])
    log = DeltaLog.for_table(ROOT, store=store)
    assert [e.timestamp for e in log.history()] == [3_000, 2_000, 1_000]
    assert log.snapshot(timestamp=2_500).version == 1
    assert log.snapshot(timestamp=3_000).version == 2
    assert log.snapshot(1).timestamp == 2_000
    assert log.commit_timestamp(0) == 1_000
    raw = json.loads(store.read(f"{ROOT}/_delta_log/{0:020d}.json").split(b"\n")[0])
    assert raw["commitInfo"]["inCommitTimestamp"] == 1_000
