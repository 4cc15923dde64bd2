"""Code that runs in spawned processes: delta-rs peers and concurrent deltatx writers.

delta-rs does not survive ``fork``, so each function here is the target of a process started
with the ``spawn`` method; arguments and results are plain picklable values. Timed regions
mirror the deltatx side exactly (what is inside and outside the clock is the same).
"""

from __future__ import annotations

import os
import shutil
import time
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Barrier
from typing import Any

from benchmarks import synth


def _rs_adds(count: int, offset: int, prefix: str) -> list[Any]:
    from deltalake.transaction import AddAction

    return [
        AddAction(
            a.path, a.size, dict(a.partition_values), a.modification_time, True, a.stats or ""
        )
        for a in synth.adds(count, offset=offset, prefix=prefix)
    ]


def rs_commit(table: str, actions: int, runs: int, warmup: int) -> list[float]:
    """Times ``create_write_transaction`` of ``actions`` adds on an up-to-date table."""
    from deltalake import DeltaTable

    dt = DeltaTable(table)
    schema = dt.schema()
    samples: list[float] = []
    for i in range(warmup + runs):
        batch = _rs_adds(actions, offset=i * actions, prefix=f"rs{i}")
        dt.update_incremental()
        t0 = time.perf_counter()
        dt.create_write_transaction(batch, "append", schema, ["part"])
        elapsed = time.perf_counter() - t0
        if i >= warmup:
            samples.append(elapsed)
    return samples


def rs_load(table: str, runs: int, warmup: int) -> list[float]:
    """Times ``DeltaTable(path)`` (a full snapshot load, file list included)."""
    from deltalake import DeltaTable

    samples: list[float] = []
    for i in range(warmup + runs):
        t0 = time.perf_counter()
        dt = DeltaTable(table)
        dt.version()
        elapsed = time.perf_counter() - t0
        if i >= warmup:
            samples.append(elapsed)
    return samples


def rs_checkpoint(table: str, runs: int, warmup: int) -> list[float]:
    """Times opening the table and writing a checkpoint at its latest version, from scratch."""
    from deltalake import DeltaTable

    samples: list[float] = []
    for i in range(warmup + runs):
        synth.remove_checkpoints(table)
        t0 = time.perf_counter()
        DeltaTable(table).create_checkpoint()
        elapsed = time.perf_counter() - t0
        if i >= warmup:
            samples.append(elapsed)
    return samples


def rs_refresh(table: str, k: int, runs: int, warmup: int) -> list[float]:
    """Times ``update_incremental`` over ``k`` new commits."""
    from deltalake import DeltaTable

    dt = DeltaTable(table)
    samples: list[float] = []
    for i in range(warmup + runs):
        start = dt.version() + 1
        synth.append_commits(table, start, k, first_file=start)
        t0 = time.perf_counter()
        dt.update_incremental()
        elapsed = time.perf_counter() - t0
        if i >= warmup:
            samples.append(elapsed)
    return samples


def dml_bounds(rows: int) -> tuple[int, int, int, int]:
    """The 1% the DML cases change: ``[lo, hi)`` for UPDATE/DELETE, ``[src_lo, src_hi)`` MERGE.

    UPDATE and DELETE hit ids in the middle of the table (a few files, as the table is
    written sorted by id); the MERGE source overlaps the last 0.5% (updates) and adds 0.5%
    new ids (inserts).
    """
    n = max(rows // 100, 1)
    lo = rows // 2
    return lo, lo + n, rows - n // 2, rows - n // 2 + n


def _copy_table(src: str, dst: str) -> None:
    if os.path.exists(dst):
        shutil.rmtree(dst)
    shutil.copytree(src, dst)
    # As deltatx's copies (spark_cases._copy): no writeback left for the timed statement.
    os.sync()


def rs_dml(template: str, workdir: str, op: str, rows: int, runs: int, warmup: int) -> list[float]:
    """Times a delta-rs DELETE, UPDATE or MERGE of 1% of ``rows`` on a fresh copy each run."""
    import pyarrow as pa
    from deltalake import DeltaTable

    lo, hi, src_lo, src_hi = dml_bounds(rows)
    samples: list[float] = []
    for i in range(warmup + runs):
        path = os.path.join(workdir, f"rs-{op}-{i}")
        _copy_table(template, path)
        dt = DeltaTable(path)
        source = None
        if op == "merge":
            ids = pa.array(range(src_lo, src_hi), pa.int64())
            source = pa.table(
                {
                    "id": ids,
                    "k": pa.array([f"k{j % 10}" for j in range(src_lo, src_hi)]),
                    "v": pa.array([float(j) * 2.0 for j in range(src_lo, src_hi)]),
                }
            )
        t0 = time.perf_counter()
        if op == "delete":
            dt.delete(f"id >= {lo} AND id < {hi}")
        elif op == "update":
            dt.update(updates={"v": "v + 1.0"}, predicate=f"id >= {lo} AND id < {hi}")
        else:
            (
                dt.merge(source, "t.id = s.id", source_alias="s", target_alias="t")
                .when_matched_update_all()
                .when_not_matched_insert_all()
                .execute()
            )
        elapsed = time.perf_counter() - t0
        if i >= warmup:
            samples.append(elapsed)
        shutil.rmtree(path, ignore_errors=True)
    return samples


def rs_dml_with_memory(
    template: str, workdir: str, op: str, rows: int, runs: int, warmup: int
) -> tuple[list[float], float]:
    """:func:`rs_dml`, and the peak resident set of this (fresh) process in MB.

    From ``VmHWM``: Linux carries ``ru_maxrss`` across ``exec``, so a process spawned by a
    large driver reported the driver's peak, not its own.
    """
    import resource

    samples = rs_dml(template, workdir, op, rows, runs, warmup)
    try:
        with open("/proc/self/status", encoding="utf-8") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return samples, float(line.split()[1]) / 1024
    except OSError:
        pass
    return samples, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# -- concurrent blind appends -------------------------------------------------------------------


def deltatx_appender(
    table: str, worker: int, duration: float, barrier: Barrier, out: Queue[dict[str, Any]]
) -> None:
    """Commits one-file blind appends for ``duration`` seconds; reports what happened."""
    from deltatx.kernel.operations import Operation, OperationName
    from deltatx.log.delta_log import DeltaLog
    from deltatx.log.transaction import OptimisticTransaction

    log = DeltaLog.for_table(table)
    snap = log.snapshot()
    op = Operation(OperationName.WRITE, {"mode": "Append", "partitionBy": "[]"})
    done: list[float] = []
    latencies: list[float] = []
    failures = attempts = 0
    errors: list[str] = []
    barrier.wait()
    end = time.time() + duration
    i = 0
    while time.time() < end:
        batch = synth.adds(1, offset=worker * 10_000_000 + i, prefix=f"w{worker}")
        i += 1
        t0 = time.perf_counter()
        try:
            snap = log.update(snap)
            txn = OptimisticTransaction(log, snap)
            txn.add_files(batch)
            txn.record_operation(op, {})
            txn.commit()
        except Exception as exc:
            failures += 1
            if len(errors) < 3:
                errors.append(f"{type(exc).__name__}: {exc}"[:200])
            continue
        latencies.append(time.perf_counter() - t0)
        done.append(time.time())
        assert txn.result is not None
        attempts += txn.result.attempts
    out.put(
        {
            "done": done,
            "latencies": latencies,
            "failures": failures,
            "attempts": attempts,
            "errors": errors,
        }
    )


def rs_appender(
    table: str, worker: int, duration: float, barrier: Barrier, out: Queue[dict[str, Any]]
) -> None:
    """The delta-rs twin of :func:`deltatx_appender`."""
    from deltalake import DeltaTable

    dt = DeltaTable(table)
    schema = dt.schema()
    done: list[float] = []
    latencies: list[float] = []
    failures = 0
    errors: list[str] = []
    barrier.wait()
    end = time.time() + duration
    i = 0
    while time.time() < end:
        batch = _rs_adds(1, offset=worker * 10_000_000 + i, prefix=f"r{worker}")
        i += 1
        t0 = time.perf_counter()
        try:
            dt.update_incremental()
            dt.create_write_transaction(batch, "append", schema, ["part"])
        except Exception as exc:
            failures += 1
            if len(errors) < 3:
                errors.append(f"{type(exc).__name__}: {exc}"[:200])
            continue
        latencies.append(time.perf_counter() - t0)
        done.append(time.time())
    out.put(
        {
            "done": done,
            "latencies": latencies,
            "failures": failures,
            "attempts": 0,
            "errors": errors,
        }
    )
