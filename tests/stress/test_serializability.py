"""A serializability checker under load (seed 003: concurrent writers never corrupt the table).

Three writers run random transactions for a bounded time: under ``make test`` one process
with its own Spark session and two threads sharing the test's session (each extra JVM mostly
costs start-up on two cores); under ``DELTATX_STRESS_FULL=1`` three processes. The processes
are the session's shared writer processes (conftest.py), started once for every run. The checker
replays the committed ones on a model (see history.py) and proves the final table equals
it. Also: no acknowledged commit missing (versions contiguous, one per acknowledged attempt),
every failure a documented exception, and failed attempts leave no trace.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from deltatx import DeltaTable, write
from deltatx.log.delta_log import DeltaLog

from .history import DOCUMENTED, load, replay, run_history
from .servers import WriterServers


def _guard(
    errors: list[BaseException], spark: SparkSession, path: str, n: int, out: Path, reinsert: bool
) -> None:
    try:
        run_history(spark, path, f"w{n}", seconds=SECONDS, out=out, seed=n, reinsert=reinsert)
    except BaseException as exc:
        errors.append(exc)


FULL = bool(os.environ.get("DELTATX_STRESS_FULL"))
WRITERS = 3
PROCESSES = WRITERS if FULL else 1
SECONDS = float(
    os.environ.get(
        "DELTATX_STRESS_SECONDS", "120" if os.environ.get("DELTATX_STRESS_FULL") else "3"
    )
)


@pytest.mark.parametrize("row_level", [False, True], ids=["file-level", "row-level"])
@pytest.mark.parametrize("level", ["Serializable", "WriteSerializable"])
def test_history_is_serializable(
    spark: SparkSession, writer_servers: WriterServers, tmp_path: Path, level: str, row_level: bool
) -> None:
    path = str(tmp_path / "table")
    DeltaTable.create(
        spark,
        path,
        schema="key BIGINT, counter BIGINT, writer STRING",
        properties={
            "delta.isolationLevel": level,
            "delta.enableDeletionVectors": "true" if row_level else "false",
        },
    )
    initial = [(k, 0) for k in range(12)]
    write(
        spark.createDataFrame(
            [(k, c, "init") for k, c in initial], "key BIGINT, counter BIGINT, writer STRING"
        ).repartition(3),
        path,
    )
    logs = [tmp_path / f"w{n}.jsonl" for n in range(WRITERS)]
    reinsert = level == "WriteSerializable"
    servers = writer_servers.get(PROCESSES)
    for n, server in enumerate(servers):
        server.submit(
            kind="history",
            path=path,
            writer=f"w{n}",
            seconds=SECONDS,
            out=str(logs[n]),
            seed=n,
            reinsert=reinsert,
        )
    errors: list[BaseException] = []
    threads = [
        threading.Thread(target=_guard, args=(errors, spark, path, n, logs[n], reinsert))
        for n in range(PROCESSES, WRITERS)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for server in servers:
        server.result(timeout=SECONDS + 300)
    assert not errors, errors
    attempts = load(f for f in logs if f.exists())
    committed = [a for a in attempts if a.version is not None]
    failed = [a for a in attempts if a.error is not None]
    print(
        f"\n{level} {'row' if row_level else 'file'}-level: {len(attempts)} attempts, "
        f"{len(committed)} committed, {len(failed)} conflicts "
        f"({sorted({a.error for a in failed if a.error})})"
    )
    assert committed, "nothing committed"
    assert all(a.error in DOCUMENTED for a in failed), [a.error for a in failed]
    log = DeltaLog.for_table(path)
    assert log.latest_version() == 1 + len(committed), "a version is missing or extra"
    assert sorted(a.version for a in committed) == list(range(2, 2 + len(committed)))
    table = sorted(
        (r["key"], r["counter"]) for r in DeltaTable.for_path(spark, path).to_df().collect()
    )
    assert table == replay(attempts, initial)
