"""A deletion-vector read against the same table purged, once the JVM is warm.

Case 10 times each read four times in a fresh process (one warm-up), where the JIT is still
compiling; this runs rounds of many reads each, interleaved, and reports per round the median
wall time of ``to_df()`` plus an aggregate, and the CPU the executor threads spent per read
(read from ``/proc``, so the JIT's and the collector's threads are left out). Run with
``python -m benchmarks.dv_read_breakdown [rows] [files] [rounds]`` from the repository root
(three rounds unless told; more show where the JIT settles).
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from benchmarks.datasource_cases import dv_and_purged
from benchmarks.spark_cases import start_session


def _executor_cpu_seconds() -> float:
    """CPU seconds of this machine's Spark executor threads (local mode: the one JVM)."""
    total = 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/comm") as f:
                if f.read().strip() != "java":
                    continue
            for tid in os.listdir(f"/proc/{pid}/task"):
                with open(f"/proc/{pid}/task/{tid}/comm") as f:
                    if not f.read().startswith("Executor task"):
                        continue
                with open(f"/proc/{pid}/task/{tid}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                total += int(fields[11]) + int(fields[12])
        except OSError:
            continue
    return total / os.sysconf("SC_CLK_TCK")


def _round(spark: SparkSession, path: str, reads: int) -> tuple[float, float]:
    """(median wall seconds, executor CPU seconds per read) of ``reads`` reads of ``path``."""
    from deltatx import DeltaTable

    walls = []
    cpu = _executor_cpu_seconds()
    for _ in range(reads):
        start = time.perf_counter()
        DeltaTable.for_path(spark, path).to_df().agg(F.sum("v"), F.count("*")).collect()
        walls.append(time.perf_counter() - start)
    return statistics.median(walls), (_executor_cpu_seconds() - cpu) / reads


def main(argv: list[str]) -> int:
    """Builds the two tables, then prints interleaved rounds of reads of each."""

    rows = int(argv[0]) if argv else 4_000_000
    files = int(argv[1]) if len(argv) > 1 else 16
    rounds = int(argv[2]) if len(argv) > 2 else 3
    spark, _ = start_session()
    with tempfile.TemporaryDirectory(prefix="deltatx-dv-read-") as workdir:
        dv, purged = dv_and_purged(spark, workdir, rows, files, name="dv")
        print(f"{rows:,} rows in {files} files, deletion vectors over 10% of them")
        for number in range(1, rounds + 1):
            with_dvs = _round(spark, dv, 15)
            clean = _round(spark, purged, 15)
            print(
                f"round {number}: with DVs {with_dvs[0] * 1e3:6.1f} ms "
                f"(executor CPU {with_dvs[1] * 1e3:6.1f} ms), purged {clean[0] * 1e3:6.1f} ms "
                f"({clean[1] * 1e3:6.1f} ms): wall ratio {with_dvs[0] / clean[0]:.2f}, "
                f"CPU ratio {with_dvs[1] / max(clean[1], 1e-9):.2f}"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
