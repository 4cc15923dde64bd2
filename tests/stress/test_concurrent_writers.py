"""Many writers on one table: 8 threads sharing a session and processes with their own.

One process under ``make test``, four under ``DELTATX_STRESS_FULL=1`` (``make stress``): on
two cores each extra JVM mostly adds start-up time, not concurrency. The processes are the
session's shared writer processes (conftest.py): they have their sessions before the threads
start, so threads and processes always write at the same time.

Seed 003: concurrent writers never corrupt the table. Checks: versions are contiguous, every
acknowledged commit's rows are in the final table (as the model of acknowledged commits in
version order predicts), no commit appears twice, every failure is a documented conflict.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from pyspark.sql import SparkSession

from deltatx import DeltaTable
from deltatx.kernel.actions import CommitInfo
from deltatx.log.delta_log import DeltaLog

from .servers import WriterServers
from .workload import PARTITIONS, expected_rows, load_attempts, run_writer

SECONDS = float(
    os.environ.get("DELTATX_STRESS_SECONDS", "90" if os.environ.get("DELTATX_STRESS_FULL") else "5")
)
PROCESSES = 4 if os.environ.get("DELTATX_STRESS_FULL") else 1


def test_threads_and_processes_append_and_overwrite(
    spark: SparkSession, writer_servers: WriterServers, tmp_path: Path
) -> None:
    path = str(tmp_path / "table")
    # Serializable: the final table must equal replaying the acknowledged commits in log order
    # (WriteSerializable may legally reorder blind appends before an overwrite).
    DeltaTable.create(
        spark,
        path,
        schema="id BIGINT, part STRING, writer STRING",
        partition_by=["part"],
        properties={"delta.isolationLevel": "Serializable"},
    )
    logs = []
    servers = writer_servers.get(PROCESSES)
    errors: list[BaseException] = []

    def guarded(*args: object, **kwargs: object) -> None:
        try:
            run_writer(*args, **kwargs)  # type: ignore[arg-type]
        except BaseException as exc:
            errors.append(exc)

    threads = []
    for n in range(8):
        out = tmp_path / f"thread{n}.jsonl"
        logs.append(out)
        threads.append(
            threading.Thread(
                target=guarded,
                args=(spark, path, f"thread{n}"),
                kwargs={"seconds": SECONDS, "out": out, "seed": 100 + n},
            )
        )
    for n, server in enumerate(servers):
        out = tmp_path / f"proc{n}.jsonl"
        logs.append(out)
        server.submit(
            kind="writer", path=path, writer=f"proc{n}", seconds=SECONDS, out=str(out), seed=n
        )
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for server in servers:
        server.result(timeout=SECONDS + 240)
    assert not errors, errors

    attempts = load_attempts([f for f in logs if f.exists()])
    acknowledged = [a for a in attempts if a.version is not None]
    assert len(acknowledged) >= 8, "the workload should have committed a fair amount"
    writers = {a.writer for a in acknowledged}
    assert any(w.startswith("proc") for w in writers) and any(
        w.startswith("thread") for w in writers
    )
    versions = [a.version for a in acknowledged]
    assert len(versions) == len(set(versions)), "two attempts acknowledged the same version"

    log = DeltaLog.for_table(path)
    latest = log.latest_version()
    assert latest == len(acknowledged), "every version is an acknowledged commit, no gaps"
    txn_ids = []
    for v in range(latest + 1):
        info = log.read_commit(v)[0]
        assert isinstance(info, CommitInfo)
        txn_ids.append(info.txn_id)
    assert len(set(txn_ids)) == len(txn_ids), "a commit appears twice"

    actual = sorted(r["id"] for r in DeltaTable.for_path(spark, path).to_df().collect())
    assert len(actual) == len(set(actual)), "a row appears twice"
    assert set(actual) == expected_rows(attempts)
    assert all(
        a.error
        in (
            None,
            "ConcurrentAppendException",
            "ConcurrentDeleteReadException",
            "ConcurrentDeleteDeleteException",
        )
        for a in attempts
    )
    assert set(PARTITIONS) >= {a.partition for a in attempts}
