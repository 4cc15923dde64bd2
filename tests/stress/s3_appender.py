"""Writer processes appending to one table on S3, and the check of what they leave behind.

Each process appends one file per commit (log only: the acknowledged commits are what is
checked) through the S3 LogStore, with faults injected into its PUTs when
``DELTATX_S3_FAULTS`` arms them, and records every outcome as a JSON line: ``acked`` with the
version the commit was told, ``failed`` when the commit raised (its outcome may be unknown).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

from deltatx.errors import CommitFailedError
from deltatx.kernel.actions import AddFile, CommitInfo, Metadata
from deltatx.kernel.features import DEFAULT_PROTOCOL
from deltatx.kernel.operations import Operation, OperationName
from deltatx.log.delta_log import DeltaLog
from deltatx.log.transaction import OptimisticTransaction

HERE = Path(__file__).parent


def create(table: str) -> None:
    """An empty table with one column."""
    log = DeltaLog.for_table(table)
    txn = OptimisticTransaction(log, None)
    txn.update_protocol(DEFAULT_PROTOCOL)
    txn.update_metadata(
        Metadata(
            id=str(uuid.uuid4()),
            schema_string=json.dumps(
                {
                    "type": "struct",
                    "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}}],
                }
            ),
        )
    )
    txn.record_operation(Operation(OperationName.CREATE_TABLE, {}), {})
    txn.commit()


# Commits each writer attempts however slow the machine: a run whose writers only start
# within its seconds (a loaded CI machine) still races them against each other.
MIN_COMMITS = 4


def append_for(table: str, writer: str, seconds: float, out: Path) -> None:
    """Appends one file per commit for ``seconds``, at least ``MIN_COMMITS`` times.

    Each outcome is logged to ``out``.
    """
    log = DeltaLog.for_table(table)
    deadline = time.monotonic() + seconds
    n = 0
    with out.open("w") as lines:
        while n < MIN_COMMITS or time.monotonic() < deadline:
            path = f"{writer}-{n}.parquet"
            n += 1
            txn = OptimisticTransaction(log, log.snapshot())
            txn.add_files([AddFile(path, {}, 1, int(time.time() * 1000), data_change=True)])
            txn.record_operation(Operation(OperationName.WRITE, {"mode": "Append"}), {})
            try:
                version = txn.commit()
                lines.write(json.dumps({"path": path, "acked": version}) + "\n")
            except CommitFailedError as exc:
                lines.write(json.dumps({"path": path, "failed": str(exc)}) + "\n")
            lines.flush()


def run_appenders(table: str, tmp: Path, *, processes: int, seconds: float, faults: str) -> None:
    """Runs the writer processes to the end; raises if one of them crashed."""
    env = {**os.environ, "DELTATX_S3_FAULTS": faults}
    procs = [
        subprocess.Popen(
            [sys.executable, __file__, table, f"w{i}", str(seconds), str(tmp / f"w{i}.jsonl")],
            env=env,
            stderr=subprocess.PIPE,
        )
        for i in range(processes)
    ]
    for p in procs:
        _, err = p.communicate(timeout=seconds + 300)
        assert p.returncode == 0, err.decode()[-2000:]


def check_log(table: str, tmp: Path) -> tuple[int, int]:
    """No acknowledged commit lost, none twice; returns (acknowledged, failed) counts."""
    log = DeltaLog.for_table(table)
    latest = log.latest_version()
    seen: dict[str, int] = {}
    txn_ids: set[str] = set()
    for version in range(1, latest + 1):
        actions = log.read_commit(version)
        infos = [a for a in actions if isinstance(a, CommitInfo)]
        assert len(infos) == 1 and infos[0].txn_id not in txn_ids, f"v{version} twice"
        txn_ids.add(str(infos[0].txn_id))
        for a in actions:
            if isinstance(a, AddFile):
                assert a.path not in seen, f"{a.path} committed at {seen[a.path]} and {version}"
                seen[a.path] = version
    acked = failed = 0
    for out in sorted(tmp.glob("w*.jsonl")):
        for line in out.read_text().splitlines():
            entry = json.loads(line)
            if "acked" in entry:
                acked += 1
                assert seen.get(entry["path"]) == entry["acked"], f"acknowledged {entry} lost"
            else:
                failed += 1
    assert len(seen) >= acked
    assert len(log.snapshot().add_files()) == len(seen)
    return acked, failed


if __name__ == "__main__":
    table, writer, seconds, out = sys.argv[1:5]
    append_for(table, writer, float(seconds), Path(out))
