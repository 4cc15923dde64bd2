"""The row-level rebase under load: six writers change disjoint rows of one single-file table.

Seed 000 (row-level concurrency): UPDATE, DELETE and MERGE "Puede causar un conflicto al
modificar el mismo registro" -- so writers that change different rows of the same file must all
commit, each rebasing its deletion vector onto the winners'. Six writers (threads sharing one
session; processes with their own when ``DELTATX_STRESS_FULL`` is set) each delete or update
random rows that only they own, for a bounded time. Afterwards: every acknowledged change is in
the table and no other change is, no row is changed twice or duplicated, versions are
contiguous and every version is an acknowledged commit.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

import deltatx
from deltatx import DeltaTable
from deltatx.kernel.actions import CommitInfo
from deltatx.log.delta_log import DeltaLog

from .row_level_writer import run_row_writer

FULL = bool(os.environ.get("DELTATX_STRESS_FULL"))
SECONDS = float(os.environ.get("DELTATX_STRESS_SECONDS", "90" if FULL else "10"))
WRITERS = 6
ROWS = 3000
HERE = Path(__file__).parent


def _start_writers(spark: SparkSession, path: str, tmp_path: Path) -> list[Path]:
    logs = [tmp_path / f"writer{n}.jsonl" for n in range(WRITERS)]
    if FULL:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), *sys.path])}
        procs = [
            subprocess.Popen(
                [
                    sys.executable,
                    str(HERE / "row_level_writer.py"),
                    path,
                    str(n),
                    str(WRITERS),
                    str(ROWS),
                    str(SECONDS),
                    str(logs[n]),
                    str(500 + n),
                ],
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
            )
            for n in range(WRITERS)
        ]
        for p in procs:
            _, stderr = p.communicate(timeout=SECONDS + 300)
            assert p.returncode == 0, stderr.decode()[-3000:]
        return logs
    errors: list[BaseException] = []

    def guarded(n: int) -> None:
        try:
            run_row_writer(
                spark,
                path,
                n,
                writers=WRITERS,
                rows=ROWS,
                seconds=SECONDS,
                out=logs[n],
                seed=500 + n,
            )
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=guarded, args=(n,)) for n in range(WRITERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    return logs


def test_disjoint_row_changes_all_land(spark: SparkSession, tmp_path: Path) -> None:
    path = str(tmp_path / "table")
    data = spark.range(0, ROWS).select("id", F.lit(0).cast("bigint").alias("v")).coalesce(1)
    deltatx.write(data, path)  # new tables have deletion vectors; one file, unpartitioned
    log = DeltaLog.for_table(path)
    assert len(log.snapshot().add_files()) == 1
    base_version = log.latest_version()

    logs = _start_writers(spark, path, tmp_path)
    attempts: list[dict[str, Any]] = [
        json.loads(line) for f in logs if f.exists() for line in f.read_text().splitlines()
    ]
    acknowledged = [a for a in attempts if a["version"] is not None]
    failed = [a for a in attempts if a["version"] is None]
    print(
        f"\nrow-level rebase: {len(acknowledged)} commits, {len(failed)} failures "
        f"({'processes' if FULL else 'threads'}, {SECONDS:.0f} s)"
    )
    assert len(acknowledged) >= WRITERS, "the workload should have committed a fair amount"
    assert {a["writer"] for a in acknowledged} == set(range(WRITERS))
    # Different rows never conflict; a failure could only be the retry limit under load.
    assert all("Concurrent" not in (a["error"] or "") for a in failed), failed[:3]

    versions = sorted(a["version"] for a in acknowledged)
    assert versions == list(range(base_version + 1, base_version + 1 + len(acknowledged)))
    latest = log.latest_version()
    assert latest == base_version + len(acknowledged), "every version is an acknowledged commit"
    txn_ids = []
    for v in range(latest + 1):
        info = log.read_commit(v)[0]
        assert isinstance(info, CommitInfo)
        txn_ids.append(info.txn_id)
    assert len(set(txn_ids)) == len(txn_ids), "a commit appears twice"

    expected = {i: 0 for i in range(ROWS)}
    changed: set[int] = set()
    for a in acknowledged:
        for i in a["ids"]:
            assert i not in changed, f"row {i} changed twice"
            changed.add(i)
            if a["kind"] == "delete":
                del expected[i]
            else:
                expected[i] = a["marker"]
    got_rows = DeltaTable.for_path(spark, path).to_df().collect()
    got = [(int(r["id"]), int(r["v"])) for r in got_rows]
    assert len(got) == len({i for i, _ in got}), "a row appears twice"
    assert dict(got) == expected, "an acknowledged change is missing or a failed one landed"
