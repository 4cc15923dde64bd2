"""Re-execution under load: 4 writers, conflicting UPDATE/DELETE/MERGE with ``retries=5``.

Each writer thread has its own DeltaTable handle and runs transactions of one or two
statements on a small key space through ``dt.begin(retries=5)``; the table is one data file
without deletion vectors, so overlapping statements always conflict.
Every statement is logged with its outcome; the serializability checker of history.py
replays the acknowledged ones in commit order, each applied to the rows of the version its
*last* attempt read, and the final table must equal that model: no effect lost or
duplicated. Also: every statement either committed or raised a documented conflict, the
versions after set-up are exactly the acknowledged transactions, each once.

Bounded: ~8 s by default (part of ``make test``), 60 s under ``DELTATX_STRESS_FULL=1``.
"""

from __future__ import annotations

import json
import os
import random
import threading
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from deltatx import DeltaTable, write
from deltatx.errors import ConcurrentModificationException
from deltatx.kernel.actions import CommitInfo
from deltatx.log.delta_log import DeltaLog
from deltatx.reexecution import Backoff

from .history import DOCUMENTED, Attempt, replay

FULL = bool(os.environ.get("DELTATX_STRESS_FULL"))
SECONDS = float(os.environ.get("DELTATX_REEXECUTION_SECONDS", "60" if FULL else "8"))
WRITERS = 4
KEYS = 8
RETRIES = 5
SCHEMA = "key BIGINT, counter BIGINT, writer STRING"


def _statement(spark: SparkSession, txn: Any, op: str, key: int, writer: str) -> None:
    if op == "increment":
        txn.update(f"key = {key}", set={"counter": "counter + 1"})
    elif op == "delete":
        txn.delete(f"key = {key}")
    else:
        src = spark.createDataFrame([(key, 0, writer)], SCHEMA)
        (
            txn.alias("t")
            .merge(src.alias("s"), "t.key = s.key")
            .when_matched_update(set={"counter": "t.counter + 1"})
            .when_not_matched_insert_all()
            .execute()
        )


def run_writer(spark: SparkSession, path: str, n: int, *, seconds: float, out: Path) -> None:
    """Random one- or two-statement transactions until ``seconds`` pass; logs each statement."""
    rng = random.Random(1000 + n)
    writer = f"w{n}"
    dt = DeltaTable.for_path(spark, path)
    backoff = Backoff(initial_ms=5, max_ms=200)
    deadline = time.monotonic() + seconds
    with out.open("a") as log:
        while time.monotonic() < deadline:
            # Distinct keys: a statement never depends on another of the same transaction.
            keys = rng.sample(range(KEYS), 2 if rng.random() < 0.3 else 1)
            ops = [rng.choice(["increment", "increment", "delete", "merge", "merge"]) for _ in keys]
            txn = dt.begin(retries=RETRIES, backoff=backoff)
            version: int | None = None
            error: str | None = None
            try:
                with txn:
                    for op, key in zip(ops, keys, strict=True):
                        _statement(spark, txn, op, key, writer)
                version = txn.core.result.version if txn.core.result else None
            except ConcurrentModificationException as exc:
                error = type(exc).__name__
            except Exception as exc:  # recorded so the checker can flag it
                error = f"UNDOCUMENTED {type(exc).__name__}: {exc}"
            for op, key in zip(ops, keys, strict=True):
                attempt = Attempt(writer, op, key, txn.read_versions[-1], version, error)
                record = {**asdict(attempt), "attempts": txn.attempts}
                log.write(json.dumps(record) + "\n")
            log.flush()


# File level (no deletion vectors, one data file): every two overlapping statements conflict,
# so re-execution is certain to be exercised. Row level (deletion vectors) only with
# DELTATX_STRESS_FULL: different keys then rarely conflict.
LEVELS = [False, True] if FULL else [False]


@pytest.mark.parametrize("row_level", LEVELS, ids=["file-level", "row-level"][: len(LEVELS)])
def test_writers_with_retries_stay_serializable(
    spark: SparkSession, tmp_path: Path, row_level: bool
) -> None:
    path = str(tmp_path / "table")
    DeltaTable.create(  # WriteSerializable, the default
        spark,
        path,
        schema=SCHEMA,
        properties={"delta.enableDeletionVectors": str(row_level).lower()},
    )
    initial = [(k, 0) for k in range(KEYS)]
    write(spark.createDataFrame([(k, c, "init") for k, c in initial], SCHEMA).coalesce(1), path)
    log = DeltaLog.for_table(path)
    base = log.latest_version()

    logs = [tmp_path / f"w{n}.jsonl" for n in range(WRITERS)]
    errors: list[BaseException] = []

    def guarded(n: int) -> None:
        try:
            run_writer(spark, path, n, seconds=SECONDS, out=logs[n])
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=guarded, args=(n,)) for n in range(WRITERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors

    records = [json.loads(line) for f in logs if f.exists() for line in f.read_text().splitlines()]
    attempts = [Attempt(**{k: v for k, v in r.items() if k != "attempts"}) for r in records]
    committed = {(a.writer, a.version) for a in attempts if a.version is not None}
    failed = [a for a in attempts if a.version is None]
    reexecuted = {(r["writer"], r["version"]) for r in records if r["attempts"] > 1}
    print(
        f"\nre-execution stress ({SECONDS:.0f} s, {WRITERS} writers): {len(attempts)} "
        f"statements, {len(committed)} transactions committed, {len(reexecuted)} of them "
        f"re-executed, {len(failed)} statements raised ({sorted({a.error for a in failed})})"
    )
    # Every statement either committed or raised a documented conflict.
    assert all((a.version is None) != (a.error is None) for a in attempts)
    assert all(a.error in DOCUMENTED for a in failed), [a.error for a in failed]
    assert committed, "nothing committed"
    if not row_level:  # the writers' first statements overlap: all but one must re-run
        assert reexecuted, "the workload should have made some statement conflict and re-run"
    # Each acknowledged transaction is exactly one version, and nothing else landed.
    latest = log.latest_version()
    assert sorted(v for _, v in committed) == list(range(base + 1, latest + 1))
    txn_ids = []
    for v in range(base + 1, latest + 1):
        info = log.read_commit(v)[0]
        assert isinstance(info, CommitInfo)
        txn_ids.append(info.txn_id)
    assert len(set(txn_ids)) == len(txn_ids), "a commit appears twice"
    # The table is the serial replay of the acknowledged statements: nothing lost or twice.
    table = sorted(
        (r["key"], r["counter"]) for r in DeltaTable.for_path(spark, path).to_df().collect()
    )
    assert table == replay(attempts, initial)
