"""One writer of the row-level rebase stress test: deletes or updates rows it alone owns.

Run in a thread (``run_row_writer``) or as a process (``python row_level_writer.py ...``).
Each attempt is logged as a JSON line once its outcome is known, so the test can check that
every acknowledged change is in the table and no other change is.
"""

from __future__ import annotations

import json
import random
import sys
import time
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from deltatx import DeltaTable
from deltatx.errors import DeltaError


def run_row_writer(
    spark: SparkSession,
    path: str,
    writer: int,
    *,
    writers: int,
    rows: int,
    seconds: float,
    out: Path,
    seed: int,
) -> None:
    """Until ``seconds`` pass, changes 1-3 untouched rows with ``id % writers == writer``."""
    rng = random.Random(seed)
    pool = [i for i in range(rows) if i % writers == writer]
    rng.shuffle(pool)
    dt = DeltaTable.for_path(spark, path)
    deadline = time.monotonic() + seconds
    with out.open("a", encoding="utf-8") as log:
        n = 0
        while pool and time.monotonic() < deadline:
            n += 1
            ids = [pool.pop() for _ in range(min(len(pool), rng.randint(1, 3)))]
            kind = rng.choice(["delete", "update"])
            marker = writer * 1_000_000 + n
            cond = f"id IN ({', '.join(map(str, ids))})"
            record: dict[str, Any] = {
                "writer": writer,
                "kind": kind,
                "ids": ids,
                "marker": marker,
                "version": None,
                "error": None,
            }
            try:
                with dt.begin() as txn:
                    if kind == "delete":
                        txn.delete(cond)
                    else:
                        txn.update(cond, {"v": str(marker)})
                record["version"] = txn.core.result.version if txn.core.result else None
            except DeltaError as exc:
                record["error"] = f"{type(exc).__name__}: {exc}"[:500]
            log.write(json.dumps(record) + "\n")
            log.flush()


def main(argv: list[str]) -> None:
    """``row_level_writer.py PATH WRITER WRITERS ROWS SECONDS OUT SEED`` (process mode)."""
    path, writer, writers, rows, seconds, out, seed = argv
    from deltatx.spark.session import spark_session

    run_row_writer(
        spark_session(),
        path,
        int(writer),
        writers=int(writers),
        rows=int(rows),
        seconds=float(seconds),
        out=Path(out),
        seed=int(seed),
    )


if __name__ == "__main__":
    main(sys.argv[1:])
