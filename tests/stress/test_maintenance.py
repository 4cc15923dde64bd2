"""Safe maintenance: VACUUM spares in-flight transactions; racing checkpoints corrupt nothing.

How deltatx keeps VACUUM away from an in-flight transaction (``deltatx.log.vacuum``): a file
is deleted only if the latest snapshot does not reference it, it is not a tombstone younger
than the retention, and its modification time is older than the retention. A transaction
that began within the retention window

- wrote its data files after it began, so they are younger than the cutoff and survive;
- read files that were live in its snapshot: they are still live (referenced), or were
  removed after it began, so their tombstone's ``deletionTimestamp`` is younger than the
  cutoff and they survive too.

A shorter retention than ``delta.deletedFileRetentionDuration`` (default 7 days) is refused
unless ``enforce_retention=False``. Only a transaction that runs longer than the retention is
unprotected, as in Delta.

Checkpoints: each is written to a temporary file and renamed into place, so two processes
checkpointing the same version each publish a complete file and the last rename wins;
``_last_checkpoint`` is only a shortcut for listing.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from deltatx.errors import ConcurrentModificationException, InvalidArgumentError
from deltatx.kernel.actions import AddFile, Metadata
from deltatx.kernel.expressions import Column, Comparison, ComparisonOp, Literal
from deltatx.kernel.features import DEFAULT_PROTOCOL
from deltatx.kernel.log_paths import checkpoint_name
from deltatx.kernel.operations import Operation, OperationName
from deltatx.log.checkpoint import read_checkpoint, read_last_checkpoint
from deltatx.log.delta_log import DeltaLog
from deltatx.log.transaction import OptimisticTransaction
from deltatx.log.vacuum import vacuum
from deltatx.storage import LocalLogStore

FULL = bool(os.environ.get("DELTATX_STRESS_FULL"))
DAY_MS = 86_400_000
SCHEMA = json.dumps(
    {
        "type": "struct",
        "fields": [
            {"name": "id", "type": "long", "nullable": True, "metadata": {}},
            {"name": "part", "type": "string", "nullable": True, "metadata": {}},
        ],
    }
)


def _create(table: str, configuration: dict[str, str] | None = None) -> DeltaLog:
    log = DeltaLog.for_table(table, store=LocalLogStore())
    txn = OptimisticTransaction(log, None)
    txn.update_protocol(DEFAULT_PROTOCOL)
    txn.update_metadata(
        Metadata(
            id=str(uuid.uuid4()),
            schema_string=SCHEMA,
            partition_columns=("part",),
            configuration=dict(configuration or {}),
        )
    )
    txn.record_operation(Operation(OperationName.CREATE_TABLE, {}), {})
    txn.commit()
    return log


def _write_file(table: str, rel: str, *, age_ms: int = 0) -> AddFile:
    full = Path(table) / rel
    full.parent.mkdir(parents=True, exist_ok=True)
    full.write_bytes(b"x" * 32)
    mtime = time.time() - age_ms / 1000
    os.utime(full, (mtime, mtime))
    return AddFile(
        path=rel,
        partition_values={"part": rel.split("/")[0].split("=")[1]},
        size=32,
        modification_time=int(mtime * 1000),
        data_change=True,
    )


def _append(log: DeltaLog, *files: AddFile) -> int:
    txn = OptimisticTransaction(log, log.snapshot())
    txn.add_files(list(files))
    txn.record_operation(Operation(OperationName.WRITE, {"mode": "Append"}), {})
    return txn.commit()


def _overwrite(log: DeltaLog, part: str, *files: AddFile) -> int:
    txn = OptimisticTransaction(log, log.snapshot())
    txn.remove_files(txn.scan(Comparison(ComparisonOp.EQ, Column("part"), Literal(part))))
    txn.add_files(list(files))
    txn.record_operation(Operation(OperationName.WRITE, {"mode": "Overwrite"}), {})
    return txn.commit()


def _exists(table: str, rel: str) -> bool:
    return (Path(table) / rel).exists()


def test_vacuum_default_retention_spares_in_flight_transaction(tmp_path: Path) -> None:
    table = str(tmp_path / "t")
    log = _create(table)
    # A file written 30 days ago and still live, which the in-flight transaction reads.
    read_file = _write_file(table, "part=a/read.parquet", age_ms=30 * DAY_MS)
    _append(log, read_file)
    old_orphan = _write_file(table, "part=a/old-orphan.parquet", age_ms=8 * DAY_MS)

    # The in-flight transaction: begins, reads part=a, writes its own file, does not commit.
    txn = OptimisticTransaction(log, log.snapshot())
    assert [f.path for f in txn.scan()] == [read_file.path]
    written = _write_file(table, "part=b/in-flight.parquet")
    txn.add_files([written])
    blind = OptimisticTransaction(log, log.snapshot())
    blind.add_files([_write_file(table, "part=c/blind.parquet")])
    # Meanwhile another writer removes the file the transaction read.
    _overwrite(log, "a", _write_file(table, "part=a/replacement.parquet"))

    now = int(time.time() * 1000)
    # Default retention (7 days), run now and near the end of the window.
    for when in (now, now + 6 * DAY_MS):
        with pytest.raises(InvalidArgumentError, match="shorter than the table"):
            vacuum(log, retention_hours=1, now_ms=when)
        metrics = vacuum(log, now_ms=when)
        assert {os.path.basename(p) for p in metrics.deleted_paths} <= {"old-orphan.parquet"}
        assert _exists(table, read_file.path), "a file the in-flight transaction read"
        assert _exists(table, written.path), "a file the in-flight transaction wrote"
        assert _exists(table, "part=a/replacement.parquet")
        assert _exists(table, "part=c/blind.parquet")
    assert not _exists(table, old_orphan.path), "an orphan older than the retention goes"

    # A blind append that was in flight all along commits, and what it references exists.
    blind_file = blind.staged_adds[0]
    blind.record_operation(Operation(OperationName.WRITE, {"mode": "Append"}), {})
    blind.commit()
    assert blind_file.path in {f.path for f in log.snapshot().add_files()}
    for f in log.snapshot().add_files():
        assert _exists(table, f.path)
    # The reading transaction loses to the overwrite of what it read (a documented conflict);
    # its file stays, invisible, for a later VACUUM.
    txn.record_operation(Operation(OperationName.WRITE, {"mode": "Append"}), {})
    with pytest.raises(ConcurrentModificationException):
        txn.commit()
    assert written.path not in {f.path for f in log.snapshot().add_files()}

    # A transaction that outlives the retention is not protected (as in Delta).
    orphan = _write_file(table, "part=b/stale-attempt.parquet")
    vacuum(log, now_ms=now + 8 * DAY_MS)
    assert not _exists(table, orphan.path)
    assert not _exists(table, read_file.path)
    assert not _exists(table, written.path)


def test_vacuum_longer_retention_keeps_older_tombstones(tmp_path: Path) -> None:
    # Bug fixed: tombstones were filtered by the table's retention, not the one asked for.
    table = str(tmp_path / "t")
    log = _create(table)
    old = _write_file(table, "part=a/old.parquet", age_ms=40 * DAY_MS)
    _append(log, old)
    _overwrite(log, "a")  # removes it now
    ten_days_later = int(time.time() * 1000) + 10 * DAY_MS
    vacuum(log, retention_hours=30 * 24, now_ms=ten_days_later)
    assert _exists(table, old.path), "removed 10 days ago, retention 30 days: a reader needs it"
    vacuum(log, retention_hours=9 * 24, now_ms=ten_days_later)
    assert not _exists(table, old.path)


_CHECKPOINTER = """
import sys, time
from deltatx.log.delta_log import DeltaLog
from deltatx.storage import LocalLogStore
table, start, last = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
log = DeltaLog.for_table(table, store=LocalLogStore())
snaps = [log.snapshot(v) for v in range(1, last + 1)]
time.sleep(max(0.0, start - time.time()))
for snap in snaps:
    log.checkpoint(snap)
"""


def test_racing_checkpoints_of_the_same_version(tmp_path: Path) -> None:
    rounds = 12 if FULL else 3
    writers = 3
    versions = 25
    rng = random.Random(3)
    races = 0
    for r in range(rounds):
        table = str(tmp_path / f"t{r}")
        log = _create(table, {"delta.checkpointInterval": "100000"})
        for v in range(1, versions + 1):
            part = rng.choice("abc")
            f = _write_file(table, f"part={part}/f{v}.parquet")
            if rng.random() < 0.3:
                _overwrite(log, part, f)
            else:
                _append(log, f)
        expected = {
            v: sorted(f.path for f in log.snapshot(v).add_files()) for v in range(1, versions + 1)
        }
        start = time.time() + 1.5  # all processes have imported and loaded by then
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", _CHECKPOINTER, table, str(start), str(versions)],
                stderr=subprocess.PIPE,
                text=True,
            )
            for _ in range(writers)
        ]
        # A reader keeps reading while they race: every read succeeds and is right. It starts
        # with them: reading while they import would only take CPU from them.
        time.sleep(max(0.0, start - time.time()))
        reads = 0
        while any(p.poll() is None for p in procs):
            v = rng.randint(1, versions)
            assert sorted(f.path for f in log.snapshot(v).add_files()) == expected[v]
            assert sorted(f.path for f in log.snapshot().add_files()) == expected[versions]
            reads += 1
        for p in procs:
            _, err = p.communicate()
            assert p.returncode == 0, err[-2000:]
        races += versions
        store = LocalLogStore()
        for v in range(1, versions + 1):
            cp = read_checkpoint(store, log.log_path, [checkpoint_name(v)])
            assert sorted(cp.files.column("path").to_pylist()) == expected[v]
        hint = read_last_checkpoint(store, log.log_path)
        assert hint is not None and 1 <= hint.version <= versions
        assert sorted(f.path for f in log.snapshot().add_files()) == expected[versions]
        leftovers = [p.name for p in Path(log.log_path).iterdir() if p.name.endswith(".tmp")]
        assert leftovers == []
        assert reads > 0
    print(f"\ncheckpoint races: {races} versions x {writers} processes, {rounds} rounds")
