"""A writer process for the serializability checker, with its own Spark session."""

from __future__ import annotations

import sys
from pathlib import Path

from history import run_history  # type: ignore[import-not-found]

if __name__ == "__main__":
    path, writer, seconds, out, seed, reinsert, ready = sys.argv[1:8]
    import deltatx

    spark = deltatx.spark_session()
    Path(ready).touch()  # the test starts its threads now (workload.wait_until_ready)
    run_history(
        spark,
        path,
        writer,
        seconds=float(seconds),
        out=Path(out),
        seed=int(seed),
        reinsert=reinsert == "1",
    )
    spark.stop()
