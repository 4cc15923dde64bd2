"""Case 10: contended DML, with and without re-execution (issue 21).

4 writer threads (one shared Spark session, one DeltaTable handle each) update one random
partition out of 8 in a loop for a fixed window: ``UPDATE ... SET v = v + 1 WHERE part =
'pN'``. Two writers on the same partition conflict. Without retries the user loop re-raises
(the statement did not complete); with ``retries=5`` deltatx re-executes it on the latest
snapshot. Reported: completed statements per second, and the share of statements that
completed. Anomalies are checked exactly: every row of partition N must equal the number of
acknowledged updates of N (an update lost or applied twice shows up).
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from benchmarks.harness import Figure, Row, Stats
from deltatx.version import __version__ as DELTATX_VERSION

WRITERS = 4
PARTITIONS = 8
ROWS_PER_PARTITION = 50
TARGET_SHARE = 0.99


@dataclass(frozen=True, slots=True)
class Outcome:
    """One window of the contended workload."""

    retries: int
    seconds: float
    completed: int
    failed: int
    anomalies: int
    attempts: int

    @property
    def statements(self) -> int:
        """Statements started."""
        return self.completed + self.failed

    @property
    def share(self) -> float:
        """Share of the statements that completed."""
        return self.completed / self.statements if self.statements else 0.0

    @property
    def throughput(self) -> float:
        """Completed statements per second."""
        return self.completed / self.seconds


def run_window(spark: SparkSession, path: str, *, retries: int, seconds: float) -> Outcome:
    """Creates a fresh table and runs the 4 writers on it for ``seconds``."""
    import deltatx
    from deltatx import DeltaTable
    from deltatx.errors import ConcurrentModificationException

    data = spark.range(0, PARTITIONS * ROWS_PER_PARTITION).select(
        F.col("id"),
        F.concat(F.lit("p"), (F.col("id") % PARTITIONS).cast("string")).alias("part"),
        F.lit(0).cast("bigint").alias("v"),
    )
    deltatx.write(data, path, partition_by=["part"])
    acknowledged = [0] * PARTITIONS
    failed = [0]
    attempts = [0]
    lock = threading.Lock()
    errors: list[BaseException] = []

    def writer(n: int) -> None:
        rng = random.Random(n)
        dt = DeltaTable.for_path(spark, path)
        deadline = time.monotonic() + seconds
        try:
            while time.monotonic() < deadline:
                p = rng.randrange(PARTITIONS)
                try:
                    m = dt.update(f"part = 'p{p}'", {"v": "v + 1"}, retries=retries)
                except ConcurrentModificationException:
                    with lock:  # the user loop re-raises: this statement did not complete
                        failed[0] += 1
                    continue
                with lock:
                    acknowledged[p] += 1
                    attempts[0] += m.attempts
        except BaseException as exc:
            errors.append(exc)

    t0 = time.perf_counter()
    threads = [threading.Thread(target=writer, args=(n,)) for n in range(WRITERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - t0
    if errors:
        raise errors[0]
    final = DeltaTable.for_path(spark, path).to_df().groupBy("part", "v").count().collect()
    anomalies = sum(
        int(r["count"]) for r in final if int(r["v"]) != acknowledged[int(r["part"][1:])]
    )
    return Outcome(retries, elapsed, sum(acknowledged), failed[0], anomalies, attempts[0])


def case_contention(
    spark: SparkSession, workdir: str, seconds: float, log: Callable[[str], None]
) -> list[Row]:
    """Both windows, as report rows (no retries first, then ``retries=5``)."""
    rows = []
    for retries in (0, 5):
        out = run_window(
            spark, f"{workdir}/contention-r{retries}", retries=retries, seconds=seconds
        )
        log(
            f"contended DML retries={retries}: {out.completed}/{out.statements} completed "
            f"({out.share:.1%}), {out.throughput:.2f} statements/s, {out.anomalies} anomalies"
        )
        what = "user loop re-raises" if retries == 0 else f"retries={retries}"
        row = Row(
            case="10 contended DML",
            name=f"{WRITERS} writers x 1 of {PARTITIONS} partitions, {what}",
            size=f"{seconds:.0f} s window, {PARTITIONS * ROWS_PER_PARTITION} rows",
            unit="statements/s",
            higher_is_better=True,
            deltatx=Figure(
                "deltatx",
                DELTATX_VERSION,
                Stats.of([out.throughput]),
                {
                    "statements": out.statements,
                    "completed": out.completed,
                    "completed_share": out.share,
                    "anomalies": out.anomalies,
                    "executions": out.attempts,
                },
            ),
            notes=(
                f"{out.completed}/{out.statements} statements completed ({out.share:.1%}); "
                f"{out.anomalies} anomalies; {out.attempts} executions for the completed "
                f"ones; one timed window"
            ),
        )
        if retries:
            row.target = f">= {TARGET_SHARE:.0%} completed, no anomalies"
            row.met = out.share >= TARGET_SHARE and out.anomalies == 0
        rows.append(row)
    return rows
