"""A log-level writer process for the crash-injection harness (no Spark).

Usage: ``crash_writer.py <table> <writer> <commits> <journal> <seed>``. Each attempt writes a
small real data file under the table root, then commits a blind append or a partition
overwrite through :class:`OptimisticTransaction`. The journal gets one JSON line per attempt
before the commit (``"intent"``) and one after (``"ack"`` or ``"failed"``), each fsynced before
the writer goes on, so the parent knows what was acknowledged even after a SIGKILL. The parent
arms a fault point through ``DELTATX_FAULT`` or kills the process at a random time after it
prints ``ready``.
"""

from __future__ import annotations

import json
import os
import random
import sys
import time
import uuid
from typing import IO, Any

from deltatx.errors import ConcurrentModificationException
from deltatx.kernel.actions import AddFile
from deltatx.kernel.expressions import Column, Comparison, ComparisonOp, Literal
from deltatx.kernel.operations import Operation, OperationName
from deltatx.log.delta_log import DeltaLog
from deltatx.log.transaction import OptimisticTransaction
from deltatx.storage import LocalLogStore

PARTITIONS = ("p0", "p1", "p2")


def journal(out: IO[str], record: dict[str, Any]) -> None:
    # fsync before going on: an acknowledgement the parent cannot see proves nothing.
    out.write(json.dumps(record) + "\n")
    out.flush()
    os.fsync(out.fileno())


def main(table: str, writer: str, commits: int, journal_path: str, seed: int) -> None:
    rng = random.Random(seed)
    log = DeltaLog.for_table(table, store=LocalLogStore())
    print("ready", flush=True)
    with open(journal_path, "a") as out:
        for seq in range(commits):
            attempt = f"{writer}-{seq}"
            part = rng.choice(PARTITIONS)
            op = "overwrite" if rng.random() < 0.3 else "append"
            rel = f"part={part}/{attempt}-{uuid.uuid4().hex[:12]}.parquet"
            journal(out, {"kind": "intent", "attempt": attempt, "op": op, "file": rel})
            txn = OptimisticTransaction(log, log.snapshot())
            # Phase two: the data file is written (and invisible) before anything is committed.
            full = os.path.join(table, rel)
            os.makedirs(os.path.dirname(full), exist_ok=True)
            payload = os.urandom(rng.randint(16, 256))
            with open(full, "wb") as f:
                f.write(payload)
            if op == "overwrite":
                pred = Comparison(ComparisonOp.EQ, Column("part"), Literal(part))
                txn.remove_files(txn.scan(pred))
            stats = {"numRecords": 1, "minValues": {"id": seq}, "maxValues": {"id": seq}}
            txn.add_files(
                [
                    AddFile(
                        path=rel,
                        partition_values={"part": part},
                        size=len(payload),
                        modification_time=int(time.time() * 1000),
                        data_change=True,
                        stats=json.dumps(stats),
                    )
                ]
            )
            mode = "Overwrite" if op == "overwrite" else "Append"
            txn.record_operation(Operation(OperationName.WRITE, {"mode": mode}), {})
            try:
                version = txn.commit(user_metadata=attempt)
            except ConcurrentModificationException as exc:
                journal(out, {"kind": "failed", "attempt": attempt, "error": type(exc).__name__})
                continue
            assert txn.result is not None
            journal(
                out,
                {
                    "kind": "ack",
                    "attempt": attempt,
                    "version": version,
                    "txn_id": txn.result.txn_id,
                    "file": rel,
                    "op": op,
                },
            )


if __name__ == "__main__":
    table, writer, commits, journal_path, seed = sys.argv[1:6]
    main(table, writer, int(commits), journal_path, int(seed))
