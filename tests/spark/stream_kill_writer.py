"""Runs a streaming query into a Delta table and SIGKILLs itself right after a batch commits.

Used by ``test_streaming.py``: argv is the JSON source folder, the table and the checkpoint.
The process kills itself as soon as the table's second commit (batch 1) appears, which lands
between the table commit and Spark's record of the batch in the checkpoint or just after.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from pathlib import Path

import deltatx


def _kill_after_second_commit(table: Path) -> None:
    second = table / "_delta_log" / f"{1:020d}.json"
    deadline = time.monotonic() + 150
    while time.monotonic() < deadline:
        if second.exists():
            # The whole driver dies, its JVM included (the test starts this process in a
            # session of its own): a JVM left running would go on with the batch.
            os.killpg(os.getpgid(0), signal.SIGKILL)
        time.sleep(0.005)
    os._exit(3)


def main() -> None:
    source, table, checkpoint = sys.argv[1:4]
    threading.Thread(target=_kill_after_second_commit, args=(Path(table),), daemon=True).start()
    spark = deltatx.spark_session()
    query = (
        spark.readStream.schema("id long")
        .option("maxFilesPerTrigger", 1)
        .json(source)
        .writeStream.format("delta")
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start(table)
    )
    query.awaitTermination(150)
    os._exit(4)


if __name__ == "__main__":
    main()
