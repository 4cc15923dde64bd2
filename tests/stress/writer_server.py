"""A writer process with its own Spark session that serves one stress run after another.

Started once per pytest session (see conftest.py), so the stress tests pay for a writer JVM's
start-up once, not once per test. Each request is one JSON line on stdin naming the workload
(``history``: history.run_history; ``writer``: workload.run_writer) and its arguments; the
answer, once the run is over, is one JSON line on the protocol stream (the real stdout; all
else Spark prints goes to stderr): ``{"id", "ok": true}`` or
``{"id", "ok": false, "error": traceback}`` (the request's id).
The process touches its ready file once it has a session and ends when stdin closes.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from pathlib import Path

from history import run_history  # type: ignore[import-not-found]
from workload import run_writer  # type: ignore[import-not-found]

if __name__ == "__main__":
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    import deltatx

    spark = deltatx.spark_session()
    Path(sys.argv[1]).touch()
    for line in sys.stdin:
        job = json.loads(line)
        try:
            common = {"seconds": job["seconds"], "out": Path(job["out"]), "seed": job["seed"]}
            if job["kind"] == "history":
                run_history(spark, job["path"], job["writer"], reinsert=job["reinsert"], **common)
            else:
                run_writer(spark, job["path"], job["writer"], **common)
            answer: dict[str, object] = {"id": job["id"], "ok": True}
        except BaseException:
            answer = {"id": job["id"], "ok": False, "error": traceback.format_exc()[-3000:]}
        out.write(json.dumps(answer) + "\n")
        out.flush()
    spark.stop()
