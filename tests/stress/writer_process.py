"""A separate writer process with its own Spark session (run by the stress test)."""

from __future__ import annotations

import sys
from pathlib import Path

from workload import run_writer  # type: ignore[import-not-found]

if __name__ == "__main__":
    path, writer, seconds, out, seed, ready = sys.argv[1:7]
    import deltatx

    spark = deltatx.spark_session()
    Path(ready).touch()  # the test starts its threads now (workload.wait_until_ready)
    run_writer(spark, path, writer, seconds=float(seconds), out=Path(out), seed=int(seed))
    spark.stop()
